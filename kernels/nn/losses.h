// Regression losses and their gradients (kernels/nn/losses.cu), as the reference defines them
// (tests/reference/nn_reference.h): MSE, Huber with per-sample weights (PER importance weights),
// pinball (quantile); and the mean of a vector (e.g. PPO's mean entropy).
//
// A loss launcher writes the scalar into one device float (`loss`, overwritten) and never
// leaves the device: the trainer reads it back when it chooses (ScalarReadback, once per
// epoch). The sum is reduced in two fixed-order passes with no atomics: loss_partials_count(n)
// blocks each add their grid-stride share and tree-reduce it into `partials`, then one block adds
// the partials and divides. The split depends on n alone, so the value is the same bits on every
// run and every GPU. `partials` is caller-owned scratch of at least loss_partials_count(n) floats,
// sized at construction.
//
// A backward writes d_loss * dL/dprediction into d_prediction (same shape as prediction),
// overwriting or accumulating as `mode` says; d_loss is the upstream scale (1 at the end of the
// chain, a loss coefficient otherwise). Elementwise, deterministic.
//
// Row-major float buffers on the device; nothing allocated or synchronized (capturable). An empty
// batch (n == 0) or scratch too small throws resident::Error, as do delta <= 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Floats of `partials` scratch for a loss or mean over n terms: ceil(n / 2048) clamped to
// [1, 1024].
std::size_t loss_partials_count(std::size_t n);

// MSE: loss = mean over n of (prediction - target)^2. prediction, target [n].
void launch_mse_loss(float* loss, float* partials, std::size_t partials_count,
                     const float* prediction, const float* target, std::size_t n,
                     cudaStream_t stream);
// d_prediction [n] = d_loss * 2 (prediction - target) / n.
void launch_mse_loss_backward(float* d_prediction, const float* prediction, const float* target,
                              std::size_t n, float d_loss, nn::GradMode mode, cudaStream_t stream);

// Huber with per-sample weights:
//   loss = 1 / (rows * cols) * sum_r weight_r * sum_c h(prediction_rc - target_rc),
//   h(d) = d^2 / 2 for |d| <= delta, delta (|d| - delta / 2) beyond; delta > 0.
// prediction, target [rows, cols]; sample_weights [rows], or null for weight 1.
void launch_huber_loss(float* loss, float* partials, std::size_t partials_count,
                       const float* prediction, const float* target, const float* sample_weights,
                       std::size_t rows, std::size_t cols, float delta, cudaStream_t stream);
// d_prediction [rows, cols] = d_loss * weight_r * clamp(prediction - target, -delta, delta) /
// (rows * cols).
void launch_huber_loss_backward(float* d_prediction, const float* prediction, const float* target,
                                const float* sample_weights, std::size_t rows, std::size_t cols,
                                float delta, float d_loss, nn::GradMode mode, cudaStream_t stream);

// Pinball (quantile): column k of prediction [rows, quantiles] estimates quantile taus[k] of the
// row's target [rows]:
//   loss = 1 / (rows * K) * sum_{r,k} rho(target_r - prediction_rk, tau_k),
//   rho(u, tau) = tau u for u >= 0, (tau - 1) u below; taus [quantiles], each in (0, 1).
void launch_pinball_loss(float* loss, float* partials, std::size_t partials_count,
                         const float* prediction, const float* target, const float* taus,
                         std::size_t rows, std::size_t quantiles, cudaStream_t stream);
// d_prediction [rows, quantiles] = -d_loss * slope / (rows * K), slope = tau for u >= 0, tau - 1
// below.
void launch_pinball_loss_backward(float* d_prediction, const float* prediction, const float* target,
                                  const float* taus, std::size_t rows, std::size_t quantiles,
                                  float d_loss, nn::GradMode mode, cudaStream_t stream);

// mean = sum of values [n] / n, same two-pass reduction as the losses (n > 0).
void launch_mean(float* mean, float* partials, std::size_t partials_count, const float* values,
                 std::size_t n, cudaStream_t stream);

}  // namespace resident::kernels
