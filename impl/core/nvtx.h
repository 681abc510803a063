// NVTX RAII range for every public entry point (as TE's NVTE_API_CALL). The label comes from
// __func__ so it cannot drift after a rename. Without CUDA (no NVTX headers) it compiles away.
#pragma once

#if defined(DCP_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
namespace dcp {
class ScopedRange {
 public:
  explicit ScopedRange(const char* name) { nvtxRangePushA(name); }
  ~ScopedRange() { nvtxRangePop(); }
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
};
}  // namespace dcp
#else
namespace dcp {
class ScopedRange {
 public:
  explicit ScopedRange(const char*) {}
};
}  // namespace dcp
#endif

#define DCP_NVTX_CONCAT2(a, b) a##b
#define DCP_NVTX_CONCAT(a, b) DCP_NVTX_CONCAT2(a, b)
#define DCP_NVTX_RANGE() ::dcp::ScopedRange DCP_NVTX_CONCAT(dcp_nvtx_range_, __LINE__)(__func__)
