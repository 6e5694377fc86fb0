// The fused narrow-MLP forward kernel as a template (mlp_forward_fused.h has the contract), so
// that an op can run its own per-tile epilogue inside the same launch (the PPO rollout's policy
// forward + action sampling: kernels/rl/ppo/policy_forward_sample.cu). Block = 256 or 128
// threads, tile = 32 rows. Shared memory: every layer's W^T [in][out] (rows of `out` floats,
// float4-aligned) and bias, then two activation tiles [32][widest + 1] (odd row stride for even
// widths: the rows a warp reads sit in different banks): 35 KB for the PPO actor, under the 48 KB
// default (ncu cannot replay graph nodes that opted in above); 134 KB for the DQN Q-network
// (64-128-128-3), opted in. A layer whose width is a multiple of 4 gives each thread a 4-column
// quad and up to 2 or 4 rows per pass (one float4 weight read feeds 8 or 16 FMAs; FewTiles /
// ManyTiles below); other widths one column and one row at a time. Both orders are the same per
// output (k ascending, fmaf), so the two paths agree bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/nn/activation_math.cuh"
#include "kernels/nn/mlp_forward_fused.h"
#include "kernels/nn/tile_quad_product.cuh"
#include "kernels/core/error.h"

namespace resident::kernels::fused_mlp {

inline constexpr unsigned kRows = 32;
// Two shapes of block, the same bits (each output's sum in the same order): a few tiles in all
// (PPO's 4096-row rollout forward: one tile per block) take 256 threads and 2 rows per pass, a
// short instruction chain per thread; many tiles per block (131072-row minibatches) take 128
// threads and 4 rows per pass, 16 FMAs per float4 weight read (H200: 88 us there vs
// 95 us with 256 threads; 17 -> 8.9 us for the rollout forward with 256).
struct FewTiles {
  static constexpr unsigned kThreads = 256, kRowsPerPass = 2;
};
struct ManyTiles {
  static constexpr unsigned kThreads = 128, kRowsPerPass = 4;
};

__host__ __device__ constexpr unsigned round4(unsigned n) { return (n + 3u) & ~3u; }

// Row stride of the activation tiles: the widest layer + 1 (odd for even widths: the rows a warp
// reads sit in different banks).
__host__ __device__ inline unsigned tile_stride(const FusedMlp& mlp) {
  unsigned widest = 0;
  for (unsigned l = 0; l <= mlp.layers; ++l)
    widest = mlp.widths[l] > widest ? mlp.widths[l] : widest;
  return widest + 1;
}

// Floats of the weight region (every layer's W^T and bias, each rounded up to 4 floats).
__host__ __device__ inline unsigned weight_floats(const FusedMlp& mlp) {
  unsigned total = 0;
  for (unsigned l = 0; l < mlp.layers; ++l)
    total += round4(mlp.widths[l] * mlp.widths[l + 1]) + round4(mlp.widths[l + 1]);
  return total;
}

template <ActivationKind Kind>
__device__ inline void finish_output(const FusedMlpLayer& layer, bool last, float* out_tile,
                                     std::size_t row0, std::size_t rows, unsigned r, unsigned j,
                                     unsigned n, unsigned stride, float z, const Activation& act) {
  const std::size_t row = row0 + r;
  if (last) {
    if (row < rows) layer.pre_activation[row * n + j] = z;
    return;
  }
  const float a = activation_math::value<Kind>(z, act);
  out_tile[r * stride + j] = a;
  if (row < rows) {
    if (layer.pre_activation != nullptr) layer.pre_activation[row * n + j] = z;
    layer.activation[row * n + j] = a;
  }
}

template <ActivationKind Kind, class Shape, class Epilogue>
__global__ void __launch_bounds__(Shape::kThreads)
    fused_mlp_forward(const FusedMlp mlp, const float* __restrict__ x, std::size_t rows,
                      const Activation act, const Epilogue epilogue) {
  constexpr unsigned kThreads = Shape::kThreads, kRowsPerPass = Shape::kRowsPerPass;
  extern __shared__ float4 shared4[];
  float* const shared = reinterpret_cast<float*>(shared4);
  const unsigned tid = threadIdx.x;
  // Every layer's W^T and bias, loaded once per block. The region is one flat index space
  // [W_0^T | b_0 | W_1^T | b_1 | ...] (each part rounded up to 4 floats); each thread issues up
  // to kLoadBatch independent read-only loads of its elements before any shared store, so the
  // whole region of a PPO-sized MLP (4.6k floats) arrives in one L2 round trip with 256 threads
  // (18 loads each), in two with 128 (there each block walks many tiles).
  // Element i's layer comes from the layers' first flat indices (registers), its (k, j) in W^T
  // from one float division: for local = k * n + j <= 128 * 128, (local + 0.5) / n lies at
  // least 0.5 / n from an integer and __fdividef's error (2 ulp, relative 2^-22) is below
  // 16384.5 / n * 2^-21 < 0.5 / n, so the truncation is exactly k (no integer division).
  const unsigned layers = mlp.layers;
  unsigned layer_begin[kFusedMlpMaxLayers + 1];
  layer_begin[0] = 0;
#pragma unroll
  for (unsigned l = 0; l < kFusedMlpMaxLayers; ++l)
    layer_begin[l + 1] = l < layers ? layer_begin[l] + round4(mlp.widths[l] * mlp.widths[l + 1]) +
                                          round4(mlp.widths[l + 1])
                                    : 0xffffffffu;
  const unsigned offset = weight_floats(mlp);  // == layer_begin[layers], without a dynamic index
  constexpr unsigned kLoadBatch = 20;
  for (unsigned first = tid; first < offset; first += kLoadBatch * kThreads) {
    float loaded[kLoadBatch];
#pragma unroll
    for (unsigned b = 0; b < kLoadBatch; ++b) {
      loaded[b] = 0.0f;
      const unsigned i = first + b * kThreads;  // index into the region
      if (i >= offset) continue;
      unsigned l = 0, begin = 0;
#pragma unroll
      for (unsigned q = 1; q < kFusedMlpMaxLayers; ++q)
        if (i >= layer_begin[q]) {
          l = q;
          begin = layer_begin[q];
        }
      const unsigned k_count = mlp.widths[l], n = mlp.widths[l + 1];
      const unsigned local = i - begin, weight_part = round4(k_count * n);
      if (local < k_count * n) {  // W^T[k][j] = W[j][k]
        const unsigned k = static_cast<unsigned>(
            __fdividef(static_cast<float>(local) + 0.5f, static_cast<float>(n)));
        const unsigned j = local - k * n;
        loaded[b] = __ldg(mlp.layer[l].weight + j * k_count + k);
      } else if (local >= weight_part && local - weight_part < n) {
        loaded[b] = __ldg(mlp.layer[l].bias + (local - weight_part));
      }  // else padding
    }
#pragma unroll
    for (unsigned b = 0; b < kLoadBatch; ++b)
      if (first + b * kThreads < offset) shared[first + b * kThreads] = loaded[b];
  }
  const unsigned stride = tile_stride(mlp);
  float* const tile_a = shared + offset;
  float* const tile_b = tile_a + kRows * stride;
  const unsigned in0 = mlp.widths[0];
  const std::size_t tiles = (rows + kRows - 1) / kRows;
  // Tiles of kRows rows, strided over the grid (the weights stay in shared memory).
  for (std::size_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float* in_tile = tile_a;
    float* out_tile = tile_b;
    // The x tile (rows past the end read as 0 and are never stored).
    const std::size_t row0 = tile * kRows;
    __syncthreads();  // the previous tile's reads of tile_a / tile_b are done
    for (unsigned i = tid; i < kRows * in0; i += kThreads) {
      const unsigned r = i / in0, k = i % in0;
      in_tile[r * stride + k] = row0 + r < rows ? x[(row0 + r) * in0 + k] : 0.0f;
    }
    __syncthreads();

    unsigned layer_offset = 0;
    for (unsigned l = 0; l < mlp.layers; ++l) {
      const unsigned k_count = mlp.widths[l], n = mlp.widths[l + 1];
      const float* wt = shared + layer_offset;
      const float* bias = wt + round4(k_count * n);
      layer_offset += round4(k_count * n) + round4(n);
      const bool last = l + 1 == mlp.layers;
      const FusedMlpLayer& layer = mlp.layer[l];
      if (n % 4 == 0) {
        const unsigned quads = n / 4;
        const unsigned groups = kThreads / quads;  // row groups
        const unsigned q = tid % quads, g = tid / quads;
        if (g < groups) {
          for (unsigned r0 = g; r0 < kRows; r0 += groups * kRowsPerPass) {
            float acc[kRowsPerPass][4];
            tile_quad_product<kRowsPerPass, kRows>(acc, in_tile, stride, wt, n, k_count, r0,
                                                   groups, q);
  #pragma unroll
            for (unsigned m = 0; m < kRowsPerPass; ++m) {
              const unsigned r = r0 + m * groups;
              if (r >= kRows) break;
              float4 z, a;
              z.x = acc[m][0] + bias[4 * q];
              z.y = acc[m][1] + bias[4 * q + 1];
              z.z = acc[m][2] + bias[4 * q + 2];
              z.w = acc[m][3] + bias[4 * q + 3];
              const std::size_t row = row0 + r;
              if (row < rows && layer.pre_activation != nullptr)
                *reinterpret_cast<float4*>(layer.pre_activation + row * n + 4 * q) = z;
              if (last) continue;
              a.x = activation_math::value<Kind>(z.x, act);
              a.y = activation_math::value<Kind>(z.y, act);
              a.z = activation_math::value<Kind>(z.z, act);
              a.w = activation_math::value<Kind>(z.w, act);
              float* tile_row = out_tile + r * stride + 4 * q;
              tile_row[0] = a.x;
              tile_row[1] = a.y;
              tile_row[2] = a.z;
              tile_row[3] = a.w;
              if (row < rows) *reinterpret_cast<float4*>(layer.activation + row * n + 4 * q) = a;
            }
          }
        }
      } else {
        const unsigned groups = kThreads / n;
        const unsigned j = tid % n, g = tid / n;
        if (g < groups) {
          for (unsigned r = g; r < kRows; r += groups) {
            float acc = 0.0f;
            for (unsigned k = 0; k < k_count; ++k)
              acc = fmaf(in_tile[r * stride + k], wt[k * n + j], acc);
            finish_output<Kind>(layer, last, out_tile, row0, rows, r, j, n, stride, acc + bias[j],
                               act);
          }
        }
      }
      __syncthreads();
      float* const t = in_tile;
      in_tile = out_tile;
      out_tile = t;
    }
    // Every output of the tile is written (the barrier above makes this block's global writes
    // visible to its threads): the epilogue may read the tile's last-layer rows.
    epilogue(row0, rows);
  }
}

static_assert(FewTiles::kThreads >= kRows && ManyTiles::kThreads >= kRows,
              "an epilogue may give each of a tile's rows its own thread");

// An epilogue that does nothing (the plain forward).
struct NoEpilogue {
  __device__ void operator()(std::size_t, std::size_t) const {}
};

// Grid and shared memory of a launch; validates the MLP (throws resident::Error naming the field
// for bad widths, layer counts, null pointers, misalignment or weights beyond the shared-memory
// limit; `caller` names the op in the message). blocks == 0 when rows == 0.
struct LaunchPlan {
  std::size_t blocks = 0;
  std::size_t shared_bytes = 0;
  bool many_tiles = false;  // each block walks two tiles or more: ManyTiles
};
LaunchPlan plan_launch(const FusedMlp& mlp, const float* x, std::size_t rows, const char* caller);

// The forward with `epilogue(row0, rows)` called by every thread of the block after each 32-row
// tile (rows row0 .. row0 + 31, those < rows valid). Each tile is handled once, by one block; the
// barrier after its last layer makes the tile's outputs in global memory visible to the
// epilogue, which may read them (and write its own outputs) but must not touch shared memory.
// Blocks have at least 32 threads (static_assert above).
template <class Epilogue>
void launch(const FusedMlp& mlp, const float* x, std::size_t rows, const Activation& hidden,
            const Epilogue& epilogue, const char* caller, cudaStream_t stream) {
  const LaunchPlan plan = plan_launch(mlp, x, rows, caller);
  if (plan.blocks == 0) return;
  const auto run = [&](auto kind, auto shape) {
    using Shape = decltype(shape);
    const auto kernel = fused_mlp_forward<decltype(kind)::value, Shape, Epilogue>;
    // Host-side attribute (no stream work): needed above the default 48 KiB.
    if (plan.shared_bytes > 48 * 1024)
      RESIDENT_CUDA_CHECK(cudaFuncSetAttribute(kernel,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(plan.shared_bytes)));
    kernel<<<static_cast<unsigned>(plan.blocks), Shape::kThreads, plan.shared_bytes, stream>>>(
        mlp, x, rows, hidden, epilogue);
  };
  activation_math::dispatch(hidden, caller, [&](auto kind) {
    if (plan.many_tiles)
      run(kind, ManyTiles{});
    else
      run(kind, FewTiles{});
  });
  RESIDENT_CHECK_LAUNCH("fused_mlp_forward");
}

}  // namespace resident::kernels::fused_mlp
