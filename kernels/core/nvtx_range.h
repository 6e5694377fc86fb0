// NvtxRange: RAII push/pop of an NVTX range, so regions show in Nsight Systems and in
// resident-audit's per-range table.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace resident {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) noexcept { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace resident
