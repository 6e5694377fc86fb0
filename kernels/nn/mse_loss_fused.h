// MSE loss and its gradient in one launch (kernels/nn/mse_loss_fused.cu): the value of
// launch_mse_loss and the gradient of launch_mse_loss_backward (losses.h), computed in the same
// pass over prediction and target.
//
//   loss          = mean over n of (prediction - target)^2               (one float, overwritten)
//   d_prediction  = d_loss * 2 (prediction - target) / n                  (overwritten or
//                                                                          accumulated per `mode`)
//
// Reduction: mse_loss_fused_partials_count(n) blocks each sum their grid-stride share in a fixed
// order into partials[block] (the split and order of launch_mse_loss: same n, same blocks); the
// block that finishes last (a ticket from an atomic increment of *counter, which only picks the
// block and never touches a float) adds the partials in index order and divides by n in double.
// The value therefore depends on n alone: the same bits on every run. *counter must be 0 before
// the first launch (zero it at setup); the kernel leaves it 0 again (atomicInc wraps), so
// launches and graph replays need no reset. partials [>= partials count] and counter are
// caller-owned scratch sized at construction; one (partials, counter) pair per stream at a time.
// d_prediction may not alias prediction or target. Nothing allocated or synchronized
// (capturable). n == 0 or scratch too small throws resident::Error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/grad_mode.h"

namespace resident::kernels {

// Floats of `partials` for n terms (equal to loss_partials_count(n)).
std::size_t mse_loss_fused_partials_count(std::size_t n);

void launch_mse_loss_fused(float* loss, float* d_prediction, float* partials,
                           std::size_t partials_count, unsigned int* counter,
                           const float* prediction, const float* target, std::size_t n,
                           float d_loss, nn::GradMode mode, cudaStream_t stream);

}  // namespace resident::kernels
