// Causal depthwise conv kernels (contract in causal_conv1d.h; element math in
// causal_conv1d.cuh).
// Both passes: blocks of (32 channels, 8 lanes) own 128 consecutive rows; thread (channel,
//   lane) owns 16 of them and runs causal_conv::forward_run / backward_run (register windows:
//   each u and dy read once, the pre-activation computed once per row).
// backward_rows: du for each element, and per thread the run's sums of dpre * u (dweight) and
//   dpre (dbias); the 8 lanes are added in order into scratch [row_blocks, channels, K + 1].
// backward_params: per (channel, k) output, 8 lanes add interleaved row blocks, then the lanes
//   are added in order.
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/nn/causal_conv1d.cuh"
#include "kernels/nn/causal_conv1d.h"

namespace resident::kernels {

namespace {

constexpr int kTileChannels = 32;
constexpr int kLanes = 8;
constexpr int kRowsPerBlock = kLanes * causal_conv::kRunRows;  // 128
constexpr int kMaxK = static_cast<int>(kCausalConvMaxKernel);
static_assert(causal_conv::kMaxTaps == kMaxK, "the thread programs hold kCausalConvMaxKernel taps");

__global__ void __launch_bounds__(kTileChannels * kLanes)
    causal_conv1d_forward_kernel(float* y, long long y_stride, causal_conv::View v,
                                 long long rows, long long row_blocks, int channels) {
  const int c = blockIdx.x * kTileChannels + threadIdx.x;
  if (c >= channels) return;
  for (long long block = blockIdx.y; block < row_blocks; block += gridDim.y) {
    const long long base = block * kRowsPerBlock + threadIdx.y * causal_conv::kRunRows;
    if (base >= rows) continue;
    causal_conv::forward_run(y, y_stride, v, rows, base, static_cast<int>(base % v.length), c);
  }
}

__global__ void __launch_bounds__(kTileChannels * kLanes)
    causal_conv1d_backward_rows_kernel(float* du, long long du_stride, float* scratch,
                                       const float* dy, long long dy_stride, causal_conv::View v,
                                       long long rows, int channels) {
  __shared__ float partial[kLanes][kTileChannels][kMaxK + 1];
  const int c = blockIdx.x * kTileChannels + threadIdx.x;
  const int lane = threadIdx.y;
  const long long base = static_cast<long long>(blockIdx.y) * kRowsPerBlock +
                         lane * causal_conv::kRunRows;
  float sums[kMaxK + 1];
#pragma unroll
  for (int k = 0; k <= kMaxK; ++k) sums[k] = 0.0f;
  if (c < channels && base < rows)
    causal_conv::backward_run(du, du_stride, dy, dy_stride, v, rows, base,
                              static_cast<int>(base % v.length), c, sums);
#pragma unroll
  for (int k = 0; k <= kMaxK; ++k) partial[lane][threadIdx.x][k] = sums[k];
  __syncthreads();
  if (lane != 0 || c >= channels) return;
  // sums[m] pairs dpre(t) with u(t - m), i.e. tap k = K - 1 - m.
  const int K = v.kernel;
  float* out = scratch + (static_cast<long long>(blockIdx.y) * channels + c) * (K + 1);
  for (int k = 0; k <= K; ++k) {
    const int slot = k < K ? K - 1 - k : kMaxK;
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += partial[l][threadIdx.x][slot];
    out[k] = s;
  }
}

// dweight[c, k] / dbias[c] from the row blocks' partials: per (channel, k) output, 8 lanes add
// interleaved row blocks, then the lanes are added in order.
__global__ void __launch_bounds__(kTileChannels * kLanes)
    causal_conv1d_backward_params_kernel(float* dweight, float* dbias, const float* scratch,
                                         int row_blocks, int channels, int K, bool accumulate) {
  __shared__ float partial[kLanes][kTileChannels];
  const int i = blockIdx.x * kTileChannels + threadIdx.x;
  const int outputs = channels * (K + 1);
  float s = 0.0f;
  if (i < outputs)
    for (int r = threadIdx.y; r < row_blocks; r += kLanes)
      s += scratch[static_cast<long long>(r) * outputs + i];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || i >= outputs) return;
  float total = 0.0f;
  for (int l = 0; l < kLanes; ++l) total += partial[l][threadIdx.x];
  const int c = i / (K + 1), k = i % (K + 1);
  float* out = k < K ? (dweight != nullptr ? dweight + c * K + k : nullptr)
                     : (dbias != nullptr ? dbias + c : nullptr);
  if (out != nullptr) *out = accumulate ? *out + total : total;
}

void check_args(const char* call, std::size_t batch, std::size_t length, std::size_t channels,
                std::size_t kernel, std::size_t in_stride, std::size_t out_stride) {
  const bool ok = batch >= 1 && length >= 1 && channels >= 1 && kernel >= 1 &&
                  kernel <= kCausalConvMaxKernel && in_stride >= channels &&
                  out_stride >= channels && batch * length <= (std::size_t{1} << 40) &&
                  channels <= (std::size_t{1} << 20);
  if (!ok)
    throw Error(call, "invalid shape",
                "batch " + std::to_string(batch) + ", length " + std::to_string(length) +
                    ", channels " + std::to_string(channels) + ", kernel " +
                    std::to_string(kernel) + " (allowed [1, 8]), strides " +
                    std::to_string(in_stride) + " / " + std::to_string(out_stride) +
                    " (>= channels)",
                __FILE__, __LINE__);
}

causal_conv::View make_view(const float* u, std::size_t u_stride, const float* weight,
                            const float* bias, std::size_t length, std::size_t kernel, bool silu) {
  return causal_conv::View{u,    static_cast<long long>(u_stride), weight, bias,
                           static_cast<int>(length), static_cast<int>(kernel), silu};
}

std::size_t row_blocks(std::size_t batch, std::size_t length) {
  return (batch * length + kRowsPerBlock - 1) / kRowsPerBlock;
}

}  // namespace

void launch_causal_conv1d_forward(float* y, std::size_t y_stride, const float* u,
                                  std::size_t u_stride, const float* weight, const float* bias,
                                  std::size_t batch, std::size_t length, std::size_t channels,
                                  std::size_t kernel, bool silu, cudaStream_t stream) {
  check_args("launch_causal_conv1d_forward", batch, length, channels, kernel, u_stride, y_stride);
  NvtxRange range("causal_conv1d_forward");
  const long long rows = static_cast<long long>(batch * length);
  const long long blocks_y = static_cast<long long>(row_blocks(batch, length));
  const dim3 grid(static_cast<unsigned>((channels + kTileChannels - 1) / kTileChannels),
                  static_cast<unsigned>(blocks_y < 65535 ? blocks_y : 65535));
  causal_conv1d_forward_kernel<<<grid, dim3(kTileChannels, kLanes), 0, stream>>>(
      y, static_cast<long long>(y_stride), make_view(u, u_stride, weight, bias, length, kernel, silu),
      rows, blocks_y, static_cast<int>(channels));
  RESIDENT_CHECK_LAUNCH("causal_conv1d_forward_kernel");
}

std::size_t causal_conv1d_backward_scratch_floats(std::size_t batch, std::size_t length,
                                                  std::size_t channels, std::size_t kernel) {
  return row_blocks(batch, length) * channels * (kernel + 1);
}

void launch_causal_conv1d_backward(float* du, std::size_t du_stride, float* dweight, float* dbias,
                                   float* scratch, std::size_t scratch_floats, const float* dy,
                                   std::size_t dy_stride, const float* u, std::size_t u_stride,
                                   const float* weight, const float* bias, std::size_t batch,
                                   std::size_t length, std::size_t channels, std::size_t kernel,
                                   bool silu, nn::GradMode mode, cudaStream_t stream) {
  check_args("launch_causal_conv1d_backward", batch, length, channels, kernel, u_stride,
             dy_stride);
  if (du != nullptr && du_stride < channels)
    throw Error("launch_causal_conv1d_backward", "invalid shape",
                "du_stride " + std::to_string(du_stride) + " < channels " +
                    std::to_string(channels),
                __FILE__, __LINE__);
  const std::size_t need = causal_conv1d_backward_scratch_floats(batch, length, channels, kernel);
  if (scratch == nullptr || scratch_floats < need)
    throw Error("launch_causal_conv1d_backward", "scratch too small",
                std::to_string(scratch_floats) + " floats, need " + std::to_string(need),
                __FILE__, __LINE__);
  if (row_blocks(batch, length) > 65535)
    throw Error("launch_causal_conv1d_backward", "too many rows",
                "batch * length = " + std::to_string(batch * length) + ", allowed [1, " +
                    std::to_string(65535 * kRowsPerBlock) + "]",
                __FILE__, __LINE__);
  NvtxRange range("causal_conv1d_backward");
  const bool accumulate = mode == nn::GradMode::Accumulate;
  const auto blocks_y = static_cast<unsigned>(row_blocks(batch, length));
  const dim3 grid(static_cast<unsigned>((channels + kTileChannels - 1) / kTileChannels), blocks_y);
  const dim3 block(kTileChannels, kLanes);
  causal_conv1d_backward_rows_kernel<<<grid, block, 0, stream>>>(
      du, static_cast<long long>(du_stride), scratch, dy, static_cast<long long>(dy_stride),
      make_view(u, u_stride, weight, bias, length, kernel, silu),
      static_cast<long long>(batch * length), static_cast<int>(channels));
  RESIDENT_CHECK_LAUNCH("causal_conv1d_backward_rows_kernel");
  if (dweight == nullptr && dbias == nullptr) return;
  const int outputs = static_cast<int>(channels * (kernel + 1));
  causal_conv1d_backward_params_kernel<<<(outputs + kTileChannels - 1) / kTileChannels, block, 0,
                                         stream>>>(
      dweight, dbias, scratch, static_cast<int>(blocks_y), static_cast<int>(channels),
      static_cast<int>(kernel), accumulate);
  RESIDENT_CHECK_LAUNCH("causal_conv1d_backward_params_kernel");
}

}  // namespace resident::kernels
