// Confusion counts (contract in class_confusion.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/launch_config.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/class_confusion.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    class_confusion(unsigned long long* confusion, const float* logits,
                    const std::int32_t* labels, std::size_t rows, std::size_t classes) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += stride) {
    const std::int32_t label = labels[r];
    if (label < 0 || static_cast<std::size_t>(label) >= classes) continue;
    const float* z = logits + r * classes;
    std::size_t arg = 0;
    for (std::size_t c = 1; c < classes; ++c)
      if (z[c] > z[arg] || (z[arg] != z[arg] && z[c] == z[c])) arg = c;
    atomicAdd(confusion + static_cast<std::size_t>(label) * classes + arg, 1ull);
  }
}

}  // namespace

void launch_class_confusion(unsigned long long* confusion, const float* logits,
                            const std::int32_t* labels, std::size_t rows, std::size_t classes,
                            cudaStream_t stream) {
  if (rows == 0 || classes < 2 || classes > 1024)
    throw Error("launch_class_confusion", "invalid argument",
                "rows = " + std::to_string(rows) + ", classes = " + std::to_string(classes) +
                    "; allowed rows >= 1, classes in [2, 1024]",
                __FILE__, __LINE__);
  const NvtxRange range("data/class_confusion");
  class_confusion<<<grid_stride_blocks(rows, kThreads), kThreads, 0, stream>>>(
      confusion, logits, labels, rows, classes);
  RESIDENT_CHECK_LAUNCH("class_confusion");
}

}  // namespace resident::kernels::data
