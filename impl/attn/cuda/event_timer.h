// Seconds between two CUDA events on a stream: start(), the work, stop_s() (waits for the stop
// event). Every CUDA call checked (dcp::Error). Only for CUDA-enabled sources.
#pragma once

#include <cuda_runtime.h>

#include "core/cuda_check.h"

namespace dcp::attn::cuda {

class EventTimer {
 public:
  EventTimer() {
    DCP_CUDA_CHECK(cudaEventCreate(&a_));
    DCP_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~EventTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(cudaStream_t s = nullptr) { DCP_CUDA_CHECK(cudaEventRecord(a_, s)); }
  double stop_s(cudaStream_t s = nullptr) {
    DCP_CUDA_CHECK(cudaEventRecord(b_, s));
    DCP_CUDA_CHECK(cudaEventSynchronize(b_));
    float ms = 0;
    DCP_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
    return ms / 1e3;
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

}  // namespace dcp::attn::cuda
