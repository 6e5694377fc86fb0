// Cross-entropy loss and gradient (contract in cross_entropy_loss.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/cross_entropy_loss.h"

namespace resident::kernels::data {

namespace {

constexpr unsigned kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    cross_entropy_loss(float* loss, float* d_logits, const float* logits,
                       const std::int32_t* labels, std::size_t rows, std::size_t classes,
                       float d_loss) {
  __shared__ float partial[kThreads];
  float sum = 0.0f;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  for (std::size_t r = threadIdx.x; r < rows; r += blockDim.x) {
    const float* z = logits + r * classes;
    const std::int32_t label = labels[r];
    const bool valid = label >= 0 && static_cast<std::size_t>(label) < classes;
    float mx = z[0];
    for (std::size_t c = 1; c < classes; ++c) mx = fmaxf(mx, z[c]);
    float s = 0.0f;
    for (std::size_t c = 0; c < classes; ++c) s += expf(z[c] - mx);
    const float nan = __int_as_float(0x7fc00000);
    sum += valid ? (mx + logf(s) - z[label]) : nan;
    if (d_logits != nullptr)
      for (std::size_t c = 0; c < classes; ++c) {
        const float onehot = static_cast<std::int32_t>(c) == label ? 1.0f : 0.0f;
        d_logits[r * classes + c] =
            valid ? d_loss * ((expf(z[c] - mx) / s - onehot) * inv_rows) : nan;
      }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] / static_cast<float>(rows);
}

}  // namespace

void launch_cross_entropy_loss(float* loss, float* d_logits, const float* logits,
                               const std::int32_t* labels, std::size_t rows, std::size_t classes,
                               float d_loss, cudaStream_t stream) {
  if (rows == 0 || classes < 2 || classes > 1024)
    throw Error("launch_cross_entropy_loss", "invalid argument",
                "rows = " + std::to_string(rows) + ", classes = " + std::to_string(classes) +
                    "; allowed rows >= 1, classes in [2, 1024]",
                __FILE__, __LINE__);
  const NvtxRange range("data/cross_entropy_loss");
  cross_entropy_loss<<<1, kThreads, 0, stream>>>(loss, d_logits, logits, labels, rows, classes,
                                                 d_loss);
  RESIDENT_CHECK_LAUNCH("cross_entropy_loss");
}

}  // namespace resident::kernels::data
