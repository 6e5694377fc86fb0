// Device building blocks of the fused (grid-synchronized) train steps (device code: include from
// .cu files only): kernels/nn/mlp_train_step_fused.cu (MSE head) and
// kernels/rl/dqn/dqn_train_step_fused.cu (double-DQN head) compose their phases from these.
// A Pass is one network over `rows` rows of x with its FusedStepScratch; its phases hand 32 x 32
// output tiles to the blocks round robin, each tile's product summed in a fixed order (see
// tile_product), so a step is bit-for-bit reproducible for a given grid. A forward phase may hand
// out tiles of two vertically adjacent 32 x 32 sub-tiles instead (64 x 32 outputs, kSubTiles =
// 2): each output is then summed in the same order as in a 32 x 32 tile, so the choice does not
// change a bit. Every function here is called by all kThreads threads of a block (they
// synchronize the block).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <span>
#include <string>

#include "kernels/core/phase_clock.cuh"
#include "kernels/core/programmatic_launch.cuh"
#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/adamw_element.cuh"
#include "kernels/nn/global_norm_finish.cuh"
#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/core/error.h"

namespace resident::kernels::fused_step {

// Threads per block of every fused step's kernel. The kernels declare __launch_bounds__(kThreads,
// 1): one block per SM is what their grids assume (cooperative_grid), and without the 1 ptxas may
// cap them at 128 registers and spill to make room for a second block.
constexpr int kThreads = 256;
static_assert(kThreads == global_norm_detail::kFinishThreads,
              "the optimizer phase reduces the norm partials with the finish pass's block size");
constexpr int kTile = 32;                  // outputs per tile side; 16 x 16 threads of 2 x 2
constexpr int kChunk = 64;                 // k per shared-memory chunk
constexpr int kStride = kTile + 4;         // floats per chunk row (float4-aligned, fewer conflicts)
constexpr int kSlices = 4;                 // a chunk's k split over 4 groups of 64 threads
constexpr int kSliceK = kChunk / kSlices;
// Floats of one split-K part's partials: a 32 x 32 tile and its 32 row sums.
constexpr std::size_t kSplitPartialFloats = kTile * kTile + kTile;
constexpr int kHeadRows = kThreads / 32;   // one warp per row in the head phase
constexpr int kMaxOut = static_cast<int>(kFusedStepMaxOut);

// One GEMM operand: element (i, k) of an [extent, K] matrix at data[i * ld + k] when its layout
// is k-contiguous (a template argument of the functions below), else at data[k * ld + i].
struct Operand {
  const float* data;
  int ld;
  int extent;
};

// The slices' partial sums of a tile of kSubTiles 32 x 32 sub-tiles (rows 32 s .. 32 s + 31 are
// sub-tile s).
template <int kSubTiles>
struct SlicePartials {
  float c[kSlices][kSubTiles * kTile][kTile];
  float row_sum[kSlices][kSubTiles * kTile];
};

// A block's shared memory for tiles of kSubTiles 32-row sub-tiles (1 or 2): one chunk of each
// operand, k-major (a[k][i]: the tile's rows of A, padded by 4 floats; b[k][j]: its 32 rows of
// B); after a tile's last chunk the same memory holds the slices' partial sums (SlicePartials,
// through a cast: as a union member they would change the code ptxas makes for one sub-tile).
template <int kSubTiles>
struct alignas(16) ChunksOf {
  static_assert(kSubTiles == 1, "a tile is one or two 32-row sub-tiles");
  float a[kChunk][kTile + 4];
  float b[kChunk][kStride];
};
// Two sub-tiles: the partials (64 rows) need more than the chunks; the rest is room for them.
template <>
struct alignas(16) ChunksOf<2> {
  float a[kChunk][2 * kTile + 4];
  float b[kChunk][kStride];
  float room[(sizeof(SlicePartials<2>) - sizeof(float) * kChunk * (3 * kTile + 8)) / sizeof(float)];
};
using Chunks = ChunksOf<1>;  // 32 x 32 tiles: every phase's

// One network over `rows` rows of x (row-major [rows, widths[0]]) and its scratch.
struct Pass {
  const FusedStepMlp* net;
  const FusedStepScratch* scratch;
  const float* x;
  int rows;
};

// The chunk of one operand (kRows of its rows: 32, or 64 for the A operand of a two-sub-tile
// tile) a thread loads, held in registers between the loads and the shared stores so that all of
// a chunk's loads are in flight at once (and the next chunk's during the current chunk's
// products). The shared layout is k-major either way (dst[k][i]); the two layouts of the operand
// in global memory map elements to threads differently, so that a warp's loads read consecutive
// addresses and its shared stores hit every bank once:
// - k-contiguous (element (i, k) at data[i * ld + k]): the thread's q-th group of 4 (q <
//   kLoads / 4) is column k = g % kChunk of rows 4 (g / kChunk) .. + 3, g = threadIdx.x +
//   kThreads q. A warp's load of one of those rows reads 32 consecutive k (one 128-byte line);
//   the four values go to shared memory as one float4 at dst[k][4 (g / kChunk)], and a quarter
//   warp's 8 consecutive k are kRows + 4 floats (4 banks mod 32) apart: no bank conflict. (One
//   scalar per element at dst[k][i], consecutive threads at consecutive k, put four threads on
//   each bank.)
// - otherwise (element (i, k) at data[k * ld + i]): element e = threadIdx.x + kThreads * j (j <
//   kLoads) is (i, k) = (e % kRows, e / kRows): consecutive threads read and store consecutive i.
// Only where a value waits in registers changes between the two: every chunk holds the same
// values in the same shared-memory places.
template <bool kContiguousK, int kRows = kTile>
struct ChunkRegisters {
  static constexpr int kLoads = kRows * kChunk / kThreads;  // elements per thread
  static_assert(kLoads % 4 == 0 && kRows % 4 == 0, "k-contiguous chunks move in groups of 4 rows");
  float value[kLoads];

  // Element j's place (i, k) in the chunk.
  __device__ __forceinline__ static int row_of(int j) {
    if constexpr (kContiguousK) {
      return 4 * ((threadIdx.x + kThreads * (j / 4)) / kChunk) + j % 4;
    } else {
      return (threadIdx.x + kThreads * j) % kRows;
    }
  }
  __device__ __forceinline__ static int k_of(int j) {
    if constexpr (kContiguousK) {
      return (threadIdx.x + kThreads * (j / 4)) % kChunk;
    } else {
      return (threadIdx.x + kThreads * j) / kRows;
    }
  }

  __device__ __forceinline__ void load(const Operand& op, int i0, int k0, int K) {
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      const int gi = i0 + row_of(j), gk = k0 + k_of(j);
      value[j] = 0.0f;  // outside the matrix
      if (gi < op.extent && gk < K)
        value[j] = kContiguousK ? op.data[static_cast<std::size_t>(gi) * op.ld + gk]
                                : op.data[static_cast<std::size_t>(gk) * op.ld + gi];
    }
  }

  // dst[k][i] = element (i0 + i, k0 + k) of the loaded chunk.
  __device__ __forceinline__ void store(float (*dst)[kRows + 4]) const {
    if constexpr (kContiguousK) {
#pragma unroll
      for (int q = 0; q < kLoads / 4; ++q)
        *reinterpret_cast<float4*>(&dst[k_of(4 * q)][row_of(4 * q)]) =
            make_float4(value[4 * q], value[4 * q + 1], value[4 * q + 2], value[4 * q + 3]);
    } else {
#pragma unroll
      for (int j = 0; j < kLoads; ++j) dst[k_of(j)][row_of(j)] = value[j];
    }
  }
};

// A thread's outputs of a tile of kSubTiles sub-tiles: 2 of each sub-tile's rows, 2 columns.
template <int kSubTiles>
struct TileSumsOf {
  float c[2 * kSubTiles][2];     // c[i][j]: output (m0 + tile_row(i), n0 + 2 tx + j), tx = tid % 16
  float row_sum[2 * kSubTiles];  // sum over k of A(m0 + tile_row(i), k) (with kRowSums)
};
using TileSums = TileSumsOf<1>;

// The tile row of a thread's i-th output row (TileSumsOf::c[i]): 2 ty + i in sub-tile i / 2,
// ty = tid / 16; for one sub-tile 2 ty + i.
__device__ __forceinline__ int tile_row(int i) {
  return kTile * (i / 2) + 2 * static_cast<int>(threadIdx.x / 16) + i % 2;
}

// C = A B^T over k < K for the tile of kSubTiles 32 x 32 sub-tiles at (m0, n0) (rows m0 ..
// m0 + 32 kSubTiles - 1, columns n0 .. n0 + 31): sum_k A(m, k) B(n, k), and with kRowSums the A
// operand's row sums. Thread group g = tid / 64 (of 4) takes k = 16 g .. 16 g + 15 of each 64-k
// chunk, each of its threads a 4 x 4 block of outputs in every sub-tile s (rows 32 s + 4 (l / 8),
// columns 4 (l % 8), l = tid % 64), summing its k ascending with fmaf; the four groups' sums are
// then added in group order (((g0 + g1) + g2) + g3) through shared memory and handed out as 2 x 2
// blocks per sub-tile. A fixed order per output, the same for one sub-tile or two (a second
// sub-tile only adds chains beside the first's, fed by the same chunk of B and the same k): a
// 64-row tile's outputs are bit for bit those of its two 32-row tiles. Deterministic. Every
// thread of the block calls it (it synchronizes the block). The next chunk's loads (both
// sub-tiles' rows of A at once) are issued before the current chunk's products.
// With k_begin > 0 (a multiple of kChunk) the sums cover k_begin <= k < K only, in the same
// order (a split-K part: weight_grad_tile).
template <bool kAContiguousK, bool kBContiguousK, bool kRowSums, int kSubTiles>
__device__ TileSumsOf<kSubTiles> tile_product(ChunksOf<kSubTiles>& s, const Operand& a,
                                              const Operand& b, int K, int m0, int n0,
                                              int k_begin = 0) {
  static_assert(sizeof(SlicePartials<kSubTiles>) <= sizeof(ChunksOf<kSubTiles>),
                "the partials reuse the chunks' memory");
  constexpr int kRows = kSubTiles * kTile;
  const int group = threadIdx.x / 64, lane64 = threadIdx.x % 64;
  const int my = 4 * (lane64 / 8), mx = 4 * (lane64 % 8);
  float c[kSubTiles][4][4] = {};
  float row_sum[kSubTiles][4] = {};
  ChunkRegisters<kAContiguousK, kRows> next_a;
  ChunkRegisters<kBContiguousK> next_b;
  next_a.load(a, m0, k_begin, K);
  next_b.load(b, n0, k_begin, K);
  for (int k0 = k_begin; k0 < K; k0 += kChunk) {
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
      float av[kSubTiles][4];
#pragma unroll
      for (int sub = 0; sub < kSubTiles; ++sub) {
        const float4 a4 = *reinterpret_cast<const float4*>(&s.a[k][kTile * sub + my]);
        av[sub][0] = a4.x;
        av[sub][1] = a4.y;
        av[sub][2] = a4.z;
        av[sub][3] = a4.w;
      }
      const float4 b4 = *reinterpret_cast<const float4*>(&s.b[k][mx]);
      const float bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int sub = 0; sub < kSubTiles; ++sub) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
          for (int j = 0; j < 4; ++j) c[sub][i][j] = fmaf(av[sub][i], bv[j], c[sub][i][j]);
          if constexpr (kRowSums) row_sum[sub][i] += av[sub][i];
        }
      }
    }
  }
  __syncthreads();  // the last chunk is no longer read
  auto& partials = *reinterpret_cast<SlicePartials<kSubTiles>*>(&s);
#pragma unroll
  for (int sub = 0; sub < kSubTiles; ++sub) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = kTile * sub + my + i;
      *reinterpret_cast<float4*>(&partials.c[group][row][mx]) =
          make_float4(c[sub][i][0], c[sub][i][1], c[sub][i][2], c[sub][i][3]);
      if (kRowSums && mx == 0) partials.row_sum[group][row] = row_sum[sub][i];
    }
  }
  __syncthreads();
  const int tx = threadIdx.x % 16;
  TileSumsOf<kSubTiles> r{};
#pragma unroll
  for (int i = 0; i < 2 * kSubTiles; ++i) {
    const int row = tile_row(i);
    // Each thread's two columns as one float2 (a half warp reads one 128-byte row: no bank
    // conflict); per output the sum is ((g0 + g1) + g2) + g3 as before.
    float2 sum = *reinterpret_cast<const float2*>(&partials.c[0][row][2 * tx]);
#pragma unroll
    for (int g = 1; g < kSlices; ++g) {
      const float2 part = *reinterpret_cast<const float2*>(&partials.c[g][row][2 * tx]);
      sum.x += part.x;
      sum.y += part.y;
    }
    r.c[i][0] = sum.x;
    r.c[i][1] = sum.y;
    if constexpr (kRowSums) {
      float sum = partials.row_sum[0][row];
#pragma unroll
      for (int g = 1; g < kSlices; ++g) sum += partials.row_sum[g][row];
      r.row_sum[i] = sum;
    }
  }
  return r;
}

// Tiles of tile_rows x kTile outputs over a rows x cols output (host and device).
__host__ __device__ constexpr int tiles_of(int rows, int cols, int tile_rows = kTile) {
  return ((rows + tile_rows - 1) / tile_rows) * ((cols + kTile - 1) / kTile);
}

__device__ __forceinline__ double square(float x) {
  const double d = x;
  return d * d;  // exact
}

// A thread's two adjacent outputs (columns 2 tx and 2 tx + 1 of a tile row) to p[0] and, when
// `both`, p[1]: one 8-byte store where p is 8-byte aligned (a half warp then writes a row's 128
// bytes in one request instead of two half-used ones), else scalar stores. The same values land
// in the same places either way.
__device__ __forceinline__ void store_pair(float* p, float first, float second, bool both) {
  if (both && (reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
    *reinterpret_cast<float2*>(p) = make_float2(first, second);
  } else {
    p[0] = first;
    if (both) p[1] = second;
  }
}

// The pair store_pair writes, read back: p[0] and, when `both`, p[1] (else 0), one 8-byte load
// where p is 8-byte aligned. With kThroughL2, loads that bypass L1 (another block wrote them).
template <bool kThroughL2 = false>
__device__ __forceinline__ float2 load_pair(const float* p, bool both) {
  if (both && (reinterpret_cast<std::uintptr_t>(p) & 7u) == 0)
    return kThroughL2 ? __ldcg(reinterpret_cast<const float2*>(p))
                      : *reinterpret_cast<const float2*>(p);
  return make_float2(kThroughL2 ? __ldcg(p) : p[0], both ? (kThroughL2 ? __ldcg(p + 1) : p[1]) : 0.0f);
}

// Layer l's input a_{l-1} (x for l = 1); l is 1-based.
__device__ __forceinline__ const float* layer_input(const Pass& p, int l) {
  return l == 1 ? p.x : p.scratch->activations[l - 2];
}

// z_l = a_{l-1} W_l^T + b_l and a_l = f(z_l) for the hidden layer l, tile t of kSubTiles 32-row
// sub-tiles (forward_tiles<kSubTiles> of them, row-major over the tiles); rows past p.rows are
// neither read (zero padding) nor written. Each output the same bits for either kSubTiles.
template <ActivationKind Kind, int kSubTiles = 1>
__device__ void forward_tile(ChunksOf<kSubTiles>& s, const Pass& p, int l, int t) {
  const int in = static_cast<int>(p.net->widths[l - 1]), out = static_cast<int>(p.net->widths[l]);
  const int tiles_n = (out + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kSubTiles * kTile, n0 = (t % tiles_n) * kTile;
  const Operand a{layer_input(p, l), in, p.rows};
  const Operand w{p.net->weights[l - 1], in, out};
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float bias[2] = {0.0f, 0.0f};  // loaded with the first chunk
  for (int j = 0; j < 2; ++j)
    if (n0 + 2 * tx + j < out) bias[j] = p.net->biases[l - 1][n0 + 2 * tx + j];
  const TileSumsOf<kSubTiles> r = tile_product<true, true, false>(s, a, w, in, m0, n0);
  float* z = p.scratch->pre_activations[l - 1];
  float* act = p.scratch->activations[l - 1];
  const int col = n0 + 2 * tx;
  for (int sub = 0; sub < kSubTiles; ++sub) {
    for (int i = 0; i < 2; ++i) {
      const int row = m0 + kTile * sub + 2 * ty + i;  // tile_row(2 sub + i)
      if (row >= p.rows || col >= out) continue;
      const float first = r.c[2 * sub + i][0] + bias[0], second = r.c[2 * sub + i][1] + bias[1];
      const std::size_t at = static_cast<std::size_t>(row) * out + col;
      const bool both = col + 1 < out;
      store_pair(z + at, first, second, both);
      store_pair(act + at, activation_math::value<Kind>(first, p.net->hidden_activation),
                 activation_math::value<Kind>(second, p.net->hidden_activation), both);
    }
  }
}

// Split-K of a weight-gradient tile (K = the batch rows, C = ceil(rows / kChunk) chunks): part
// `index` of `count` sums chunks [index C / count, (index + 1) C / count); `slot` names the
// tile's counter and partials in the scratch. {0, 1, any}: the whole K in one block.
struct WeightGradSplit {
  int index = 0;
  int count = 1;
  int slot = 0;
};

// How many blocks each weight-gradient tile of the last backward phase takes: as many as the
// grid has room for with every item in the phase's one round, at most kFusedStepMaxSplits and C;
// 1 without split scratch. Grid-uniform.
__device__ inline int weight_grad_splits(const Pass& p, int tiles) {
  if (p.scratch->split_partials == nullptr) return 1;
  const int chunks = (p.rows + kChunk - 1) / kChunk;
  const int room = static_cast<int>(gridDim.x) / tiles;
  return max(1, min(min(kFusedStepMaxSplits, chunks), room));
}

// The parts of a split tile meet in its part-0 block: parts 1 .. count - 1 store their sums in
// their partials slot (a thread's 2 x 2 outputs at their tile positions, the row sums after the
// 32 x 32) and count in on the tile's counter; part 0 waits until all have (every part is in the
// phase's one round on co-resident blocks: no part waits on another's work), adds their sums to
// its own in part order, ((r0 + r1) + r2) + r3, and resets the counter. So the tile's bits do not
// depend on which block finishes first, and its squares always go to part 0's norm partial.
// Returns true in part 0's block, whose r then holds the whole tile's sums.
__device__ inline bool combine_split_parts(const Pass& p, const WeightGradSplit& split,
                                           bool bias_tile, TileSums& r) {
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  std::uint32_t* counter = p.scratch->split_counters + split.slot;
  const auto partials_of = [&](int index) {  // index >= 1
    const std::size_t slot =
        static_cast<std::size_t>(split.slot) * (kFusedStepMaxSplits - 1) + (index - 1);
    return p.scratch->split_partials + slot * kSplitPartialFloats;
  };
  if (split.index > 0) {
    float* mine = partials_of(split.index);
    for (int i = 0; i < 2; ++i) {
      store_pair(mine + (2 * ty + i) * kTile + 2 * tx, r.c[i][0], r.c[i][1], true);
      if (bias_tile && tx == 0) mine[kTile * kTile + 2 * ty + i] = r.row_sum[i];
    }
    __threadfence();  // this thread's partials before the block's count
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(counter, 1u);
    return false;
  }
  if (threadIdx.x == 0) {
    const std::uint32_t others = static_cast<std::uint32_t>(split.count - 1);
    while (atomicAdd(counter, 0u) < others) __nanosleep(64);
    atomicExch(counter, 0u);  // for the next launch; every part has counted in
    __threadfence();
  }
  __syncthreads();
  for (int index = 1; index < split.count; ++index) {
    const float* theirs = partials_of(index);
    for (int i = 0; i < 2; ++i) {
      const float2 part = load_pair<true>(theirs + (2 * ty + i) * kTile + 2 * tx, true);
      r.c[i][0] += part.x;
      r.c[i][1] += part.y;
      if (bias_tile && tx == 0) r.row_sum[i] += __ldcg(theirs + kTile * kTile + 2 * ty + i);
    }
  }
  return true;
}

// dW_l = dz_l^T a_{l-1} for tile t, and db_l in the tiles of column 0; adds the squares of what
// it writes to *sum_squares. With split.count > 1 this block sums part split.index of K, and the
// part-0 block writes the tile (combine_split_parts).
__device__ inline void weight_grad_tile(Chunks& s, const Pass& p, int l, int t, double* sum_squares,
                                        WeightGradSplit split = {}) {
  const int in = static_cast<int>(p.net->widths[l - 1]), out = static_cast<int>(p.net->widths[l]);
  const int tiles_n = (in + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kTile, n0 = (t % tiles_n) * kTile;
  const bool bias_tile = n0 == 0;
  const Operand dz{p.scratch->d_pre_activations[l - 1], out, out};
  const Operand a{layer_input(p, l), in, in};
  const int chunks = (p.rows + kChunk - 1) / kChunk;
  const int k_begin = split.index * chunks / split.count * kChunk;
  const int k_end = min(p.rows, (split.index + 1) * chunks / split.count * kChunk);
  TileSums r = bias_tile ? tile_product<false, false, true>(s, dz, a, k_end, m0, n0, k_begin)
                         : tile_product<false, false, false>(s, dz, a, k_end, m0, n0, k_begin);
  if (split.count > 1 && !combine_split_parts(p, split, bias_tile, r)) return;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  float* dw = p.net->weight_grads[l - 1];
  for (int i = 0; i < 2; ++i) {
    const int o = m0 + 2 * ty + i;
    if (o >= out) continue;
    const int col = n0 + 2 * tx;
    if (col < in) {
      const bool both = col + 1 < in;
      store_pair(dw + static_cast<std::size_t>(o) * in + col, r.c[i][0], r.c[i][1], both);
      *sum_squares += square(r.c[i][0]);
      if (both) *sum_squares += square(r.c[i][1]);
    }
    if (bias_tile && tx == 0) {
      p.net->bias_grads[l - 1][o] = r.row_sum[i];
      *sum_squares += square(r.row_sum[i]);
    }
  }
}

// dz_{l-1} = (dz_l W_l) * f'(z_{l-1}) for tile t (l >= 2).
template <ActivationKind Kind>
__device__ void input_grad_tile(Chunks& s, const Pass& p, int l, int t) {
  const int in = static_cast<int>(p.net->widths[l - 1]), out = static_cast<int>(p.net->widths[l]);
  const int tiles_n = (in + kTile - 1) / kTile;
  const int m0 = (t / tiles_n) * kTile, n0 = (t % tiles_n) * kTile;
  const Operand dz{p.scratch->d_pre_activations[l - 1], out, p.rows};
  const Operand w{p.net->weights[l - 1], in, in};
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const float* z = p.scratch->pre_activations[l - 2];
  const int col = n0 + 2 * tx;
  const bool both = col + 1 < in;
  float2 z_saved[2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};  // loaded with the first chunk
  for (int i = 0; i < 2; ++i)
    if (m0 + 2 * ty + i < p.rows && col < in)
      z_saved[i] = load_pair(z + static_cast<std::size_t>(m0 + 2 * ty + i) * in + col, both);
  const TileSums r = tile_product<true, false, false>(s, dz, w, out, m0, n0);
  float* dz_in = p.scratch->d_pre_activations[l - 2];
  for (int i = 0; i < 2; ++i) {
    const int row = m0 + 2 * ty + i;
    if (row >= p.rows || col >= in) continue;
    store_pair(dz_in + static_cast<std::size_t>(row) * in + col,
               r.c[i][0] * activation_math::derivative<Kind>(z_saved[i].x, p.net->hidden_activation),
               r.c[i][1] * activation_math::derivative<Kind>(z_saved[i].y, p.net->hidden_activation),
               both);
  }
}

// Forward phase l of a pass: its tiles of kSubTiles 32-row sub-tiles.
template <int kSubTiles = 1>
__device__ __forceinline__ int forward_tiles(const Pass& p, int l) {
  return tiles_of(p.rows, static_cast<int>(p.net->widths[l]), kSubTiles * kTile);
}

// The backward phases of a pass whose d_pre_activations[L - 1] (dL/dy) is complete: for
// l = L-1 .. 1, dW_l and db_l, and for l > 1 dz_{l-1}; the last phase (l = 1) also takes dW_L and
// db_L. A grid barrier after each phase but the last (the caller's follows it). Adds the squares
// of the gradients this thread wrote to *sum_squares. The last phase has only weight-gradient
// tiles (few at a small first layer: 24 of them at 64-256-256-3), each summing K = the batch
// rows: with split scratch each is split over up to kFusedStepMaxSplits blocks
// (weight_grad_splits), so more of the grid works on it; the tile's sums then group by part,
// a fixed order for a given grid.
template <ActivationKind Kind>
__device__ void backward_phases(Chunks& s, cooperative_groups::grid_group& grid, const Pass& p,
                                double* sum_squares, PhaseClock& clock) {
  const int L = static_cast<int>(p.net->layers);
  for (int l = L - 1; l >= 1; --l) {
    const int in = static_cast<int>(p.net->widths[l - 1]), out = static_cast<int>(p.net->widths[l]);
    const int weight_tiles = tiles_of(out, in);
    const int input_tiles = l > 1 ? tiles_of(p.rows, in) : 0;
    const int top_tiles = l == 1 ? tiles_of(static_cast<int>(p.net->widths[L]),
                                            static_cast<int>(p.net->widths[L - 1]))
                                 : 0;
    const int tiles = weight_tiles + input_tiles + top_tiles;
    const int splits = l == 1 ? weight_grad_splits(p, tiles) : 1;  // l = 1: no input tiles
    for (int item = blockIdx.x; item < tiles * splits; item += gridDim.x) {
      const int t = item / splits;
      const WeightGradSplit split{item % splits, splits, t};
      if (t < weight_tiles)
        weight_grad_tile(s, p, l, t, sum_squares, split);
      else if (t < weight_tiles + input_tiles)
        input_grad_tile<Kind>(s, p, l, t - weight_tiles);
      else
        weight_grad_tile(s, p, L, t - weight_tiles - input_tiles, sum_squares, split);
    }
    if (l > 1) {
      grid.sync();
      clock.mark();
    }
  }
}

// For a head phase, one warp per row: lane o < out gets sum_k a[k] w[o * in + k] (k < in; the
// other lanes 0). The outputs in groups of 4 share one pass over the row (lane-strided fmaf sums,
// a shuffle tree, the total broadcast from lane 0): one round of independent loads per group.
// All 32 lanes call it.
__device__ inline float warp_output_dots(const float* a, const float* w, int in, int out) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kGroup = 4;
  const int lane = threadIdx.x % 32;
  float mine = 0.0f;
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
      if (lane == o0 + q) mine = total;
    }
  }
  return mine;
}

// For a head phase: dz[c] = (sum_o dy[o] w[o * in + c]) * f'(z[c]) for the columns c = first,
// first + stride, ... < in of one row, each the same operations (fmaf over o ascending from 0,
// then one product) whichever thread takes it. dy [out] in shared memory, written before a
// barrier of the threads that share the row.
template <ActivationKind Kind>
__device__ inline void head_backward_columns(float* dz, const float* dy, const float* w,
                                             const float* z, int in, int out, const Activation& f,
                                             int first, int stride) {
#pragma unroll 8
  for (int c = first; c < in; c += stride) {
    const float derivative = activation_math::derivative<Kind>(z[c], f);
    float sum = 0.0f;
#pragma unroll 4
    for (int o = 0; o < out; ++o) sum = fmaf(dy[o], w[static_cast<std::size_t>(o) * in + c], sum);
    dz[c] = sum * derivative;
  }
}

// For a head phase, one warp per row: head_backward_columns over the row (lanes strided), dy
// written before a __syncwarp.
template <ActivationKind Kind>
__device__ inline void warp_head_backward(float* dz, const float* dy, const float* w,
                                          const float* z, int in, int out, const Activation& f) {
  head_backward_columns<Kind>(dz, dy, w, z, in, out, f, threadIdx.x % 32, 32);
}

// The end of a head tile: each warp's lane 0 gives its row's loss term; thread 0 sums the
// kHeadRows terms in row order into loss_partials[t]. head_loss [kHeadRows] shared; the block's
// other per-tile shared buffers may be reused once this returns.
__device__ inline void finish_head_tile(float row_loss, float* head_loss, float* loss_partials,
                                        int t) {
  if (threadIdx.x % 32 == 0) head_loss[threadIdx.x / 32] = row_loss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int r = 0; r < kHeadRows; ++r) sum += head_loss[r];
    loss_partials[t] = sum;
  }
  __syncthreads();
}

using BlockSum = global_norm_detail::FinishSum;  // cub::BlockReduce<double, kThreads>

// The optimizer state of the thread's first float4 group, loaded before the last barrier (only
// the optimizer phase writes params, m and v).
struct FirstGroup {
  bool has = false;
  std::size_t index = 0;
  float4 p{}, m{}, v{};
  uchar4 mask{};
};

__device__ inline FirstGroup prefetch_first_group(const FusedStepOptimizer& opt) {
  FirstGroup g;
  g.index = blockIdx.x * std::size_t{kThreads} + threadIdx.x;
  g.has = g.index < opt.n / 4;
  if (g.has) {
    g.p = reinterpret_cast<const float4*>(opt.params)[g.index];
    g.m = reinterpret_cast<const float4*>(opt.m)[g.index];
    g.v = reinterpret_cast<const float4*>(opt.v)[g.index];
    g.mask = reinterpret_cast<const uchar4*>(opt.decay_mask)[g.index];
  }
  return g;
}

// The optimizer phase, after the barrier that follows the norm partials [gridDim.x]: every block
// reduces them in the order of global_norm_finish.cuh to the norm and clip scale, then AdamW
// updates its grid-stride share of the slab (elements first.index's group, + stride, ..., and the
// tail element 4 (n / 4) + first.index). `factors` holds the step's factors (step_factors at
// scale 1, written before); its grad_scale becomes the clip scale. The returned norm is valid in
// thread 0.
__device__ inline float optimizer_phase(const FusedStepOptimizer& opt, const double* partials,
                                        FirstGroup& first, BlockSum::TempStorage& temp,
                                        adamw_detail::StepFactors& factors) {
  const float4 first_g =
      first.has ? reinterpret_cast<const float4*>(opt.grads)[first.index] : float4{};
  __syncthreads();  // temp may have been used before
  const global_norm_detail::NormAndScale clip =
      global_norm_detail::finish(partials, gridDim.x, opt.max_norm, temp);
  if (threadIdx.x == 0) factors.grad_scale = clip.scale;
  __syncthreads();
  const adamw_detail::StepFactors f = factors;
  if (first.has) {
    adamw_detail::update_group(first.p, first.m, first.v, first_g, first.mask, opt.constants, f);
    reinterpret_cast<float4*>(opt.params)[first.index] = first.p;
    reinterpret_cast<float4*>(opt.m)[first.index] = first.m;
    reinterpret_cast<float4*>(opt.v)[first.index] = first.v;
  }
  adamw_detail::update_range(opt.params, opt.m, opt.v, opt.grads, opt.decay_mask, opt.n,
                             first.index, std::size_t{gridDim.x} * kThreads, opt.constants, f,
                             /*skip_first_group=*/first.has);
  return clip.norm;
}

// The end of a step, once the pass's dL/dy is complete (after the head's barrier): the
// backward phases, the block's norm partial (norm_partials[blockIdx.x]), the optimizer state's
// prefetch, the last barrier and the optimizer phase. `first` returns the thread's first group
// (its share starts there). Returns the norm (valid in thread 0).
template <ActivationKind Kind>
__device__ float backward_and_optimizer(Chunks& s, cooperative_groups::grid_group& grid,
                                        const Pass& pass, const FusedStepOptimizer& opt,
                                        double* norm_partials, BlockSum::TempStorage& temp,
                                        adamw_detail::StepFactors& factors, PhaseClock& clock,
                                        FirstGroup& first) {
  double sum_squares = 0.0;
  backward_phases<Kind>(s, grid, pass, &sum_squares, clock);
  const double block_sum = BlockSum(temp).Sum(sum_squares);
  if (threadIdx.x == 0) norm_partials[blockIdx.x] = block_sum;
  first = prefetch_first_group(opt);
  grid.sync();
  clock.mark();
  return optimizer_phase(opt, norm_partials, first, temp, factors);
}

// The end of the kernel, after the optimizer phase, given the sum of the loss terms (`loss_sum`,
// read in block 0's thread 0 only): that thread writes the loss (loss_sum / divisor in double),
// the norm, the advanced step and the clip scale 1; with the phase clock on, block 0's last
// reading.
__device__ inline void finish_step_with_loss_sum(const FusedStepScratch& scratch, float* loss,
                                                 float loss_sum, double divisor,
                                                 const FusedStepOptimizer& opt,
                                                 std::uint64_t step, float norm,
                                                 PhaseClock& clock) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *loss = static_cast<float>(static_cast<double>(loss_sum) / divisor);
    *opt.norm = norm;
    *opt.step = step + 1;
    if (opt.grad_scale != nullptr) *opt.grad_scale = 1.0f;
  }
  if (scratch.phase_times != nullptr) {
    __syncthreads();
    clock.mark();
  }
}

// finish_step_with_loss_sum with the loss sum taken by block 0's thread 0: the head's
// loss_partials [head_tiles] summed in order.
__device__ inline void finish_step(const FusedStepScratch& scratch, float* loss, double divisor,
                                   int head_tiles, const FusedStepOptimizer& opt,
                                   std::uint64_t step, float norm, PhaseClock& clock) {
  float total = 0.0f;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int t = 0; t < head_tiles; ++t) total += scratch.loss_partials[t];
  finish_step_with_loss_sum(scratch, loss, total, divisor, opt, step, norm, clock);
}

// ----- host side (launchers)

inline std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }

inline std::size_t tiles_on_host(std::size_t rows, std::size_t cols) {
  return ceil_div(rows, kTile) * ceil_div(cols, kTile);
}

inline std::size_t head_tiles_on_host(std::size_t rows) {
  return ceil_div(std::max<std::size_t>(rows, 1), kHeadRows);
}

// The weight-gradient tiles of the last backward phase (l = 1): dW_1's and dW_L's (the split
// counters FusedStepScratch::split_counters holds).
inline std::size_t last_backward_weight_tiles(std::span<const std::size_t> w) {
  const std::size_t L = w.size() - 1;
  return tiles_on_host(w[1], w[0]) + tiles_on_host(w[L], w[L - 1]);
}

// The most tiles a backward phase of backward_phases hands out for `rows` rows.
inline std::size_t most_backward_tiles(std::span<const std::size_t> w, std::size_t rows) {
  const std::size_t L = w.size() - 1;
  std::size_t most = 0;
  for (std::size_t l = L - 1; l >= 1; --l) {
    std::size_t tiles = tiles_on_host(w[l], w[l - 1]);
    if (l > 1) tiles += tiles_on_host(rows, w[l - 1]);
    if (l == 1) tiles += tiles_on_host(w[L], w[L - 1]);
    most = std::max(most, tiles);
  }
  return most;
}

// Throws resident::Error naming `op` unless fused_step_supports(widths) and batch >= 1 (what a
// step's grid function takes).
inline void require_supported(const char* op, std::span<const std::size_t> widths,
                              std::size_t batch) {
  if (!fused_step_supports(widths))
    throw Error(op, "invalid argument",
                "widths (" + std::to_string(widths.size()) +
                    " of them) are not 2 to 4 layers of widths >= 1 with at most " +
                    std::to_string(kFusedStepMaxOut) + " outputs",
                __FILE__, __LINE__);
  if (batch == 0) throw Error(op, "invalid argument", "batch = 0, must be >= 1", __FILE__, __LINE__);
}

// The grid of a cooperative launch of `kernel` (kThreads threads, static shared memory): as many
// blocks as the largest phase has tiles, at most as many as are co-resident on the current device.
// Host-side device queries only. Throws naming `op` when the device cannot launch cooperative
// kernels or no block fits an SM.
template <typename Kernel>
unsigned cooperative_grid(Kernel kernel, std::size_t max_tiles, const char* op) {
  int device = 0, cooperative = 0, sms = 0, per_sm = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (cooperative == 0)
    throw Error(op, "unsupported device",
                "device " + std::to_string(device) + " cannot launch cooperative kernels", __FILE__,
                __LINE__);
  RESIDENT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  const std::size_t resident_blocks = static_cast<std::size_t>(per_sm) * static_cast<std::size_t>(sms);
  if (resident_blocks == 0)
    throw Error(op, "unsupported device", "no block of the fused step fits an SM", __FILE__, __LINE__);
  return static_cast<unsigned>(std::min(resident_blocks, std::max<std::size_t>(max_tiles, 1)));
}

// Launches kernel<<<grid, kThreads>>>(args) with the cooperative attribute (grid barriers),
// after the previous kernel of the stream (launch_after_prior: the kernel starts with
// begin_after_prior_kernel).
template <typename Args>
void launch_cooperative(void (*kernel)(const Args), unsigned grid, const Args& args,
                        cudaStream_t stream) {
  launch_after_prior({dim3(grid), dim3(kThreads), 0, /*cooperative=*/true}, stream, kernel, args);
}

// The first call of every fused kernel: the next kernel of the stream may schedule its blocks,
// and this one waits for the previous kernel's results (kernels/core/programmatic_launch.cuh).
__device__ __forceinline__ void begin_after_prior_kernel() {
  allow_next_kernel_to_start();
  wait_for_prior_kernel();
}

}  // namespace resident::kernels::fused_step
