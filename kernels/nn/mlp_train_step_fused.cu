// The fused MLP train step (contract in mlp_train_step_fused.h). One cooperative kernel of
// kThreads-thread blocks; every phase hands its tiles to the blocks round robin (tile t to block
// t mod grid) and ends at a grid barrier, after which its outputs (global memory, L2-resident at
// these sizes) are visible to every block. Each buffer is written in one phase and read only in
// later ones. Phases, for L layers:
//   forward l = 1 .. L-1  z_l, a_l in 32 x 32 tiles (tile_product: K = widths[l-1])
//   head                  8-row tiles, one warp per row: y (lane-strided dot products reduced by
//                         a shuffle tree), dy, the tile's loss partial, dz_{L-1} = (dy W_L) f'(z)
//   backward l = L-1 .. 1 dW_l (K = batch; bias gradient as the A operand's row sums in the
//                         tiles of column 0) and, for l > 1, dz_{l-1}; the last one also dW_L,
//                         db_L. Each thread adds the squares of the gradients it wrote (fp64) to
//                         its sum; the block's sum (cub::BlockReduce) is its norm partial.
//   optimizer             every block reduces the partials in the order of
//                         global_norm_finish.cuh to the norm and clip scale, then updates its
//                         grid-stride share of the slab (adamw_element.cuh); block 0 writes the
//                         loss (its partials in tile order), the norm, the step + 1 and scale 1.
// The step counter is read by every block before the first barrier and written after the last,
// so no block can read the advanced value. A tile's product (32 x 32 outputs): four groups of
// 64 threads each sum a quarter of every 64-k shared-memory chunk (both operands stored k-major,
// rows padded to 36 floats) into 4 x 4 blocks, then the groups' sums are added in a fixed order;
// chunks are loaded through registers so that a chunk's loads are all in flight together and the
// next chunk's overlap the products.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <string>

#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/adamw_element.cuh"
#include "kernels/nn/global_norm_finish.cuh"
#include "kernels/nn/mlp_train_step_fused.h"
#include "lib/core/error.h"
#include "lib/core/nvtx_range.h"

namespace resident::kernels {

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 256;
static_assert(kThreads == global_norm_detail::kFinishThreads,
              "the optimizer phase reduces the norm partials with the finish pass's block size");
constexpr int kTile = 32;                  // outputs per tile side; 16 x 16 threads of 2 x 2
constexpr int kChunk = 64;                 // k per shared-memory chunk
constexpr int kStride = kTile + 4;         // floats per chunk row (float4-aligned, fewer conflicts)
constexpr int kSlices = 4;                 // a chunk's k split over 4 groups of 64 threads
constexpr int kSliceK = kChunk / kSlices;
constexpr int kHeadRows = kThreads / 32;   // one warp per row in the head phase
constexpr int kMaxOut = static_cast<int>(kFusedStepMaxOut);

// One GEMM operand: element (i, k) of an [extent, K] matrix at data[i * ld + k] when its layout
// is k-contiguous (a template argument of the functions below), else at data[k * ld + i].
struct Operand {
  const float* data;
  int ld;
  int extent;
};

struct alignas(16) Chunks {
  float a[kChunk][kStride];
  float b[kChunk][kStride];
};
// After a tile's last chunk the same memory holds the slices' partial sums.
struct SlicePartials {
  float c[kSlices][kTile][kTile];
  float row_sum[kSlices][kTile];
};
static_assert(sizeof(SlicePartials) <= sizeof(Chunks), "the partials reuse the chunks' memory");

struct Args {
  float* loss;
  FusedStepMlp mlp;
  FusedStepScratch scratch;
  FusedStepOptimizer opt;
  const float* x;
  const float* target;
  int batch;
  float d_scale;     // 2 / (batch * out)
  double divisor;    // batch * out
};

constexpr int kChunkLoads = kTile * kChunk / kThreads;  // elements per thread per operand

// The chunk of one operand a thread loads, held in registers between the loads and the shared
// stores so that all of a chunk's loads are in flight at once (and the next chunk's during the
// current chunk's products). Element e = threadIdx.x + kThreads * j (j < kChunkLoads) of the
// kTile x kChunk chunk is (i, k) = (e / kChunk, e % kChunk) for a k-contiguous operand and
// (e % kTile, e / kTile) otherwise: consecutive threads read consecutive addresses.
template <bool kContiguousK>
struct ChunkRegisters {
  float value[kChunkLoads];

  __device__ __forceinline__ static int row_of(int e) { return kContiguousK ? e / kChunk : e % kTile; }
  __device__ __forceinline__ static int k_of(int e) { return kContiguousK ? e % kChunk : e / kTile; }

  __device__ __forceinline__ void load(const Operand& op, int i0, int k0, int K) {
#pragma unroll
    for (int j = 0; j < kChunkLoads; ++j) {
      const int e = threadIdx.x + kThreads * j;
      const int gi = i0 + row_of(e), gk = k0 + k_of(e);
      value[j] = 0.0f;  // outside the matrix
      if (gi < op.extent && gk < K)
        value[j] = kContiguousK ? op.data[static_cast<std::size_t>(gi) * op.ld + gk]
                                : op.data[static_cast<std::size_t>(gk) * op.ld + gi];
    }
  }

  // dst[k][i] = element (i0 + i, k0 + k) of the loaded chunk.
  __device__ __forceinline__ void store(float (*dst)[kStride]) const {
#pragma unroll
    for (int j = 0; j < kChunkLoads; ++j) {
      const int e = threadIdx.x + kThreads * j;
      dst[k_of(e)][row_of(e)] = value[j];
    }
  }
};

struct TileSums {
  float c[2][2];     // c[i][j]: output (m0 + 2 ty + i, n0 + 2 tx + j), ty = tid / 16, tx = tid % 16
  float row_sum[2];  // sum over k of A(m0 + 2 ty + i, k) (with kRowSums)
};

// C = A B^T over k < K for the tile at (m0, n0): sum_k A(m, k) B(n, k), and with kRowSums the A
// operand's row sums. Thread group g = tid / 64 (of 4) takes k = 16 g .. 16 g + 15 of each
// 64-k chunk, each of its threads a 4 x 4 block of outputs (rows 4 (l / 8), columns 4 (l % 8),
// l = tid % 64), summing its k ascending with fmaf; the four groups' sums are then added in
// group order (((g0 + g1) + g2) + g3) through shared memory and handed out as 2 x 2 blocks. A
// fixed order: deterministic. Every thread of the block calls it (it synchronizes the block).
// The next chunk's loads are issued before the current chunk's products.
template <bool kAContiguousK, bool kBContiguousK, bool kRowSums>
__device__ TileSums tile_product(Chunks& s, const Operand& a, const Operand& b, int K, int m0,
                                 int n0) {
  const int group = threadIdx.x / 64, lane64 = threadIdx.x % 64;
  const int my = 4 * (lane64 / 8), mx = 4 * (lane64 % 8);
  float c[4][4] = {};
  float row_sum[4] = {};
  ChunkRegisters<kAContiguousK> next_a;
  ChunkRegisters<kBContiguousK> next_b;
  next_a.load(a, m0, 0, K);
  next_b.load(b, n0, 0, K);
  for (int k0 = 0; k0 < K; k0 += kChunk) {
    __syncthreads();  // the previous chunk (or tile, or its partials) is no longer read
    next_a.store(s.a);
    next_b.store(s.b);
    __syncthreads();
    if (k0 + kChunk < K) {
      next_a.load(a, m0, k0 + kChunk, K);
      next_b.load(b, n0, k0 + kChunk, K);
    }
    // The whole slice, past K too: the padding is 0 in both operands, and fmaf(0, 0, c) = c.
#pragma unroll
    for (int kk = 0; kk < kSliceK; ++kk) {
      const int k = group * kSliceK + kk;
      const float4 a4 = *reinterpret_cast<const float4*>(&s.a[k][my]);
      const float4 b4 = *reinterpret_cast<const float4*>(&s.b[k][mx]);
      const float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) c[i][j] = fmaf(av[i], bv[j], c[i][j]);
        if constexpr (kRowSums) row_sum[i] += av[i];
      }
    }
  }
  __syncthreads();  // the last chunk is no longer read
  auto& partials = *reinterpret_cast<SlicePartials*>(&s);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    *reinterpret_cast<float4*>(&partials.c[group][my + i][mx]) =
        make_float4(c[i][0], c[i][1], c[i][2], c[i][3]);
    if (kRowSums && mx == 0) partials.row_sum[group][my + i] = row_sum[i];
  }
  __syncthreads();
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  TileSums r{};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float sum = partials.c[0][2 * ty + i][2 * tx + j];
#pragma unroll
      for (int g = 1; g < kSlices; ++g) sum += partials.c[g][2 * ty + i][2 * tx + j];
      r.c[i][j] = sum;
    }
    if constexpr (kRowSums) {
      float sum = partials.row_sum[0][2 * ty + i];
#pragma unroll
      for (int g = 1; g < kSlices; ++g) sum += partials.row_sum[g][2 * ty + i];
      r.row_sum[i] = sum;
    }
  }
  return r;
}

__device__ __forceinline__ int tiles_of(int rows, int cols) {
  return ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
}

__device__ __forceinline__ double square(float x) {
  const double d = x;
  return d * d;  // exact
}

// Layer l's input a_{l-1} (x for l = 1); l is 1-based.
__device__ __forceinline__ const float* layer_input(const Args& p, int l) {
  return l == 1 ? p.x : p.scratch.activations[l - 2];
}

// z_l = a_{l-1} W_l^T + b_l and a_l = f(z_l) for the hidden layer l, tile t.
template <ActivationKind Kind>
__device__ void forward_tile(Chunks& s, const Args& p, int l, int t) {
  const int in = static_cast<int>(p.mlp.widths[l - 1]), out = static_cast<int>(p.mlp.widths[l]);
  const int tiles_n = (out + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kTile, n0 = (t % tiles_n) * kTile;
  const Operand a{layer_input(p, l), in, p.batch};
  const Operand w{p.mlp.weights[l - 1], in, out};
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float bias[2] = {0.0f, 0.0f};  // loaded with the first chunk
  for (int j = 0; j < 2; ++j)
    if (n0 + 2 * tx + j < out) bias[j] = p.mlp.biases[l - 1][n0 + 2 * tx + j];
  const TileSums r = tile_product<true, true, false>(s, a, w, in, m0, n0);
  float* z = p.scratch.pre_activations[l - 1];
  float* act = p.scratch.activations[l - 1];
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + 2 * ty + i;
    for (int j = 0; j < 2; ++j) {
      const int col = n0 + 2 * tx + j;
      if (row < p.batch && col < out) {
        const float value = r.c[i][j] + bias[j];
        const std::size_t at = static_cast<std::size_t>(row) * out + col;
        z[at] = value;
        act[at] = activation_math::value<Kind>(value, p.mlp.hidden_activation);
      }
    }
  }
}

// The output head for rows [8 t, 8 t + 8): y, dy and the tile's loss partial, then
// dz_{L-1} = (dy W_L) * f'(z_{L-1}) for those rows. One warp per row; the outputs in groups of 4
// share one pass over the row (lane-strided fmaf sums reduced by a shuffle tree, the total
// broadcast from lane 0), and lane o < out holds output o's bias, target, dy and squared error,
// all loaded before the sums so that each pass is one round of independent loads.
template <ActivationKind Kind>
__device__ void head_tile(const Args& p, int t, float (*head_dy)[kMaxOut], float* head_loss) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kGroup = 4;
  const int L = static_cast<int>(p.mlp.layers);
  const int in = static_cast<int>(p.mlp.widths[L - 1]), out = static_cast<int>(p.mlp.widths[L]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = t * kHeadRows + warp;
  const float* w = p.mlp.weights[L - 1];
  float row_loss = 0.0f;
  if (row < p.batch) {
    const std::size_t out_base = static_cast<std::size_t>(row) * out;
    float bias = 0.0f, target = 0.0f, square_error = 0.0f;
    if (lane < out) {
      bias = p.mlp.biases[L - 1][lane];
      target = p.target[out_base + lane];
    }
    const float* a = p.scratch.activations[L - 2] + static_cast<std::size_t>(row) * in;
    for (int o0 = 0; o0 < out; o0 += kGroup) {
      float dot[kGroup] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
      for (int k = lane; k < in; k += 32) {
        const float av = a[k];
#pragma unroll
        for (int q = 0; q < kGroup; ++q)
          if (o0 + q < out) dot[q] = fmaf(av, w[static_cast<std::size_t>(o0 + q) * in + k], dot[q]);
      }
#pragma unroll
      for (int q = 0; q < kGroup; ++q) {
        for (int offset = 16; offset > 0; offset /= 2)
          dot[q] += __shfl_down_sync(kAll, dot[q], offset);
        const float total = __shfl_sync(kAll, dot[q], 0);
        if (lane == o0 + q && lane < out) {
          const float d = (total + bias) - target;
          const float g = p.d_scale * d;
          p.scratch.d_pre_activations[L - 1][out_base + lane] = g;
          head_dy[warp][lane] = g;
          square_error = d * d;
        }
      }
    }
    for (int o = 0; o < out; ++o) row_loss += __shfl_sync(kAll, square_error, o);
    __syncwarp();
    const std::size_t base = static_cast<std::size_t>(row) * in;
    const float* z = p.scratch.pre_activations[L - 2] + base;
    float* dz = p.scratch.d_pre_activations[L - 2] + base;
#pragma unroll 8
    for (int c = lane; c < in; c += 32) {
      const float derivative = activation_math::derivative<Kind>(z[c], p.mlp.hidden_activation);
      float sum = 0.0f;
#pragma unroll 4
      for (int o = 0; o < out; ++o)
        sum = fmaf(head_dy[warp][o], w[static_cast<std::size_t>(o) * in + c], sum);
      dz[c] = sum * derivative;
    }
  }
  if (lane == 0) head_loss[warp] = row_loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int r = 0; r < kHeadRows; ++r) sum += head_loss[r];
    p.scratch.loss_partials[t] = sum;
  }
  __syncthreads();  // head_dy and head_loss are reused by the next tile
}

// dW_l = dz_l^T a_{l-1} for tile t, and db_l in the tiles of column 0; adds the squares of what
// it writes to *sum_squares.
__device__ void weight_grad_tile(Chunks& s, const Args& p, int l, int t, double* sum_squares) {
  const int in = static_cast<int>(p.mlp.widths[l - 1]), out = static_cast<int>(p.mlp.widths[l]);
  const int tiles_n = (in + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kTile, n0 = (t % tiles_n) * kTile;
  const bool bias_tile = n0 == 0;
  const Operand dz{p.scratch.d_pre_activations[l - 1], out, out};
  const Operand a{layer_input(p, l), in, in};
  const TileSums r = bias_tile ? tile_product<false, false, true>(s, dz, a, p.batch, m0, n0)
                               : tile_product<false, false, false>(s, dz, a, p.batch, m0, n0);
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float* dw = p.mlp.weight_grads[l - 1];
  for (int i = 0; i < 2; ++i) {
    const int o = m0 + 2 * ty + i;
    if (o >= out) continue;
    for (int j = 0; j < 2; ++j) {
      const int col = n0 + 2 * tx + j;
      if (col < in) {
        dw[static_cast<std::size_t>(o) * in + col] = r.c[i][j];
        *sum_squares += square(r.c[i][j]);
      }
    }
    if (bias_tile && tx == 0) {
      p.mlp.bias_grads[l - 1][o] = r.row_sum[i];
      *sum_squares += square(r.row_sum[i]);
    }
  }
}

// dz_{l-1} = (dz_l W_l) * f'(z_{l-1}) for tile t (l >= 2).
template <ActivationKind Kind>
__device__ void input_grad_tile(Chunks& s, const Args& p, int l, int t) {
  const int in = static_cast<int>(p.mlp.widths[l - 1]), out = static_cast<int>(p.mlp.widths[l]);
  const int tiles_n = (in + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kTile, n0 = (t % tiles_n) * kTile;
  const Operand dz{p.scratch.d_pre_activations[l - 1], out, p.batch};
  const Operand w{p.mlp.weights[l - 1], in, in};
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const float* z = p.scratch.pre_activations[l - 2];
  float z_saved[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // loaded with the first chunk
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      if (m0 + 2 * ty + i < p.batch && n0 + 2 * tx + j < in)
        z_saved[i][j] = z[static_cast<std::size_t>(m0 + 2 * ty + i) * in + n0 + 2 * tx + j];
  const TileSums r = tile_product<true, false, false>(s, dz, w, out, m0, n0);
  float* dz_in = p.scratch.d_pre_activations[l - 2];
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + 2 * ty + i;
    for (int j = 0; j < 2; ++j) {
      const int col = n0 + 2 * tx + j;
      if (row < p.batch && col < in)
        dz_in[static_cast<std::size_t>(row) * in + col] =
            r.c[i][j] * activation_math::derivative<Kind>(z_saved[i][j], p.mlp.hidden_activation);
    }
  }
}

// Diagnostics: block 0's thread 0 writes %globaltimer (ns) at the start and after each barrier
// when phase_times is set.
__device__ __forceinline__ void record_phase_time(const Args& p, int slot) {
  if (p.scratch.phase_times == nullptr || blockIdx.x != 0 || threadIdx.x != 0) return;
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  p.scratch.phase_times[slot] = now;
}

using BlockSum = global_norm_detail::FinishSum;  // cub::BlockReduce<double, kThreads>

template <ActivationKind Kind>
__global__ void __launch_bounds__(kThreads) mlp_train_step_fused(Args p) {
  __shared__ Chunks chunks;
  __shared__ float head_dy[kHeadRows][kMaxOut];
  __shared__ float head_loss[kHeadRows];
  __shared__ BlockSum::TempStorage reduce_temp;
  __shared__ adamw_detail::StepFactors factors;
  cg::grid_group grid = cg::this_grid();
  const int L = static_cast<int>(p.mlp.layers);
  const std::uint64_t step = *p.opt.step;  // before the first barrier; block 0 writes it last
  if (threadIdx.x == 0) factors = adamw_detail::step_factors(p.opt.constants, step, 1.0f);
  int clock_slot = 0;
  record_phase_time(p, clock_slot++);

  for (int l = 1; l < L; ++l) {
    const int tiles = tiles_of(p.batch, static_cast<int>(p.mlp.widths[l]));
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) forward_tile<Kind>(chunks, p, l, t);
    grid.sync();
    record_phase_time(p, clock_slot++);
  }
  const int head_tiles = (p.batch + kHeadRows - 1) / kHeadRows;
  for (int t = blockIdx.x; t < head_tiles; t += gridDim.x) head_tile<Kind>(p, t, head_dy, head_loss);
  grid.sync();
  record_phase_time(p, clock_slot++);

  double sum_squares = 0.0;
  for (int l = L - 1; l >= 1; --l) {
    const int in = static_cast<int>(p.mlp.widths[l - 1]), out = static_cast<int>(p.mlp.widths[l]);
    const int weight_tiles = tiles_of(out, in);
    const int input_tiles = l > 1 ? tiles_of(p.batch, in) : 0;
    const int top_tiles = l == 1 ? tiles_of(static_cast<int>(p.mlp.widths[L]),
                                            static_cast<int>(p.mlp.widths[L - 1]))
                                 : 0;
    const int tiles = weight_tiles + input_tiles + top_tiles;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      if (t < weight_tiles)
        weight_grad_tile(chunks, p, l, t, &sum_squares);
      else if (t < weight_tiles + input_tiles)
        input_grad_tile<Kind>(chunks, p, l, t - weight_tiles);
      else
        weight_grad_tile(chunks, p, L, t - weight_tiles - input_tiles, &sum_squares);
    }
    if (l > 1) {
      grid.sync();
      record_phase_time(p, clock_slot++);
    }
  }
  const double block_sum = BlockSum(reduce_temp).Sum(sum_squares);
  if (threadIdx.x == 0) p.scratch.norm_partials[blockIdx.x] = block_sum;
  // The thread's first float4 group of the optimizer state, loaded before the barrier (only this
  // phase writes params, m and v); its gradients after it.
  const std::size_t first = blockIdx.x * std::size_t{kThreads} + threadIdx.x;
  const bool has_first = first < p.opt.n / 4;
  float4 first_p{}, first_m{}, first_v{};
  uchar4 first_mask{};
  if (has_first) {
    first_p = reinterpret_cast<const float4*>(p.opt.params)[first];
    first_m = reinterpret_cast<const float4*>(p.opt.m)[first];
    first_v = reinterpret_cast<const float4*>(p.opt.v)[first];
    first_mask = reinterpret_cast<const uchar4*>(p.opt.decay_mask)[first];
  }
  grid.sync();
  record_phase_time(p, clock_slot++);

  const float4 first_g = has_first ? reinterpret_cast<const float4*>(p.opt.grads)[first] : float4{};
  __syncthreads();  // reduce_temp is reused
  const global_norm_detail::NormAndScale clip =
      global_norm_detail::finish(p.scratch.norm_partials, gridDim.x, p.opt.max_norm, reduce_temp);
  if (threadIdx.x == 0) factors.grad_scale = clip.scale;
  __syncthreads();
  const adamw_detail::StepFactors f = factors;
  if (has_first) {
    adamw_detail::update_group(first_p, first_m, first_v, first_g, first_mask, p.opt.constants, f);
    reinterpret_cast<float4*>(p.opt.params)[first] = first_p;
    reinterpret_cast<float4*>(p.opt.m)[first] = first_m;
    reinterpret_cast<float4*>(p.opt.v)[first] = first_v;
  }
  adamw_detail::update_range(p.opt.params, p.opt.m, p.opt.v, p.opt.grads, p.opt.decay_mask,
                             p.opt.n, first, std::size_t{gridDim.x} * kThreads, p.opt.constants,
                             f, /*skip_first_group=*/has_first);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    float total = 0.0f;
    for (int t = 0; t < head_tiles; ++t) total += p.scratch.loss_partials[t];
    *p.loss = static_cast<float>(static_cast<double>(total) / p.divisor);
    *p.opt.norm = clip.norm;
    *p.opt.step = step + 1;
    if (p.opt.grad_scale != nullptr) *p.opt.grad_scale = 1.0f;
  }
  if (p.scratch.phase_times != nullptr) {
    __syncthreads();
    record_phase_time(p, clock_slot);  // block 0's end of the optimizer phase
  }
}

[[noreturn]] void fail(const std::string& detail, int line) {
  throw Error("launch_mlp_train_step_fused", "invalid argument", detail, __FILE__, line);
}

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

std::size_t tiles_on_host(std::size_t rows, std::size_t cols) {
  return ceil_div(rows, kTile) * ceil_div(cols, kTile);
}

// The most tiles any phase hands out.
std::size_t max_phase_tiles(std::span<const std::size_t> w, std::size_t batch) {
  const std::size_t L = w.size() - 1;
  std::size_t most = ceil_div(batch, kHeadRows);
  for (std::size_t l = 1; l < L; ++l) most = std::max(most, tiles_on_host(batch, w[l]));
  for (std::size_t l = L - 1; l >= 1; --l) {
    std::size_t tiles = tiles_on_host(w[l], w[l - 1]);
    if (l > 1) tiles += tiles_on_host(batch, w[l - 1]);
    if (l == 1) tiles += tiles_on_host(w[L], w[L - 1]);
    most = std::max(most, tiles);
  }
  return most;
}

template <typename Launch>
void with_kernel(const Activation& activation, const char* op, Launch&& launch) {
  activation_math::dispatch(activation, op, [&](auto kind) {
    launch(&mlp_train_step_fused<decltype(kind)::value>);
  });
}

}  // namespace

bool fused_step_supports(std::span<const std::size_t> widths) noexcept {
  if (widths.size() < 3 || widths.size() > kFusedStepMaxLayers + 1) return false;
  if (widths.back() > kFusedStepMaxOut) return false;
  for (const std::size_t w : widths)
    if (w == 0 || w > (1u << 20)) return false;
  return true;
}

std::size_t fused_step_loss_partials(std::size_t batch) noexcept {
  return ceil_div(std::max<std::size_t>(batch, 1), kHeadRows);
}

unsigned fused_step_grid(std::span<const std::size_t> widths, std::size_t batch,
                         const Activation& hidden_activation) {
  const char* op = "fused_step_grid";
  if (!fused_step_supports(widths))
    throw Error(op, "invalid argument",
                "widths (" + std::to_string(widths.size()) +
                    " of them) are not 2 to 4 layers of widths >= 1 with at most " +
                    std::to_string(kFusedStepMaxOut) + " outputs",
                __FILE__, __LINE__);
  if (batch == 0) throw Error(op, "invalid argument", "batch = 0, must be >= 1", __FILE__, __LINE__);
  int device = 0, cooperative = 0, sms = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cooperative == 0)
    throw Error(op, "unsupported device", "device " + std::to_string(device) +
                    " cannot launch cooperative kernels", __FILE__, __LINE__);
  int per_sm = 0;
  with_kernel(hidden_activation, op, [&](auto kernel) {
    RESIDENT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  });
  const std::size_t resident_blocks = static_cast<std::size_t>(per_sm) * static_cast<std::size_t>(sms);
  if (resident_blocks == 0)
    throw Error(op, "unsupported device", "no block of the fused step fits an SM", __FILE__, __LINE__);
  return static_cast<unsigned>(std::min(resident_blocks, max_phase_tiles(widths, batch)));
}

void launch_mlp_train_step_fused(float* loss, const FusedStepMlp& mlp,
                                 const FusedStepScratch& scratch,
                                 const FusedStepOptimizer& optimizer, const float* x,
                                 const float* target, std::size_t batch, unsigned grid,
                                 cudaStream_t stream) {
  const NvtxRange range("nn/mlp_train_step_fused");
  const std::span<const std::size_t> widths(mlp.widths, mlp.layers + 1);
  if (mlp.layers < 2 || mlp.layers > kFusedStepMaxLayers)
    fail("layers = " + std::to_string(mlp.layers) + ", allowed 2 to " +
             std::to_string(kFusedStepMaxLayers), __LINE__);
  if (!fused_step_supports(widths))
    fail("output width = " + std::to_string(mlp.widths[mlp.layers]) + ", allowed 1 to " +
             std::to_string(kFusedStepMaxOut) + " (and every width >= 1)", __LINE__);
  if (batch == 0 || batch > (1u << 24))
    fail("batch = " + std::to_string(batch) + ", allowed 1 to 2^24", __LINE__);
  if (grid == 0) fail("grid = 0 (use fused_step_grid)", __LINE__);
  if (loss == nullptr || x == nullptr || target == nullptr)
    fail(std::string(loss == nullptr ? "loss" : x == nullptr ? "x" : "target") + " is null", __LINE__);
  for (std::size_t l = 0; l < mlp.layers; ++l) {
    if (mlp.weights[l] == nullptr || mlp.biases[l] == nullptr || mlp.weight_grads[l] == nullptr ||
        mlp.bias_grads[l] == nullptr || scratch.d_pre_activations[l] == nullptr)
      fail("layer " + std::to_string(l) + ": a weight, bias, gradient or dz view is null", __LINE__);
    if (l + 1 < mlp.layers && (scratch.pre_activations[l] == nullptr || scratch.activations[l] == nullptr))
      fail("hidden layer " + std::to_string(l) + ": a z or a scratch view is null", __LINE__);
  }
  if (scratch.loss_partials == nullptr || scratch.norm_partials == nullptr)
    fail("the loss or norm partials are null", __LINE__);
  if (optimizer.params == nullptr || optimizer.m == nullptr || optimizer.v == nullptr ||
      optimizer.grads == nullptr || optimizer.decay_mask == nullptr || optimizer.step == nullptr ||
      optimizer.norm == nullptr)
    fail("an optimizer view is null", __LINE__);
  for (const void* p : {static_cast<const void*>(optimizer.params), static_cast<const void*>(optimizer.m),
                        static_cast<const void*>(optimizer.v), static_cast<const void*>(optimizer.grads)})
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) fail("an optimizer array is not 16-byte aligned", __LINE__);
  if (reinterpret_cast<std::uintptr_t>(optimizer.decay_mask) % 4 != 0)
    fail("decay_mask is not 4-byte aligned", __LINE__);
  if (!(optimizer.max_norm > 0.0f))
    fail("max_norm = " + std::to_string(optimizer.max_norm) + ", must be > 0", __LINE__);

  Args args{};
  args.loss = loss;
  args.mlp = mlp;
  args.scratch = scratch;
  args.opt = optimizer;
  args.x = x;
  args.target = target;
  args.batch = static_cast<int>(batch);
  const double divisor = static_cast<double>(batch) * static_cast<double>(mlp.widths[mlp.layers]);
  args.d_scale = static_cast<float>(2.0 / divisor);
  args.divisor = divisor;

  cudaLaunchAttribute cooperative{};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  with_kernel(mlp.hidden_activation, "launch_mlp_train_step_fused", [&](auto kernel) {
    RESIDENT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args));
  });
}

}  // namespace resident::kernels
