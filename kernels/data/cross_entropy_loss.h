// Cross-entropy of class logits against integer labels, and its gradient, in one launch
// (kernels/data/cross_entropy_loss.cu): the loss of the supervised trainer's classification path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::data {

// logits [rows, classes] row-major, labels [rows] in [0, classes):
//   loss (one float, overwritten) = (1 / rows) sum_r (logsumexp(logits[r]) - logits[r, labels[r]])
//   d_logits [rows, classes] (overwritten, when non-null) =
//       d_loss * (softmax(logits[r]) - onehot(labels[r])) / rows
// A label outside [0, classes) makes the loss NaN (and that row's gradient NaN), so a bad label
// shows at the epoch's readback. One block: each thread takes rows t, t + blockDim, ... in order,
// then a fixed shared-memory tree; fp32 with max subtraction; deterministic, no atomics; nothing
// allocated or synchronized (capturable). Throws resident::Error for rows == 0 or classes
// outside [2, 1024].
void launch_cross_entropy_loss(float* loss, float* d_logits, const float* logits,
                               const std::int32_t* labels, std::size_t rows, std::size_t classes,
                               float d_loss, cudaStream_t stream);

}  // namespace resident::kernels::data
