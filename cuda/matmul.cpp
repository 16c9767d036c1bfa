// matmul through cuBLAS: one cublasGemmEx for a single product, one
// cublasGemmStridedBatchedEx for a batch, and no copies for the layouts cuBLAS reads in
// place. Host code only (no kernels of its own), so the C++ compiler builds it.
//
// cuBLAS is column-major: out = a x b goes in as out^T = b^T x a^T, and a transposed view
// goes in with the transpose flag (cuda/gemm_layout.h says how). That is the path of
// matmul's backward: grad_a = grad x b^T and grad_b = a^T x grad take transposed views of b
// and a, which cuBLAS reads where they are.
//
// A batch: the strided batched GEMM steps each operand by one stride per product, so an
// operand's batch dims must merge into one (a contiguous batch does) or be broadcast
// (stride 0: every product reads the same matrix, which cuBLAS allows). Any other operand
// is copied. When b is shared by the whole batch and a's matrices are stacked rows (a
// contiguous [B, m, k] times a [k, n] weight), the batch folds into the rows: one
// [B*m, k] x [k, n] product instead of B small ones.
//
// Precision: float64 in double; float32 in float (CUBLAS_COMPUTE_32F, no TF32 unless
// set_matmul_allow_tf32(true)); float16 and bfloat16 on tensor cores with float
// accumulation (CUBLAS_COMPUTE_32F).
#include <algorithm>
#include <atomic>
#include <optional>

#include <minigrad/core/shape.h>
#include <minigrad/cuda/copy.h>
#include <minigrad/cuda/gemm_layout.h>
#include <minigrad/cuda/matmul.h>
#include <minigrad/cuda/runtime.h>

namespace minigrad {
namespace cuda {
namespace {

std::atomic<bool> tf32_allowed{false};

// How cuBLAS reads one operand: a rows x cols matrix (minigrad's row-major terms) per product.
struct GemmOperand {
  const void* data = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;  // N: row-major; T: a transposed view (column-major)
  int64_t ld = 0;                      // the row stride (N) or the column stride (T)
  int64_t batch_stride = 0;            // elements from one product's matrix to the next; 0: broadcast
  Tensor copy;                         // the contiguous copy `data` points into, when one was needed
};

// The one stride that steps through the batch shape `sizes` with these per-dim strides (0
// when every dim is broadcast or of size 1), if the dims merge into one.
std::optional<int64_t> single_batch_stride(const Shape& sizes, const int64_t* strides) {
  std::optional<int64_t> inner_stride;  // of the innermost dim of size > 1 seen so far
  int64_t span = 0;                     // what the next dim out must step by to merge
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (inner_stride && strides[d] != span) return std::nullopt;
    if (!inner_stride) inner_stride = strides[d];
    span = strides[d] * sizes[d];
  }
  return inner_stride.value_or(0);
}

// Operand t (its own batch dims, then rows x cols) as cuBLAS reads it across `batch`.
GemmOperand gemm_operand(const Tensor& t, const Shape& batch, int64_t rows, int64_t cols) {
  Shape sizes = batch;
  sizes.push_back(rows);
  sizes.push_back(cols);
  const Shape strides = broadcast_strides(t, sizes);  // 0 along the batch dims t is broadcast in
  const size_t b = batch.size();
  const std::optional<MatrixLayout> layout = matrix_layout(rows, cols, strides[b], strides[b + 1]);
  const std::optional<int64_t> step = single_batch_stride(batch, strides.data());
  if (layout && step) return {t.raw_data(), layout->op, layout->ld, *step, Tensor()};
  if (!layout) {  // e.g. a slice with a step along the columns: a row-major copy of t
    const Tensor packed = copy_as(t, t.dtype(), t.device());
    GemmOperand operand = gemm_operand(packed, batch, rows, cols);
    if (!operand.copy.defined()) operand.copy = packed;  // operand.data points into it
    return operand;
  }
  // The batch dims do not merge (a broadcast dim between two others): t expanded to the
  // whole batch, as one contiguous tensor.
  const Tensor expanded = copy_as(as_strided(t, sizes, strides, t.storage_offset()), t.dtype(), t.device());
  return {expanded.raw_data(), CUBLAS_OP_N, cols, rows * cols, expanded};
}

}  // namespace

void set_matmul_allow_tf32(bool allow) { tf32_allowed.store(allow); }
bool matmul_allow_tf32() { return tf32_allowed.load(); }

cublasComputeType_t gemm_compute_type(DType dtype) {
  if (dtype == kFloat64) return CUBLAS_COMPUTE_64F;
  if (dtype == kFloat32 && tf32_allowed.load()) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;
}

void matmul(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t m = a.size(-2);
  const int64_t k = a.size(-1);
  const int64_t n = b.size(-1);
  const Shape batch(out.sizes().begin(), out.sizes().end() - 2);
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  if (k == 0) {  // a sum of no products
    fill(out, 0.0);
    return;
  }
  const GemmOperand lhs = gemm_operand(a, batch, m, k);
  const GemmOperand rhs = gemm_operand(b, batch, k, n);
  int64_t products = shape_numel(batch);
  int64_t rows = m;  // rows of out per product
  if (products > 1 && rhs.batch_stride == 0 && lhs.op == CUBLAS_OP_N && lhs.batch_stride == m * lhs.ld) {
    rows = m * products;
    products = 1;
  }

  const cudaDataType type = gemm_data_type(out.dtype());
  const cublasComputeType_t compute = gemm_compute_type(out.dtype());
  // alpha = 1, beta = 0, in the compute type: double for float64, float otherwise.
  const double one_double = 1.0, zero_double = 0.0;
  const float one_float = 1.0f, zero_float = 0.0f;
  const bool in_double = out.dtype() == kFloat64;
  const void* alpha = in_double ? static_cast<const void*>(&one_double) : &one_float;
  const void* beta = in_double ? static_cast<const void*>(&zero_double) : &zero_float;
  const cublasHandle_t handle = cublas_handle();
  // out^T (n x rows, column-major, leading dimension n) = b^T x a^T: b goes first.
  if (products == 1) {
    MG_CUBLAS_CHECK(cublasGemmEx_64(handle, rhs.op, lhs.op, n, rows, k, alpha, rhs.data, type, rhs.ld, lhs.data, type,
                                    lhs.ld, beta, out.raw_data(), type, n, compute, CUBLAS_GEMM_DEFAULT),
                    "matmul");
  } else {
    MG_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(handle, rhs.op, lhs.op, n, m, k, alpha, rhs.data, type, rhs.ld,
                                                  rhs.batch_stride, lhs.data, type, lhs.ld, lhs.batch_stride, beta,
                                                  out.raw_data(), type, n, m * n, products, compute,
                                                  CUBLAS_GEMM_DEFAULT),
                    "matmul");
  }
}

}  // namespace cuda
}  // namespace minigrad
