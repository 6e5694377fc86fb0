// Fused narrow-MLP backward (contract in mlp_backward_fused.h). Block = 128 threads, tile = 32
// rows, at most 384 blocks (each walks tiles b, b + grid, ...).
// Shared memory: W [out][in] row-major of every layer but the first (only the input gradients
// dz W read W, and layer 0's is not asked for; a float4 holds 4 consecutive inputs of one
// output row: no transpose), then three tiles [32][S],
// S = round4(widest + 1): `a`, the layer's input plus a column of ones (whose "weight gradient"
// is the bias gradient) zero-padded to a multiple of 4; `dz`, the layer's output gradient
// zero-padded likewise; and the next dz. 43 KB for 4-64-64-2, under the 48 KB default.
// Weight gradients: layer l's parameters, as a round4(out) x round4(in + 1) grid of 4x4 blocks,
// are numbered layer after layer; thread t owns blocks t, t + 128, ... (at most 4) and keeps
// their 16 sums in registers over all its block's tiles: per tile row, a float4 of dz and a
// float4 of a feed 16 FMAs. Input gradients: the forward's quad loop with W for W^T, times
// f'(a) from the saved outputs. The block's sums then go to scratch [block][parameter], and
// fused_mlp_backward_finish adds the blocks in block order. Every order depends on rows and the
// grid alone: deterministic.
#include "kernels/nn/mlp_backward_fused.h"

#include <algorithm>
#include <string>

#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/row_reduce.cuh"
#include "kernels/nn/tile_quad_product.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kThreads = 128;
constexpr unsigned kRows = 32;
constexpr unsigned kRowsPerPass = 4;
constexpr unsigned kMaxBlocksPerThread = 4;  // 4x4 gradient blocks a thread accumulates
// Blocks of a launch: min(tiles, 384): 3 per multiprocessor of an H100/H200 (168 registers x 128
// threads allow 3; at 256, 2 per SM left 1.95 warps per scheduler and the issue slots half idle,
// ncu on the H200). A fixed cap, so the scratch size and the summation order depend on rows alone,
// not on the device.
constexpr std::size_t kMaxGridBlocks = 384;
constexpr std::size_t kMaxSharedBytes = 48 * 1024;
constexpr unsigned kFinishSlices = 8;  // block slices the finish kernel adds in parallel

__host__ __device__ constexpr unsigned round4(unsigned n) { return (n + 3u) & ~3u; }

struct Layout {
  unsigned tile_stride = 0;    // S
  unsigned weight_floats = 0;  // sum over layers l >= 1 of out * in (in a multiple of 4)
  unsigned grad_blocks = 0;    // 4x4 gradient blocks of all layers
  unsigned parameters = 0;     // sum of out * in + out
};

// Floats of layer l's W in shared memory: rows of round4(in) (16-byte aligned rows).
__host__ __device__ inline unsigned weight_floats_of(const FusedMlp& mlp, unsigned l) {
  return mlp.widths[l + 1] * round4(mlp.widths[l]);
}

__host__ __device__ inline unsigned grad_blocks_of(const FusedMlp& mlp, unsigned l) {
  return (round4(mlp.widths[l + 1]) / 4) * (round4(mlp.widths[l] + 1) / 4);
}

__host__ __device__ inline unsigned parameters_of(const FusedMlp& mlp, unsigned l) {
  return mlp.widths[l + 1] * mlp.widths[l] + mlp.widths[l + 1];
}

__host__ __device__ inline Layout layout_of(const FusedMlp& mlp) {
  Layout layout;
  unsigned widest = 0;
  for (unsigned l = 0; l <= mlp.layers; ++l) widest = std::max(widest, mlp.widths[l]);
  layout.tile_stride = round4(widest + 1);
  for (unsigned l = 0; l < mlp.layers; ++l) {
    if (l > 0) layout.weight_floats += weight_floats_of(mlp, l);
    layout.grad_blocks += grad_blocks_of(mlp, l);
    layout.parameters += parameters_of(mlp, l);
  }
  return layout;
}

std::size_t shared_bytes_of(const FusedMlp& mlp) {
  const Layout layout = layout_of(mlp);
  return (std::size_t{layout.weight_floats} + 3 * kRows * layout.tile_stride) * sizeof(float);
}

// i / d for i + 0.5 < 2^21: (i + 0.5) / d lies at least 0.5 / d from an integer, and
// __fdividef's error (2 ulp, relative < 2^-22) moves it by less than 2^21 / d * 2^-22 = 0.5 / d.
__device__ inline unsigned quotient(unsigned i, unsigned d) {
  return static_cast<unsigned>(__fdividef(static_cast<float>(i) + 0.5f, static_cast<float>(d)));
}

// Loads a thread issues before its shared stores in load_tile: 32 rows x at most 68 columns
// over 128 threads (the loads of a tile are independent; issued together they cost one memory
// round trip, not one each).
constexpr unsigned kTileLoads = (kRows * 68 + kThreads - 1) / kThreads;

// A tile [32][cols] of a row-major [rows, width] matrix from row0 (rows past the end and columns
// past width read 0; column `width` reads 1 for a valid row when ones_column), into shared memory
// with row stride S. cols <= 68.
__device__ inline void load_tile(float* tile, unsigned stride, const float* __restrict__ source,
                                 std::size_t row0, std::size_t rows, unsigned width,
                                 unsigned cols, bool ones_column) {
  const unsigned total = kRows * cols;
  float v[kTileLoads];
#pragma unroll
  for (unsigned b = 0; b < kTileLoads; ++b) {
    const unsigned i = threadIdx.x + b * kThreads;
    const unsigned r = quotient(i, cols), c = i - r * cols;
    const std::size_t row = row0 + r;
    const bool valid = i < total && row < rows;
    v[b] = valid && c < width ? __ldg(source + row * width + c) : 0.0f;
    if (valid && ones_column && c == width) v[b] = 1.0f;
  }
#pragma unroll
  for (unsigned b = 0; b < kTileLoads; ++b) {
    const unsigned i = threadIdx.x + b * kThreads;
    if (i < total) {
      const unsigned r = quotient(i, cols);
      tile[r * stride + (i - r * cols)] = v[b];
    }
  }
}

template <ActivationKind Kind>
__global__ void __launch_bounds__(kThreads)
    fused_mlp_backward(const FusedMlp mlp, const float* __restrict__ x,
                       const float* __restrict__ dy, std::size_t rows,
                       float* __restrict__ scratch) {
  extern __shared__ float4 shared4[];
  float* const shared = reinterpret_cast<float*>(shared4);
  const unsigned tid = threadIdx.x;
  const unsigned layers = mlp.layers;
  const Layout layout = layout_of(mlp);
  const unsigned stride = layout.tile_stride;

  // W of layers 1.. (row-major, coalesced reads; in is a multiple of 4), kWeightLoads loads in
  // flight per thread before their stores.
  {
    constexpr unsigned kWeightLoads = 16;
    unsigned offset = 0;
    for (unsigned l = 1; l < layers; ++l) {
      const unsigned in = mlp.widths[l];
      const unsigned count = mlp.widths[l + 1] * in;
      const float* __restrict__ w = mlp.layer[l].weight;
      for (unsigned first = tid; first < count; first += kWeightLoads * kThreads) {
        float v[kWeightLoads];
#pragma unroll
        for (unsigned b = 0; b < kWeightLoads; ++b) {
          const unsigned i = first + b * kThreads;
          v[b] = i < count ? __ldg(w + i) : 0.0f;
        }
#pragma unroll
        for (unsigned b = 0; b < kWeightLoads; ++b)
          if (first + b * kThreads < count) shared[offset + first + b * kThreads] = v[b];
      }
      offset += weight_floats_of(mlp, l);
    }
  }

  // This thread's gradient blocks: layer (or -1), first output row j0, first column k0.
  int owner[kMaxBlocksPerThread];
  unsigned j0[kMaxBlocksPerThread], k0[kMaxBlocksPerThread];
#pragma unroll
  for (unsigned i = 0; i < kMaxBlocksPerThread; ++i) {
    owner[i] = -1;
    j0[i] = k0[i] = 0;
    unsigned b = tid + i * kThreads;
    for (unsigned l = 0; l < layers; ++l) {
      const unsigned count = grad_blocks_of(mlp, l);
      if (b < count) {
        const unsigned column_blocks = round4(mlp.widths[l] + 1) / 4;
        const unsigned jb = b / column_blocks;
        owner[i] = static_cast<int>(l);
        j0[i] = 4 * jb;
        k0[i] = 4 * (b - jb * column_blocks);
        break;
      }
      b -= count;
    }
  }
  float sums[kMaxBlocksPerThread][16];
#pragma unroll
  for (unsigned i = 0; i < kMaxBlocksPerThread; ++i)
#pragma unroll
    for (unsigned e = 0; e < 16; ++e) sums[i][e] = 0.0f;

  float* const tile_a = shared + layout.weight_floats;
  const unsigned out_last = mlp.widths[layers];
  const std::size_t tiles = (rows + kRows - 1) / kRows;
  for (std::size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::size_t row0 = tile * kRows;
    float* dz = tile_a + kRows * stride;
    float* next = dz + kRows * stride;
    __syncthreads();  // the previous tile's reads of every tile are done
    load_tile(dz, stride, dy, row0, rows, out_last, round4(out_last), false);
    unsigned weight_offset = layout.weight_floats;
    for (int l = static_cast<int>(layers) - 1; l >= 0; --l) {
      const unsigned in = mlp.widths[l], out = mlp.widths[l + 1];
      if (l > 0) weight_offset -= weight_floats_of(mlp, static_cast<unsigned>(l));
      const float* input = l == 0 ? x : mlp.layer[l - 1].activation;
      load_tile(tile_a, stride, input, row0, rows, in, round4(in + 1), true);
      __syncthreads();  // a and dz of layer l are complete

      // dW_l and db_l: sums over the tile's rows, row by row in order.
#pragma unroll
      for (unsigned i = 0; i < kMaxBlocksPerThread; ++i) {
        if (owner[i] != l) continue;
        const float* dz_block = dz + j0[i];
        const float* a_block = tile_a + k0[i];
        for (unsigned r = 0; r < kRows; ++r) {
          const float4 d = *reinterpret_cast<const float4*>(dz_block + r * stride);
          const float4 a = *reinterpret_cast<const float4*>(a_block + r * stride);
          const float dv[4] = {d.x, d.y, d.z, d.w}, av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
          for (unsigned jj = 0; jj < 4; ++jj)
#pragma unroll
            for (unsigned kk = 0; kk < 4; ++kk)
              sums[i][jj * 4 + kk] = fmaf(dv[jj], av[kk], sums[i][jj * 4 + kk]);
        }
      }

      // dz_{l-1} = (dz_l W_l) * f'(a_{l-1}) into `next` (in is a multiple of 4 here).
      if (l > 0) {
        const float* w = shared + weight_offset;
        const unsigned row_floats = round4(in);  // == in: hidden widths are multiples of 4
        const unsigned quads = in / 4, groups = kThreads / quads;
        const unsigned q = tid % quads, g = tid / quads;
        if (g < groups) {
          for (unsigned r0 = g; r0 < kRows; r0 += groups * kRowsPerPass) {
            float s[kRowsPerPass][4];
            tile_quad_product<kRowsPerPass, kRows>(s, dz, stride, w, row_floats, out, r0, groups,
                                                   q);
#pragma unroll
            for (unsigned m = 0; m < kRowsPerPass; ++m) {
              const unsigned r = r0 + m * groups;
              if (r >= kRows) break;
              // 16-byte aligned (S and 4q are multiples of 4): one float4 each, no bank conflicts.
              const float4 a = *reinterpret_cast<const float4*>(tile_a + r * stride + 4 * q);
              float4 g;
              g.x = s[m][0] * activation_math::derivative_from_output<Kind>(a.x);
              g.y = s[m][1] * activation_math::derivative_from_output<Kind>(a.y);
              g.z = s[m][2] * activation_math::derivative_from_output<Kind>(a.z);
              g.w = s[m][3] * activation_math::derivative_from_output<Kind>(a.w);
              *reinterpret_cast<float4*>(next + r * stride + 4 * q) = g;
            }
          }
        }
      }
      __syncthreads();  // next is complete; a and dz are free
      float* const t = dz;
      dz = next;
      next = t;
    }
  }

  // The block's sums, in parameter order (layer by layer: W row-major, then b).
  float* const block_sums = scratch + std::size_t{blockIdx.x} * layout.parameters;
#pragma unroll
  for (unsigned i = 0; i < kMaxBlocksPerThread; ++i) {
    if (owner[i] < 0) continue;
    const unsigned l = static_cast<unsigned>(owner[i]);
    unsigned first = 0;
    for (unsigned p = 0; p < l; ++p) first += parameters_of(mlp, p);
    const unsigned in = mlp.widths[l], out = mlp.widths[l + 1];
#pragma unroll
    for (unsigned jj = 0; jj < 4; ++jj)
#pragma unroll
      for (unsigned kk = 0; kk < 4; ++kk) {
        const unsigned j = j0[i] + jj, k = k0[i] + kk;
        if (j >= out || k > in) continue;
        block_sums[k < in ? first + j * in + k : first + out * in + j] = sums[i][jj * 4 + kk];
      }
  }
}

// grads (+)= the sum over blocks b = 0, 1, ... of scratch[b][p], per parameter p: a block of
// 32 x kFinishSlices threads takes 32 parameters; slice y adds blocks y, y + 8, ... in order,
// then slice 0 adds the 8 slices in order.
__global__ void __launch_bounds__(32 * kFinishSlices)
    fused_mlp_backward_finish(const float* __restrict__ scratch, unsigned blocks,
                              const FusedMlp mlp, unsigned parameters, FusedMlpGrads grads,
                              bool accumulate) {
  __shared__ float slice_sums[kFinishSlices][32];
  const unsigned p = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (p < parameters) {
#pragma unroll 8
    for (unsigned b = threadIdx.y; b < blocks; b += kFinishSlices)
      s += scratch[std::size_t{b} * parameters + p];
  }
  slice_sums[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || p >= parameters) return;
  float total = 0.0f;
#pragma unroll
  for (unsigned y = 0; y < kFinishSlices; ++y) total += slice_sums[y][threadIdx.x];
  unsigned l = 0, local = p;
  while (local >= parameters_of(mlp, l)) local -= parameters_of(mlp, l++);
  const unsigned weights = mlp.widths[l + 1] * mlp.widths[l];
  float* const out = local < weights ? grads.weight[l] + local : grads.bias[l] + (local - weights);
  rowwise::write_grad(out, total, accumulate);
}

[[noreturn]] void invalid(const std::string& what) {
  throw Error("launch_fused_mlp_backward", "invalid argument", what, __FILE__, __LINE__);
}

std::size_t grid_blocks(std::size_t rows) {
  return std::min<std::size_t>((rows + kRows - 1) / kRows, kMaxGridBlocks);
}

FusedMlp shape_of(std::span<const std::size_t> widths) {
  FusedMlp mlp;
  mlp.layers = static_cast<unsigned>(widths.size() - 1);
  for (std::size_t l = 0; l < widths.size(); ++l) mlp.widths[l] = static_cast<unsigned>(widths[l]);
  return mlp;
}

}  // namespace

bool fused_mlp_backward_supports(std::span<const std::size_t> widths) noexcept {
  if (widths.size() < 2 || widths.size() > kFusedMlpMaxLayers + 1) return false;
  for (std::size_t l = 0; l < widths.size(); ++l) {
    if (widths[l] == 0 || widths[l] > kFusedBackwardMaxWidth) return false;
    if (l > 0 && l + 1 < widths.size() && widths[l] % 4 != 0) return false;  // hidden
  }
  const FusedMlp mlp = shape_of(widths);
  return layout_of(mlp).grad_blocks <= kMaxBlocksPerThread * kThreads &&
         shared_bytes_of(mlp) <= kMaxSharedBytes;
}

std::size_t fused_mlp_backward_scratch_floats(std::span<const std::size_t> widths,
                                              std::size_t rows) {
  if (!fused_mlp_backward_supports(widths))
    invalid("widths not supported (1 to 4 layers, widths in [1, 64], hidden widths multiples "
            "of 4)");
  return grid_blocks(rows) * layout_of(shape_of(widths)).parameters;
}

void launch_fused_mlp_backward(const FusedMlp& mlp, const float* x, const float* dy,
                               std::size_t rows, const Activation& hidden,
                               const FusedMlpGrads& grads, nn::GradMode mode, float* scratch,
                               std::size_t scratch_floats, cudaStream_t stream) {
  const NvtxRange range("nn/fused_mlp_backward");
  if (mlp.layers < 1 || mlp.layers > kFusedMlpMaxLayers)
    invalid("layers = " + std::to_string(mlp.layers) + ", allowed [1, " +
            std::to_string(kFusedMlpMaxLayers) + "]");
  std::size_t widths[kFusedMlpMaxLayers + 1];
  for (unsigned l = 0; l <= mlp.layers; ++l) widths[l] = mlp.widths[l];
  const std::span<const std::size_t> shape(widths, mlp.layers + 1);
  if (!fused_mlp_backward_supports(shape)) {
    std::string list;
    for (const std::size_t w : shape) {
      if (!list.empty()) list += '-';
      list += std::to_string(w);
    }
    invalid("widths " + list + " not supported (1 to 4 layers, widths in [1, 64], hidden widths "
            "multiples of 4, 48 KB of shared memory)");
  }
  if (!derivative_from_output_exact(hidden.kind))
    invalid("hidden activation kind " + std::to_string(static_cast<int>(hidden.kind)) +
            ": needs ReLU or tanh (f' from the saved outputs)");
  if (x == nullptr || dy == nullptr || scratch == nullptr) invalid("x, dy or scratch is null");
  for (unsigned l = 0; l < mlp.layers; ++l)
    if (mlp.layer[l].weight == nullptr || grads.weight[l] == nullptr ||
        grads.bias[l] == nullptr || (l + 1 < mlp.layers && mlp.layer[l].activation == nullptr))
      invalid("layer[" + std::to_string(l) + "]: a weight, weight/bias gradient or (hidden "
              "layer) saved activation is null");
  if (rows == 0) return;
  const std::size_t blocks = grid_blocks(rows);
  const Layout layout = layout_of(mlp);
  const std::size_t needed = blocks * layout.parameters;
  if (scratch_floats < needed)
    invalid("scratch holds " + std::to_string(scratch_floats) + " floats, this launch needs " +
            std::to_string(needed));
  activation_math::dispatch(hidden, "launch_fused_mlp_backward", [&](auto kind) {
    constexpr ActivationKind kKind = decltype(kind)::value;
    if constexpr (derivative_from_output_exact(kKind))  // other kinds were refused above
      fused_mlp_backward<kKind>
          <<<static_cast<unsigned>(blocks), kThreads, shared_bytes_of(mlp), stream>>>(
              mlp, x, dy, rows, scratch);
  });
  RESIDENT_CHECK_LAUNCH("fused_mlp_backward");
  const unsigned finish_blocks = (layout.parameters + 31) / 32;
  fused_mlp_backward_finish<<<finish_blocks, dim3(32, kFinishSlices), 0, stream>>>(
      scratch, static_cast<unsigned>(blocks), mlp, layout.parameters, grads,
      mode == nn::GradMode::Accumulate);
  RESIDENT_CHECK_LAUNCH("fused_mlp_backward_finish");
}

}  // namespace resident::kernels
