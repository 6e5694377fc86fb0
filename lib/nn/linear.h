// Linear layer ops on cuBLAS (fp32; TF32 only if the StreamContext allows it):
//   forward   y [batch, out] = x [batch, in] W^T + b      (W [out, in] row-major, b [out])
//   backward  dx [batch, in] = dy W,  dW [out, in] = dy^T x,  db [out] = column sums of dy
// All buffers row-major on the device; all work on the context's stream; nothing allocated,
// nothing synchronized, so calls are graph-capturable. Forward overwrites y; the backward
// overwrites or accumulates into each gradient as `mode` says (null gradients are skipped).
#pragma once

#include <cstddef>

#include "lib/core/stream.h"
#include "kernels/core/grad_mode.h"

namespace resident::nn {

struct LinearShape {
  std::size_t batch = 0;
  std::size_t in_features = 0;
  std::size_t out_features = 0;
};

struct LinearGrads {
  float* dx = nullptr;       // [batch, in] or null
  float* dweight = nullptr;  // [out, in] or null
  float* dbias = nullptr;    // [out] or null (no bias)
};

// bias may be null (no bias).
void linear_forward(const StreamContext& context, const LinearShape& shape, float* y,
                    const float* x, const float* weight, const float* bias);

void linear_backward(const StreamContext& context, const LinearShape& shape,
                     const LinearGrads& grads, const float* x, const float* weight,
                     const float* dy, GradMode mode);

}  // namespace resident::nn
