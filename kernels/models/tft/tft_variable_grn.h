// TFT's F per-variable GRNs of the variable selection network fused into one kernel forward and
// two backward (kernels/models/tft/tft_variable_grn_forward.cu, tft_variable_grn_backward.cu;
// block programs in tft_variable_grn.cuh, which the CPU test runs on the host). The unfused
// definition is TftModel::variable_grns_forward/backward's strided-batched GEMMs; the double one
// tests/reference/tft_reference.h (GRN_j). Per row n of N and variable j of F, e = e[n, j] [dc]:
//   z1 = W1 e + b1, eta2 = ELU(z1), eta1 = W2 eta2 + b2, gl = Wg eta1 + bg = [a | g] (the value
//   half first, then the gate), r = Ws e + bs + a * sigmoid(g), xhat = LayerNorm(r) without
//   affine (gamma 1, no beta) -> xhat [N, F, H].
// Each block holds variable j's weights in shared memory and one thread carries one row through
// the whole chain (its vectors in shared-memory columns); nothing but xhat is written: the
// backward recomputes the chain from e. fp32; every sum runs in a fixed order (no atomics), so
// results depend only on the values and the shape, and a graph replay equals an eager launch bit
// for bit. Nothing is allocated or synchronized (capturable). hidden H in [1, 64], prescale dc in
// [1, 64]; other sizes throw resident::Error naming the value and the range. Call
// prepare_variable_grn_kernels() once, outside any capture, before the first launch (it raises
// the kernels' shared-memory limit: up to 200 KB at H = dc = 64).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace resident::kernels::tft {

inline constexpr std::size_t kVariableGrnMaxHidden = 64;
inline constexpr std::size_t kVariableGrnMaxPrescale = 64;

// The per-variable parameters as the slab stores them, variable-major: w1 [F, H, dc], b1 [F, H],
// w2 [F, H, H], b2 [F, H], wg [F, 2H, H], bg [F, 2H], ws [F, H, dc], bs [F, H] (the slab's
// vsn_var.fc1, fc2, glu, skip weights and biases).
struct VgrnWeights {
  const float *w1, *b1, *w2, *b2, *wg, *bg, *ws, *bs;
};
struct VgrnGrads {
  float *w1, *b1, *w2, *b2, *wg, *bg, *ws, *bs;
};

void prepare_variable_grn_kernels();

// Throws resident::Error from `call` naming the first size out of range: hidden [1, 64],
// prescale [1, 64], features [1, 65536], rows [1, 2^40] (and at most 2^31 - 1 blocks).
void check_variable_grn_sizes(const char* call, std::size_t rows, std::size_t features,
                              std::size_t hidden, std::size_t prescale);

// xhat [rows, F, H] (overwritten) from e [rows, F, dc] (rows = B L). xhat must not alias e.
// eps: the LayerNorm's epsilon.
void launch_variable_grn_forward(float* xhat, const float* e, const VgrnWeights& weights,
                                 std::size_t rows, std::size_t features, std::size_t hidden,
                                 std::size_t prescale, float eps, cudaStream_t stream);

// Floats of `partials` launch_variable_grn_backward needs for `rows` rows:
// ceil(rows / 256) * F * (2 H dc + 3 H^2 + 5 H) (one gradient of every per-variable parameter per
// 256-row chunk and variable).
std::size_t variable_grn_partials_floats(std::size_t rows, std::size_t features,
                                         std::size_t hidden, std::size_t prescale);

// From dxhat [rows, F, H] (dLoss/dxhat): de [rows, F, dc] accumulated (de += the skip's and fc1's
// input gradients, in that order) and every per-variable parameter gradient accumulated into
// grads (grad += the sum over rows). Two launches: a block per (256-row chunk, variable) recomputes
// the chain, writes de and its chunk's parameter gradients (rows ascending within the chunk)
// into partials [chunks, F, P] (overwritten), then one thread per (variable, parameter) adds the
// chunks in order into grads. Deterministic. de, grads and partials must not alias each other or
// the inputs.
void launch_variable_grn_backward(float* de, const VgrnGrads& grads, float* partials,
                                  std::size_t partials_floats, const float* dxhat, const float* e,
                                  const VgrnWeights& weights, std::size_t rows,
                                  std::size_t features, std::size_t hidden, std::size_t prescale,
                                  float eps, cudaStream_t stream);

}  // namespace resident::kernels::tft
