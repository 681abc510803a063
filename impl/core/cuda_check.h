// DCP_CUDA_CHECK / DCP_NCCL_CHECK: include only from .cu files or CUDA-enabled sources.
// After every kernel launch: DCP_CUDA_CHECK(cudaGetLastError()).
#pragma once

#include "core/error.h"

#include <cuda_runtime.h>

#define DCP_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    cudaError_t dcp_err_ = (expr);                                                        \
    if (dcp_err_ != cudaSuccess) [[unlikely]]                                             \
      DCP_FAIL("CUDA error ", cudaGetErrorName(dcp_err_), " (", cudaGetErrorString(dcp_err_), \
               ") in ", #expr);                                                           \
  } while (0)

#ifdef DCP_HAVE_NCCL
#include <nccl.h>
// ncclGetLastError gives the detailed reason NCCL logged for the failing call.
#define DCP_NCCL_CHECK(expr, comm)                                                        \
  do {                                                                                    \
    ncclResult_t dcp_res_ = (expr);                                                       \
    if (dcp_res_ != ncclSuccess) [[unlikely]]                                             \
      DCP_FAIL("NCCL error ", ncclGetErrorString(dcp_res_), " in ", #expr, ": ",          \
               ncclGetLastError(comm));                                                   \
  } while (0)
#endif
