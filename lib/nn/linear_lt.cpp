#include "lib/nn/linear_lt.h"

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "lib/core/library_checks.h"
#include "kernels/core/nvtx_range.h"

namespace resident::nn {

namespace {

constexpr std::uint32_t kOperandAlignment = 16;  // bytes the algorithms are chosen for
constexpr int kHeuristicResults = 32;

[[noreturn]] void invalid(const std::string& what, const char* file, int line) {
  throw Error("LinearLtSpec", "invalid argument", what, file, line);
}

std::string spec_name(const LinearLtSpec& spec) {
  return std::string(to_string(spec.product)) + " (batch " + std::to_string(spec.shape.batch) +
         ", in " + std::to_string(spec.shape.in_features) + ", out " +
         std::to_string(spec.shape.out_features) + ") with epilogue " + to_string(spec.epilogue);
}

// Rows of D: the length of the bias / bias-gradient vectors of the row-wise epilogues and the
// minimum aux ld.
std::size_t rows_of_d(const LinearLtSpec& spec) {
  switch (spec.product) {
    case LinearLtProduct::Forward: return spec.shape.out_features;
    case LinearLtProduct::InputGrad: return spec.shape.in_features;
    case LinearLtProduct::WeightGrad: return spec.shape.in_features;
  }
  return 0;
}

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  RESIDENT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <class T>
void set_preference(cublasLtMatmulPreference_t preference,
                    cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  RESIDENT_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  std::size_t written = 0;
  RESIDENT_CUBLAS_CHECK(
      cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written));
  return value;
}

// RAII for the preference descriptor (only alive during creation).
struct Preference {
  cublasLtMatmulPreference_t handle = nullptr;
  Preference() { RESIDENT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&handle)); }
  ~Preference() {
    if (handle != nullptr) (void)cublasLtMatmulPreferenceDestroy(handle);
  }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
};

}  // namespace

// ----- host-side facts

const char* to_string(LinearLtProduct product) noexcept {
  switch (product) {
    case LinearLtProduct::Forward: return "Forward";
    case LinearLtProduct::InputGrad: return "InputGrad";
    case LinearLtProduct::WeightGrad: return "WeightGrad";
  }
  return "unknown product";
}

const char* to_string(LtEpilogue epilogue) noexcept {
  switch (epilogue) {
    case LtEpilogue::Default: return "Default";
    case LtEpilogue::Bias: return "Bias";
    case LtEpilogue::ReluAux: return "ReluAux";
    case LtEpilogue::ReluAuxBias: return "ReluAuxBias";
    case LtEpilogue::GeluAux: return "GeluAux";
    case LtEpilogue::GeluAuxBias: return "GeluAuxBias";
    case LtEpilogue::DRelu: return "DRelu";
    case LtEpilogue::DReluBGrad: return "DReluBGrad";
    case LtEpilogue::DGelu: return "DGelu";
    case LtEpilogue::DGeluBGrad: return "DGeluBGrad";
    case LtEpilogue::BGradB: return "BGradB";
  }
  return "unknown epilogue";
}

cublasLtEpilogue_t to_cublaslt(LtEpilogue epilogue) noexcept {
  switch (epilogue) {
    case LtEpilogue::Default: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::ReluAux: return CUBLASLT_EPILOGUE_RELU_AUX;
    case LtEpilogue::ReluAuxBias: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case LtEpilogue::GeluAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::GeluAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::DRelu: return CUBLASLT_EPILOGUE_DRELU;
    case LtEpilogue::DReluBGrad: return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case LtEpilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case LtEpilogue::DGeluBGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    case LtEpilogue::BGradB: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool lt_needs_bias(LtEpilogue e) noexcept {
  return e == LtEpilogue::Bias || e == LtEpilogue::ReluAuxBias || e == LtEpilogue::GeluAuxBias;
}

bool lt_writes_bias_grad(LtEpilogue e) noexcept {
  return e == LtEpilogue::DReluBGrad || e == LtEpilogue::DGeluBGrad || e == LtEpilogue::BGradB;
}

bool lt_uses_aux(LtEpilogue e) noexcept {
  return e == LtEpilogue::ReluAux || e == LtEpilogue::ReluAuxBias || e == LtEpilogue::GeluAux ||
         e == LtEpilogue::GeluAuxBias || e == LtEpilogue::DRelu || e == LtEpilogue::DReluBGrad ||
         e == LtEpilogue::DGelu || e == LtEpilogue::DGeluBGrad;
}

bool lt_relu_aux(LtEpilogue e) noexcept {
  return e == LtEpilogue::ReluAux || e == LtEpilogue::ReluAuxBias || e == LtEpilogue::DRelu ||
         e == LtEpilogue::DReluBGrad;
}

bool lt_allowed(LinearLtProduct product, LtEpilogue e) noexcept {
  switch (e) {
    case LtEpilogue::Default: return true;
    case LtEpilogue::Bias:
    case LtEpilogue::ReluAux:
    case LtEpilogue::ReluAuxBias:
    case LtEpilogue::GeluAux:
    case LtEpilogue::GeluAuxBias: return product == LinearLtProduct::Forward;
    case LtEpilogue::DRelu:
    case LtEpilogue::DReluBGrad:
    case LtEpilogue::DGelu:
    case LtEpilogue::DGeluBGrad: return product == LinearLtProduct::InputGrad;
    case LtEpilogue::BGradB: return product == LinearLtProduct::WeightGrad;
  }
  return false;
}

std::size_t lt_aux_ld(LtEpilogue epilogue, std::size_t rows) noexcept {
  if (!lt_uses_aux(epilogue)) return 0;
  const std::size_t multiple = lt_relu_aux(epilogue) ? 128 : 8;
  return (rows + multiple - 1) / multiple * multiple;
}

std::size_t lt_aux_bytes(LtEpilogue epilogue, std::size_t rows, std::size_t columns) noexcept {
  const std::size_t ld = lt_aux_ld(epilogue, rows);
  return lt_relu_aux(epilogue) ? ld / 8 * columns : ld * columns * sizeof(float);
}

std::optional<LtEpilogue> lt_activation_forward(kernels::ActivationKind kind, bool bias) noexcept {
  switch (kind) {
    case kernels::ActivationKind::Relu: return bias ? LtEpilogue::ReluAuxBias : LtEpilogue::ReluAux;
    case kernels::ActivationKind::GeluTanh:
      return bias ? LtEpilogue::GeluAuxBias : LtEpilogue::GeluAux;
    default: return std::nullopt;
  }
}

std::optional<LtEpilogue> lt_activation_backward(kernels::ActivationKind kind,
                                                 bool bias_grad) noexcept {
  switch (kind) {
    case kernels::ActivationKind::Relu: return bias_grad ? LtEpilogue::DReluBGrad : LtEpilogue::DRelu;
    case kernels::ActivationKind::GeluTanh:
      return bias_grad ? LtEpilogue::DGeluBGrad : LtEpilogue::DGelu;
    default: return std::nullopt;
  }
}

void validate(const LinearLtSpec& spec) {
  const auto check_dim = [](std::size_t n, const char* what) {
    if (n == 0 || n > static_cast<std::size_t>(INT_MAX))
      invalid(std::string(what) + " = " + std::to_string(n) + ", allowed [1, 2147483647]",
              __FILE__, __LINE__);
  };
  check_dim(spec.shape.batch, "shape.batch");
  check_dim(spec.shape.in_features, "shape.in_features");
  check_dim(spec.shape.out_features, "shape.out_features");
  if (!lt_allowed(spec.product, spec.epilogue))
    invalid(std::string("epilogue ") + to_string(spec.epilogue) + " does not apply to product " +
                to_string(spec.product),
            __FILE__, __LINE__);
  const std::string name = spec_name(spec);
  if (lt_needs_bias(spec.epilogue) != (spec.bias != nullptr))
    invalid(name + ": bias " + (spec.bias != nullptr ? "given but not read" : "missing (null)"),
            __FILE__, __LINE__);
  if (lt_writes_bias_grad(spec.epilogue) != (spec.bias_grad != nullptr))
    invalid(name + ": bias_grad " +
                (spec.bias_grad != nullptr ? "given but not written" : "missing (null)"),
            __FILE__, __LINE__);
  if (!lt_uses_aux(spec.epilogue)) {
    if (spec.aux != nullptr || spec.aux_ld != 0)
      invalid(name + ": aux given (ld " + std::to_string(spec.aux_ld) + ") but not used",
              __FILE__, __LINE__);
    return;
  }
  if (spec.aux == nullptr) invalid(name + ": aux missing (null)", __FILE__, __LINE__);
  if (!aligned(spec.aux, kOperandAlignment))
    invalid(name + ": aux not " + std::to_string(kOperandAlignment) + "-byte aligned", __FILE__,
            __LINE__);
  const std::size_t rows = rows_of_d(spec);
  const bool relu = lt_relu_aux(spec.epilogue);
  const std::size_t multiple = relu ? 128 : 8;
  if (spec.aux_ld % multiple != 0 || spec.aux_ld < rows)
    invalid(name + ": aux_ld = " + std::to_string(spec.aux_ld) + (relu ? " bits" : " floats") +
                ", must be a multiple of " + std::to_string(multiple) + " and >= " +
                std::to_string(rows) + " (rows of D)",
            __FILE__, __LINE__);
}

// ----- LtHandle

LtHandle::LtHandle() { RESIDENT_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

LtHandle::~LtHandle() {
  if (handle_ != nullptr) (void)cublasLtDestroy(handle_);
}

LtHandle::LtHandle(LtHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

LtHandle& LtHandle::operator=(LtHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cublasLtDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

// ----- LinearLtPlan

struct LinearLtPlan::Descriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // C shares D's layout
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace_bytes = 0;

  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (d != nullptr) (void)cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (matmul != nullptr) (void)cublasLtMatmulDescDestroy(matmul);
  }
};

LinearLtPlan::LinearLtPlan(const LtHandle& handle, LinearLtSpec spec,
                           std::shared_ptr<Descriptors> descriptors)
    : handle_(handle.get()), spec_(spec), descriptors_(std::move(descriptors)) {}

std::optional<LinearLtPlan> LinearLtPlan::try_create(const LtHandle& handle,
                                                     const LinearLtSpec& spec) {
  validate(spec);
  const auto batch = static_cast<std::uint64_t>(spec.shape.batch);
  const auto in = static_cast<std::uint64_t>(spec.shape.in_features);
  const auto out = static_cast<std::uint64_t>(spec.shape.out_features);
  // Stored column-major shapes (rows, cols, ld) of A (= `second` of run), B (= `first`) and D,
  // and the ops, per product (see the header).
  struct Layout {
    std::uint64_t rows, cols;
  };
  Layout a{}, b{}, d{};
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  switch (spec.product) {
    case LinearLtProduct::Forward:  // A = W^T [in, out] op T, B = x^T [in, batch]
      a = {in, out};
      b = {in, batch};
      d = {out, batch};
      trans_a = CUBLAS_OP_T;
      break;
    case LinearLtProduct::InputGrad:  // A = W^T [in, out], B = dy^T [out, batch]
      a = {in, out};
      b = {out, batch};
      d = {in, batch};
      break;
    case LinearLtProduct::WeightGrad:  // A = x^T [in, batch], B = dy^T [out, batch] op T
      a = {in, batch};
      b = {out, batch};
      d = {in, out};
      trans_b = CUBLAS_OP_T;
      break;
  }

  auto descriptors = std::make_shared<Descriptors>();
  RESIDENT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&descriptors->matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  RESIDENT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descriptors->a, CUDA_R_32F, a.rows, a.cols,
                                                   static_cast<std::int64_t>(a.rows)));
  RESIDENT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descriptors->b, CUDA_R_32F, b.rows, b.cols,
                                                   static_cast<std::int64_t>(b.rows)));
  RESIDENT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&descriptors->d, CUDA_R_32F, d.rows, d.cols,
                                                   static_cast<std::int64_t>(d.rows)));
  cublasLtMatmulDesc_t desc = descriptors->matmul;
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(trans_a));
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(trans_b));
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(to_cublaslt(spec.epilogue)));
  // The bias (forward) or bias-gradient (backward) vector shares one attribute; its type
  // defaults to D's (fp32). The heuristic reads these pointers' alignment, so set them first.
  if (lt_needs_bias(spec.epilogue))
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(spec.bias));
  if (lt_writes_bias_grad(spec.epilogue))
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<void*>(spec.bias_grad));
  if (lt_uses_aux(spec.epilogue)) {
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, spec.aux);
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(spec.aux_ld));
  }

  // Asks the heuristic for up to kHeuristicResults algorithms and keeps the first that runs in
  // one kernel: no split-K, reduction scheme NONE. The first query also restricts the heuristic
  // to reduction scheme NONE (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK); in case a library
  // reads a mask of 0 as "nothing allowed", a second query without the mask filters the same way.
  enum class Query { Found, Empty, Unsupported };
  const auto query = [&](bool restrict_reduction) {
    Preference preference;
    set_preference(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                   static_cast<std::uint64_t>(spec.max_workspace_bytes));
    if (restrict_reduction)
      set_preference(preference.handle, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                     static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
    for (const auto attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      set_preference(preference.handle, attribute, kOperandAlignment);
    std::array<cublasLtMatmulHeuristicResult_t, kHeuristicResults> results{};
    int count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle.get(), desc, descriptors->a, descriptors->b, descriptors->d, descriptors->d,
        preference.handle, kHeuristicResults, results.data(), &count);
    // NOT_SUPPORTED: no kernel for this epilogue/shape/type. An epilogue the library rejects
    // for fp32 may also come back as INVALID_VALUE (the spec itself was validated above).
    if (status == CUBLAS_STATUS_NOT_SUPPORTED ||
        (status == CUBLAS_STATUS_INVALID_VALUE && spec.epilogue != LtEpilogue::Default))
      return Query::Unsupported;
    RESIDENT_CUBLAS_CHECK(status);
    for (int i = 0; i < count; ++i) {
      const cublasLtMatmulHeuristicResult_t& r = results[static_cast<std::size_t>(i)];
      if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > spec.max_workspace_bytes) continue;
      if (algo_config<std::int32_t>(r.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1) continue;
      if (algo_config<std::uint32_t>(r.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME) !=
          CUBLASLT_REDUCTION_SCHEME_NONE)
        continue;
      descriptors->algo = r.algo;
      descriptors->workspace_bytes = r.workspaceSize;
      return Query::Found;
    }
    return Query::Empty;
  };
  Query found = query(true);
  if (found == Query::Empty) found = query(false);
  if (found == Query::Found) return LinearLtPlan(handle, spec, std::move(descriptors));
  return std::nullopt;
}

LinearLtPlan LinearLtPlan::create(const LtHandle& handle, const LinearLtSpec& spec) {
  std::optional<LinearLtPlan> plan = try_create(handle, spec);
  if (!plan)
    throw Error("LinearLtPlan::create", "CUBLAS_STATUS_NOT_SUPPORTED",
                "no cuBLASLt algorithm without split-K for " + spec_name(spec), __FILE__, __LINE__);
  return std::move(*plan);
}

std::size_t LinearLtPlan::workspace_bytes() const noexcept { return descriptors_->workspace_bytes; }

std::string LinearLtPlan::describe() const {
  const cublasLtMatmulAlgo_t& algo = descriptors_->algo;
  return spec_name(spec_) + ": algo " +
         std::to_string(algo_config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(algo_config<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) +
         " splitK " + std::to_string(algo_config<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) +
         " workspace " + std::to_string(descriptors_->workspace_bytes);
}

void LinearLtPlan::run(const StreamContext& context, float* out, const float* first,
                       const float* second, GradMode mode) const {
  const NvtxRange range("nn/linear_lt");
  if (mode == GradMode::Accumulate && spec_.epilogue != LtEpilogue::Default)
    throw Error("LinearLtPlan::run", "invalid argument",
                spec_name(spec_) + ": GradMode::Accumulate needs the Default epilogue (the " +
                    "epilogue's own outputs are always overwritten)",
                __FILE__, __LINE__);
  const std::array<std::pair<const void*, const char*>, 3> operands{
      {{out, "out"}, {first, "first"}, {second, "second"}}};
  for (const auto& [pointer, what] : operands)
    if (pointer == nullptr || !aligned(pointer, kOperandAlignment))
      throw Error("LinearLtPlan::run", "invalid argument",
                  spec_name(spec_) + ": operand " + what + " is " +
                      (pointer == nullptr ? std::string("null")
                                          : "not " + std::to_string(kOperandAlignment) +
                                                "-byte aligned"),
                  __FILE__, __LINE__);
  if (descriptors_->workspace_bytes > context.cublas_workspace_bytes())
    throw Error("LinearLtPlan::run", "workspace too small",
                spec_name(spec_) + " needs " + std::to_string(descriptors_->workspace_bytes) +
                    " bytes, the context lends " + std::to_string(context.cublas_workspace_bytes()),
                __FILE__, __LINE__);
  const float one = 1.0f;
  const float beta = mode == GradMode::Accumulate ? 1.0f : 0.0f;  // beta 0: C is never read
  RESIDENT_CUBLAS_CHECK(cublasLtMatmul(handle_, descriptors_->matmul, &one, second, descriptors_->a,
                                       first, descriptors_->b, &beta, out, descriptors_->d, out,
                                       descriptors_->d, &descriptors_->algo,
                                       context.cublas_workspace(), context.cublas_workspace_bytes(),
                                       context.stream()));
}

}  // namespace resident::nn
