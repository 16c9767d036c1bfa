// GEMMs with an epilogue through cuBLASLt. Host code only (the kernels are cuBLASLt's).
//
// One call: describe the product (types, transposes, the epilogue and its pointers),
// describe the three matrices as cuBLASLt's column-major layouts (out^T = b^T a^T, as
// cuda/gemm_layout.h explains), ask the heuristics for an algorithm, run it with a
// workspace from the caching allocator. The heuristics take tens of microseconds, as long as
// a small GEMM, so their answer is cached per case: the shape, the transposes, the leading
// dimensions, the dtype, the epilogue and the pointers' alignments (an algorithm chosen for
// 16-byte-aligned operands may not run on 2-byte-aligned ones). A case cuBLASLt has no
// algorithm for is cached too, and answered false at once the next time.
#include <minigrad/cuda/blaslt.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

#include <minigrad/cuda/gemm_layout.h>
#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace cuda {
namespace {

// The workspace cuBLASLt may use: NVIDIA advises 32 MiB for Hopper's GEMM kernels. Only
// what the chosen algorithm asks for is taken from the caching allocator, per call.
constexpr uint64_t kMaxWorkspaceBytes = 32ull << 20;

std::atomic<int64_t> fallback_count{0};

template <typename Handle>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, cublasStatus_t (*)(Handle)>;

cublasLtEpilogue_t lt_epilogue(GemmEpilogue epilogue, bool with_aux) {
  switch (epilogue) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::Gelu: return with_aux ? CUBLASLT_EPILOGUE_GELU_AUX : CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::GeluBias: return with_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::DGelu: return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::DGeluBiasGrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    // a is cuBLASLt's B (out^T = b^T a^T), so a's row sums are B's bias gradient.
    case GemmEpilogue::BiasGradOfA: return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The largest power of two, up to 256, that divides the address.
uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// cuBLASLt's view of a row-major rows x cols operand read with `layout`: a column-major
// matrix of cols x rows (N) or rows x cols (T, a transposed view).
Owned<cublasLtMatrixLayout_t> lt_layout(cudaDataType type, int64_t rows, int64_t cols, const MatrixLayout& layout) {
  cublasLtMatrixLayout_t raw = nullptr;
  const bool row_major = layout.op == CUBLAS_OP_N;
  MG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(row_major ? cols : rows),
                                             static_cast<uint64_t>(row_major ? rows : cols), layout.ld),
                  "gemm_with_epilogue");
  return {raw, cublasLtMatrixLayoutDestroy};
}

template <typename T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  MG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)), "gemm_with_epilogue");
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                    const T& value) {
  MG_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
                  "gemm_with_epilogue");
}

// What the heuristics' answer depends on. That includes the bias and aux pointers: the
// heuristics read their alignment from the pointer values set on the descriptor, so an
// algorithm chosen for a 256-byte-aligned bias is not reused for one aligned to 16 only.
using PlanKey = std::tuple<int /*device*/, int /*dtype*/, int /*compute*/, int /*epilogue*/, int64_t /*m*/,
                           int64_t /*n*/, int64_t /*k*/, int /*op of a*/, int /*op of b*/, int64_t /*ld of a*/,
                           int64_t /*ld of b*/, uint32_t /*align of a*/, uint32_t /*align of b*/,
                           uint32_t /*align of out*/, uint32_t /*align of bias, 0 without*/,
                           uint32_t /*align of aux, 0 without*/>;

struct Plan {
  bool supported = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
};

std::mutex plans_mutex;
std::map<PlanKey, Plan> plans;

bool fall_back() {
  fallback_count.fetch_add(1);
  return false;
}

}  // namespace

int64_t gemm_with_epilogue_fallbacks() { return fallback_count.load(); }

bool gemm_with_epilogue(const Tensor& a, const Tensor& b, const Tensor& out, GemmEpilogue epilogue,
                        const Tensor& bias, const Tensor& aux) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0 || k == 0) return fall_back();
  const std::optional<MatrixLayout> a_layout = matrix_layout(m, k, a.stride(0), a.stride(1));
  const std::optional<MatrixLayout> b_layout = matrix_layout(k, n, b.stride(0), b.stride(1));
  if (!a_layout || !b_layout) return fall_back();
  // cuBLASLt reads the bias and the pre-activation with vector loads, and its GELU
  // pre-activation's leading dimension must be a multiple of 8.
  if (bias.defined() && alignment_of(bias.raw_data()) < 16) return fall_back();
  if (aux.defined() && (alignment_of(aux.raw_data()) < 16 || n % 8 != 0)) return fall_back();

  DeviceGuard guard(out.device().index);
  const cudaDataType type = gemm_data_type(out.dtype());
  const cublasComputeType_t compute = gemm_compute_type(out.dtype());
  const bool in_double = out.dtype() == kFloat64;

  cublasLtMatmulDesc_t raw_desc = nullptr;
  MG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, compute, in_double ? CUDA_R_64F : CUDA_R_32F),
                  "gemm_with_epilogue");
  const Owned<cublasLtMatmulDesc_t> desc(raw_desc, cublasLtMatmulDescDestroy);
  // cuBLASLt's A is b and its B is a.
  set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, b_layout->op);
  set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, a_layout->op);
  set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(epilogue, aux.defined()));
  if (bias.defined()) set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.raw_data());
  if (aux.defined()) {
    set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.raw_data());
    set_attribute(desc.get(), CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, n);
  }
  const Owned<cublasLtMatrixLayout_t> lt_a = lt_layout(type, k, n, *b_layout);
  const Owned<cublasLtMatrixLayout_t> lt_b = lt_layout(type, m, k, *a_layout);
  const Owned<cublasLtMatrixLayout_t> lt_out = lt_layout(type, m, n, MatrixLayout{CUBLAS_OP_N, n});

  const cublasLtHandle_t handle = cublaslt_handle();
  const PlanKey key{out.device().index, static_cast<int>(out.dtype()), static_cast<int>(compute),
                    static_cast<int>(epilogue), m, n, k, static_cast<int>(a_layout->op),
                    static_cast<int>(b_layout->op), a_layout->ld, b_layout->ld, alignment_of(a.raw_data()),
                    alignment_of(b.raw_data()), alignment_of(out.raw_data()),
                    bias.defined() ? alignment_of(bias.raw_data()) : 0u,
                    aux.defined() ? alignment_of(aux.raw_data()) : 0u};
  Plan plan;
  {
    std::lock_guard<std::mutex> lock(plans_mutex);
    auto found = plans.find(key);
    if (found != plans.end()) {
      plan = found->second;
    } else {
      cublasLtMatmulPreference_t raw_preference = nullptr;
      MG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference), "gemm_with_epilogue");
      const Owned<cublasLtMatmulPreference_t> preference(raw_preference, cublasLtMatmulPreferenceDestroy);
      set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes);
      set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, std::get<12>(key));
      set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, std::get<11>(key));
      set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, std::get<13>(key));
      set_preference(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, std::get<13>(key));
      cublasLtMatmulHeuristicResult_t result{};
      int found_count = 0;
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          handle, desc.get(), lt_a.get(), lt_b.get(), lt_out.get(), lt_out.get(), preference.get(), 1, &result,
          &found_count);
      if (status == CUBLAS_STATUS_SUCCESS && found_count > 0) {
        plan.supported = true;
        plan.algo = result.algo;
        plan.workspace_bytes = result.workspaceSize;
      }
      plans.emplace(key, plan);
    }
  }
  if (!plan.supported) return fall_back();

  // alpha = 1, beta = 0 in the scale type: double for float64, float otherwise. beta = 0:
  // out is written, never read (C is out, unused).
  const double one_double = 1.0, zero_double = 0.0;
  const float one_float = 1.0f, zero_float = 0.0f;
  const void* alpha = in_double ? static_cast<const void*>(&one_double) : &one_float;
  const void* beta = in_double ? static_cast<const void*>(&zero_double) : &zero_float;
  std::optional<Workspace> workspace;
  if (plan.workspace_bytes > 0) workspace.emplace(plan.workspace_bytes, out.device().index);
  MG_CUBLAS_CHECK(cublasLtMatmul(handle, desc.get(), alpha, b.raw_data(), lt_a.get(), a.raw_data(), lt_b.get(), beta,
                                 out.raw_data(), lt_out.get(), out.raw_data(), lt_out.get(), &plan.algo,
                                 workspace ? workspace->data() : nullptr, plan.workspace_bytes, current_stream()),
                  "gemm_with_epilogue");
  return true;
}

}  // namespace cuda
}  // namespace minigrad
