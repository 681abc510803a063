// A device buffer owned by the host code that launches the attention and THD kernels (host
// tensors in, device copy, kernel, copy back): cudaMalloc / cudaFree, every call checked.
// Only for CUDA-enabled sources.
#pragma once

#include <span>

#include "core/cuda_check.h"

namespace dcp::attn::cuda {

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (n > 0) DCP_CUDA_CHECK(cudaMalloc(&ptr_, n * sizeof(T)));
  }
  explicit DeviceArray(std::span<const T> host) : DeviceArray(host.size()) {
    if (n_ > 0) DCP_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceArray() {
    if (ptr_) cudaFree(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept : n_(o.n_), ptr_(o.ptr_) {
    o.n_ = 0;
    o.ptr_ = nullptr;
  }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      if (ptr_) cudaFree(ptr_);
      n_ = o.n_;
      ptr_ = o.ptr_;
      o.n_ = 0;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  DeviceArray() : n_(0) {}
  T* get() const { return ptr_; }
  // Fills every byte with 0xFF: NaN in fp32 and in bf16/fp16, -1 in integers, so an output the
  // kernel fails to write cannot pass a comparison by accident.
  void poison() {
    if (n_ > 0) DCP_CUDA_CHECK(cudaMemset(ptr_, 0xFF, n_ * sizeof(T)));
  }
  size_t size() const { return n_; }
  void to_host(std::span<T> host) const {
    DCP_CHECK(host.size() == n_, "DeviceArray: copying ", n_, " elements into ", host.size());
    if (n_ > 0) DCP_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

}  // namespace dcp::attn::cuda
