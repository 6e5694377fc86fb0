#include "lib/nn/linear.h"

#include <climits>
#include <string>

#include "kernels/nn/bias.h"
#include "lib/core/library_checks.h"

namespace resident::nn {

namespace {

// cuBLAS takes int dimensions.
int checked_dim(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw Error("linear", "dimension too large",
                std::string(what) + " = " + std::to_string(n) + ", allowed [0, 2147483647]",
                __FILE__, __LINE__);
  return static_cast<int>(n);
}

// Row-major A [r, c] is column-major A^T [c, r] with leading dimension c; every product below
// is written for those column-major views.
}  // namespace

void linear_forward(const StreamContext& context, const LinearShape& shape, float* y,
                    const float* x, const float* weight, const float* bias) {
  const int batch = checked_dim(shape.batch, "batch");
  const int in = checked_dim(shape.in_features, "in_features");
  const int out = checked_dim(shape.out_features, "out_features");
  if (batch == 0 || out == 0) return;
  const float one = 1.0f, zero = 0.0f;
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  // y^T [out, batch] = W [out, in] x^T [in, batch]
  RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, batch, in,
                                    &one, weight, in, x, in, &zero, y, out));
  if (bias != nullptr)
    kernels::launch_add_bias(y, bias, shape.batch, shape.out_features, context.stream());
}

void linear_backward(const StreamContext& context, const LinearShape& shape,
                     const LinearGrads& grads, const float* x, const float* weight,
                     const float* dy, GradMode mode) {
  const int batch = checked_dim(shape.batch, "batch");
  const int in = checked_dim(shape.in_features, "in_features");
  const int out = checked_dim(shape.out_features, "out_features");
  const float one = 1.0f;
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;  // beta 0: C is never read
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  if (grads.dx != nullptr && batch > 0 && in > 0)
    // dx^T [in, batch] = W^T [in, out] dy^T [out, batch]
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, batch, out,
                                      &one, weight, in, dy, out, &beta, grads.dx, in));
  if (grads.dweight != nullptr && in > 0 && out > 0)
    // dW^T [in, out] = x^T [in, batch] dy [batch, out]
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch,
                                      &one, x, in, dy, out, &beta, grads.dweight, in));
  if (grads.dbias != nullptr)
    kernels::launch_bias_grad(grads.dbias, dy, shape.batch, shape.out_features, mode,
                              context.stream());
}

}  // namespace resident::nn
