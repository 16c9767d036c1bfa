#pragma once
// What cuda/matmul.cpp (cuBLAS) and cuda/blaslt.cpp (cuBLASLt) share: how a row-major
// operand is described to a column-major BLAS, and the data and compute types of a dtype.
// Host code only.
//
// cuBLAS is column-major, minigrad row-major. A row-major matrix read as column-major is
// its transpose, so out = a x b is computed as out^T = b^T x a^T: the BLAS gets b first and
// a second, each with the "no transpose" flag, and nothing moves. An operand that is a
// transposed view (strides [1, ld], as .t() gives) reads as column-major directly, and goes
// in with the transpose flag instead.
#include <algorithm>
#include <cstdint>
#include <optional>

#include <cublas_v2.h>

#include <minigrad/core/dtype.h>

namespace minigrad {
namespace cuda {

// How the BLAS reads a rows x cols matrix in place: N, a row-major matrix with this row
// stride; T, a column-major one (a transposed view) with this column stride.
struct MatrixLayout {
  cublasOperation_t op;
  int64_t ld;
};

// The layout of a rows x cols matrix with these strides, if the BLAS can read it in place:
// the elements of a row adjacent and rows at least a row apart (row-major), or the same for
// columns (column-major). A single row or column fits either way, with any leading
// dimension that covers it.
inline std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                                 int64_t col_stride) {
  if (col_stride == 1 || cols == 1) {
    const int64_t ld = rows == 1 ? cols : row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) return MatrixLayout{CUBLAS_OP_N, ld};
  }
  if (row_stride == 1 || rows == 1) {
    const int64_t ld = cols == 1 ? rows : col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) return MatrixLayout{CUBLAS_OP_T, ld};
  }
  return std::nullopt;
}

inline cudaDataType gemm_data_type(DType dtype) {
  switch (dtype) {
    case DType::Float64: return CUDA_R_64F;
    case DType::Float16: return CUDA_R_16F;
    case DType::BFloat16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// double for float64; float otherwise (half types accumulate in float on the tensor cores),
// with TF32 for float32 only where set_matmul_allow_tf32(true) asked for it.
cublasComputeType_t gemm_compute_type(DType dtype);

}  // namespace cuda
}  // namespace minigrad
