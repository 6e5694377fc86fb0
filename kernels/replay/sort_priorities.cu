// Descending radix sort of the leaf priorities (CUB), for rank-based sampling. Keys: the
// `capacity` leaves of the sum tree (fp64), values: slot ids. CUB's radix sort is stable, and
// the input is in slot order, so equal priorities keep slot order (ties by slot ascending, as
// CpuRankOrder). Zero (never written) leaves sort last. Overwrites the outputs; no allocation:
// the temp storage is sized once with sort_priorities_temp_bytes.
#include <cub/device/device_radix_sort.cuh>

#include "kernels/replay/replay_kernels.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

std::size_t sort_priorities_temp_bytes(std::uint32_t capacity) {
  std::size_t bytes = 0;
  RESIDENT_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      nullptr, bytes, static_cast<const double*>(nullptr), static_cast<double*>(nullptr),
      static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
      static_cast<int>(capacity)));
  return bytes;
}

void launch_sort_priorities(double* sorted_priorities, std::uint32_t* sorted_slots,
                            const double* leaf_priorities, const std::uint32_t* slot_iota,
                            std::uint32_t capacity, void* temp, std::size_t temp_bytes,
                            cudaStream_t stream) {
  const NvtxRange range("replay/sort_priorities");
  RESIDENT_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(
      temp, temp_bytes, leaf_priorities, sorted_priorities, slot_iota, sorted_slots,
      static_cast<int>(capacity), 0, static_cast<int>(sizeof(double) * 8), stream));
}

}  // namespace resident::kernels
