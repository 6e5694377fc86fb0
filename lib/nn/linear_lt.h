// Linear layer GEMMs on cuBLASLt with fused epilogues (fp32 storage and math, CUBLAS_COMPUTE_32F:
// no TF32). One LinearLtPlan is one GEMM of a Linear layer at one fixed shape, built once at
// setup: descriptors, layouts, the epilogue's vectors (bias, bias gradient, aux) and the
// algorithm chosen by cublasLtMatmulAlgoGetHeuristic among those without split-K (reduction
// scheme NONE, CUBLASLT_ALGO_CONFIG_SPLITK_NUM <= 1), so each run() is one cublasLtMatmul with a
// fixed algorithm: deterministic, no atomics, no allocation, no host synchronization
// (graph-capturable).
//
// Row-major buffers as in linear.h; a row-major A [r, c] is the column-major A^T [c, r] (ld c),
// so the three products are, in the column-major views cuBLASLt sees:
//   Forward     y^T  [out, batch] = T(W^T [in, out]) x^T [in, batch]       m=out, n=batch, k=in
//   InputGrad   dx^T [in, batch]  = W^T [in, out] dy^T [out, batch]        m=in,  n=batch, k=out
//   WeightGrad  dW^T [in, out]    = x^T [in, batch] T(dy^T [out, batch])   m=in,  n=out,   k=batch
// (T(.): CUBLAS_OP_T on that operand.)
// Epilogues (cublasLtEpilogue_t) and where their vectors go:
//   Forward:    Bias (bias [out], added along D's rows = output features), ReluAux / ReluAuxBias
//               (D = relu(z), aux = the bit mask z > 0, z = the pre-activation),
//               GeluAux / GeluAuxBias (D = gelu_tanh(.), aux = the pre-activation, fp32).
//   InputGrad:  DRelu / DGelu (D = act'(z) * (dy W), z read through the forward's aux),
//               DReluBGrad / DGeluBGrad (and bias_grad [in] = sum over batch of that D:
//               the previous layer's bias gradient).
//   WeightGrad: BGradB (bias_grad [out] = sum over batch of dy: B's reduction over k, i.e. the
//               columns of D = the output features; BGRADA would reduce A = x instead).
// Aux layout: column-major [rows of D, batch] = row-major [batch, rows of D] with a padded row
// pitch aux_ld: in bits for ReLU (a multiple of 128, >= rows), in floats for GELU (a multiple of
// 8, >= rows); see lt_aux_ld and lt_aux_bytes. A forward plan and the InputGrad plan that reads
// its aux must use the same aux pointer and ld. Epilogue outputs (aux, bias_grad) are always
// overwritten; D is overwritten, or accumulated (beta = 1) with the Default epilogue only.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/nn/activation.h"
#include "lib/core/stream.h"
#include "kernels/core/grad_mode.h"
#include "lib/nn/linear.h"

namespace resident::nn {

enum class LinearLtProduct { Forward, InputGrad, WeightGrad };

enum class LtEpilogue {
  Default,
  Bias,
  ReluAux,
  ReluAuxBias,
  GeluAux,
  GeluAuxBias,
  DRelu,
  DReluBGrad,
  DGelu,
  DGeluBGrad,
  BGradB,
};

const char* to_string(LinearLtProduct product) noexcept;
const char* to_string(LtEpilogue epilogue) noexcept;
cublasLtEpilogue_t to_cublaslt(LtEpilogue epilogue) noexcept;

// Host-side facts of the epilogues (no device needed).
bool lt_needs_bias(LtEpilogue epilogue) noexcept;       // reads bias: Bias, *AuxBias
bool lt_writes_bias_grad(LtEpilogue epilogue) noexcept; // writes bias_grad: *BGrad, BGradB
bool lt_uses_aux(LtEpilogue epilogue) noexcept;         // *Aux* (written), D* (read)
bool lt_relu_aux(LtEpilogue epilogue) noexcept;         // the aux is a ReLU bit mask
// The product an epilogue belongs to (Default: any).
bool lt_allowed(LinearLtProduct product, LtEpilogue epilogue) noexcept;
// Smallest valid aux ld for `rows` rows of D: rows rounded up to 128 (bits, ReLU) or 8 (floats,
// GELU); 0 for epilogues without aux.
std::size_t lt_aux_ld(LtEpilogue epilogue, std::size_t rows) noexcept;
// Bytes of an aux buffer of `columns` columns (batch) at ld lt_aux_ld(epilogue, rows).
std::size_t lt_aux_bytes(LtEpilogue epilogue, std::size_t rows, std::size_t columns) noexcept;

// The epilogues that fuse a hidden activation, or nullopt for activations cuBLASLt has no
// epilogue for (tanh, sigmoid, SiLU, ELU, softplus: those keep the kit's kernels). Relu -> ReluAux
// (bias: ReluAuxBias) / DRelu (bias_grad: DReluBGrad); GeluTanh -> GeluAux(Bias) / DGelu(BGrad).
std::optional<LtEpilogue> lt_activation_forward(kernels::ActivationKind kind, bool bias) noexcept;
std::optional<LtEpilogue> lt_activation_backward(kernels::ActivationKind kind,
                                                 bool bias_grad) noexcept;

// One GEMM of a Linear layer. Pointers of the epilogue's vectors are baked into the plan.
struct LinearLtSpec {
  LinearLtProduct product = LinearLtProduct::Forward;
  LinearShape shape{};
  LtEpilogue epilogue = LtEpilogue::Default;
  const float* bias = nullptr;  // Forward with Bias / *AuxBias: [out]
  float* bias_grad = nullptr;   // BGradB: [out]; D*BGrad: [in]
  void* aux = nullptr;          // *Aux: written, D*: read; 16-byte aligned
  std::size_t aux_ld = 0;       // see lt_aux_ld (bits for ReLU, floats for GELU)
  // Upper bound of the workspace an algorithm may ask for; run() lends the context's cuBLAS
  // workspace and throws if it is smaller than the plan's need.
  std::size_t max_workspace_bytes = std::size_t{4} << 20;
};

// Throws resident::Error naming the field and its value when the spec is not valid: a dimension
// 0 or above INT_MAX, an epilogue of another product, a missing or unexpected bias, bias_grad or
// aux, an aux ld that is not a multiple of 128 bits (ReLU) / 8 floats (GELU) or is below the rows
// of D, an aux pointer not 16-byte aligned.
void validate(const LinearLtSpec& spec);

// Owner of a cuBLASLt handle (not bound to a stream: run() names the stream).
class LtHandle {
 public:
  LtHandle();
  ~LtHandle();
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  LtHandle(LtHandle&& other) noexcept;
  LtHandle& operator=(LtHandle&& other) noexcept;
  cublasLtHandle_t get() const noexcept { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

class LinearLtPlan {
 public:
  // Validates, builds the descriptors and picks the first heuristic result without split-K.
  // Returns nullopt when cuBLASLt has no such algorithm for this epilogue and shape (the caller
  // falls back to a plainer epilogue plus a kernel); throws on any other failure.
  static std::optional<LinearLtPlan> try_create(const LtHandle& handle, const LinearLtSpec& spec);
  // As try_create, but no algorithm throws resident::Error naming the spec.
  static LinearLtPlan create(const LtHandle& handle, const LinearLtSpec& spec);

  // Enqueues the GEMM on the context's stream with the plan's algorithm and the context's
  // workspace. Operands (row-major, as in linear.h):
  //   Forward     out = y  [batch, out], first = x  [batch, in],  second = W [out, in]
  //   InputGrad   out = dx [batch, in],  first = dy [batch, out], second = W [out, in]
  //   WeightGrad  out = dW [out, in],    first = dy [batch, out], second = x [batch, in]
  // mode Accumulate (beta = 1) is allowed with the Default epilogue only. The operands must be
  // 16-byte aligned (the alignment the algorithm was chosen for); throws otherwise.
  void run(const StreamContext& context, float* out, const float* first, const float* second,
           GradMode mode = GradMode::Overwrite) const;

  const LinearLtSpec& spec() const noexcept { return spec_; }
  std::size_t workspace_bytes() const noexcept;
  // "WeightGrad 256x256x3 BGradB algo 21 tile 18 splitK 1 ws 0": for logs and test output.
  std::string describe() const;

 private:
  struct Descriptors;
  LinearLtPlan(const LtHandle& handle, LinearLtSpec spec, std::shared_ptr<Descriptors> descriptors);

  cublasLtHandle_t handle_ = nullptr;
  LinearLtSpec spec_;
  std::shared_ptr<Descriptors> descriptors_;  // immutable after creation
};

}  // namespace resident::nn
