// matmul with NumPy/PyTorch semantics: a 1-D 'self' is a row vector [1, k] and a 1-D
// 'other' a column vector [k, 1] (the added dim is removed from the result), 2-D is a
// matrix product, and more dims are batches of matrices whose batch dims broadcast.
//
// Backward is matmul again, on transposed views:
//   grad_self  = grad_out x other^T,  grad_other = self^T x grad_out,
// each summed back down to its operand's shape over the broadcast batch dims. Being
// matmul, sum_to and views, it is twice differentiable.
// When 'other' has no batch dims (a weight [k, n]) and 'self' has some (activations
// [B, T, k]), both directions fold the batch into the rows: one GEMM of [B*T, k] x [k, n]
// forward, and grad_other = self2^T x grad2 with self2 = [B*T, k] and grad2 = [B*T, n],
// one GEMM whose inner size is B*T, instead of B GEMMs into a [B, k, n] temporary that
// sum_to then adds up.
// On the GPU, cuBLAS computes it (cuda/matmul.cpp), reading those transposed views in place.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include <minigrad/autograd/function.h>
#include <minigrad/core/cpu_arch.h>
#include <minigrad/core/parallel.h>
#include <minigrad/core/shape.h>
#include <minigrad/core/strided_loop.h>
#include <minigrad/ops/cpu_loops.h>
#include <minigrad/ops/ops.h>
#include <minigrad/cuda/matmul.h>

namespace minigrad {
namespace {

// The shapes of one matmul call, with 1-D operands read as matrices.
struct MatmulShapes {
  int64_t m = 0, k = 0, n = 0;
  Shape batch;         // the broadcast batch dims
  Shape self_matrix;   // 'self' as [..., m, k] (its own batch dims)
  Shape other_matrix;  // 'other' as [..., k, n]
  Shape result;        // batch + [m, n], less the dims 1-D operands added

  Shape batch_plus(int64_t rows, int64_t cols) const {
    Shape s = batch;
    s.push_back(rows);
    s.push_back(cols);
    return s;
  }
};

MatmulShapes matmul_shapes(const Tensor& a, const Tensor& b) {
  MG_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "matmul: both arguments need at least one dimension, got 'self' of shape {} and 'other' of shape {}",
           shape_str(a.sizes()), shape_str(b.sizes()));
  MatmulShapes s;
  s.self_matrix = a.sizes();
  if (a.dim() == 1) s.self_matrix.insert(s.self_matrix.begin(), 1);
  s.other_matrix = b.sizes();
  if (b.dim() == 1) s.other_matrix.push_back(1);
  const size_t a_ndim = s.self_matrix.size();
  const size_t b_ndim = s.other_matrix.size();
  s.m = s.self_matrix[a_ndim - 2];
  s.k = s.self_matrix[a_ndim - 1];
  const int64_t other_k = s.other_matrix[b_ndim - 2];
  s.n = s.other_matrix[b_ndim - 1];
  MG_CHECK(s.k == other_k, "matmul: size mismatch, 'self' is {} and 'other' is {} ({} != {})", shape_str(a.sizes()),
           shape_str(b.sizes()), s.k, other_k);
  s.batch = broadcast_shapes(Shape(s.self_matrix.begin(), s.self_matrix.end() - 2),
                             Shape(s.other_matrix.begin(), s.other_matrix.end() - 2), "matmul");
  s.result = s.batch;
  if (a.dim() > 1) s.result.push_back(s.m);
  if (b.dim() > 1) s.result.push_back(s.n);
  return s;
}

// 64 x 64 blocks: a block of 'other' is 16 KiB in float32 (32 KiB in float64) and stays in
// L1/L2 while the rows of the 'self' block stream past it.
constexpr int64_t kBlock = 64;

// Rows [row_begin, row_end) of c[m x n] += a[m x k] * b[k x n], all row-major and
// contiguous. The loops run i-k-j so the innermost one walks a row of b and a row of c with
// stride 1 and vectorizes (compiled for three vector widths, core/cpu_arch.h); each c[i][j]
// still adds its k products in order.
template <typename T>
MG_CPU_CLONES static void gemm_rows(const T* __restrict a, const T* __restrict b, T* __restrict c, int64_t row_begin,
                                    int64_t row_end, int64_t k, int64_t n) {
  for (int64_t i0 = row_begin; i0 < row_end; i0 += kBlock) {
    const int64_t i1 = std::min(i0 + kBlock, row_end);
    for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
      const int64_t p1 = std::min(p0 + kBlock, k);
      for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
        const int64_t j1 = std::min(j0 + kBlock, n);
        for (int64_t i = i0; i < i1; ++i) {
          T* c_row = c + i * n;
          for (int64_t p = p0; p < p1; ++p) {
            const T a_ip = a[i * k + p];
            const T* b_row = b + p * n;
            for (int64_t j = j0; j < j1; ++j) c_row[j] += a_ip * b_row[j];
          }
        }
      }
    }
  }
}

// c += a * b, the threads taking whole blocks of kBlock rows (each c[i][j] is computed by one
// thread, the same way whatever the thread count).
template <typename T>
void gemm_blocked(const T* a, const T* b, T* c, int64_t m, int64_t k, int64_t n) {
  const int64_t row_blocks = (m + kBlock - 1) / kBlock;
  // One row block is kBlock * k * n multiply-adds, 262144 at k = n = 64: tens of microseconds.
  parallel_for(0, row_blocks, 1, [&](int64_t begin, int64_t end) {
    gemm_rows(a, b, c, begin * kBlock, std::min(end * kBlock, m), k, n);
  });
}

Tensor matmul_kernel(const Tensor& a, const Tensor& b, const MatmulShapes& s) {
  if (a.device().is_cuda()) {
    Tensor out = empty(s.result, a.options());
    cuda::matmul(a.reshape(s.self_matrix), b.reshape(s.other_matrix), out.view(s.batch_plus(s.m, s.n)));
    return out;
  }
  check_cpu("matmul", "self", a);
  if (is_half(a.dtype()))
    return copy_as(matmul_kernel(copy_as(a, kFloat32, a.device()), copy_as(b, kFloat32, b.device()), s), a.dtype(),
                   a.device());
  // The kernel reads row-major matrices: copy only operands that are not.
  const Tensor a_rows = a.contiguous().view(s.self_matrix);
  const Tensor b_rows = b.contiguous().view(s.other_matrix);
  Tensor out = zeros(s.result, a.options());
  // The operands' strides over the batch dims, 0 where one is broadcast; the output's are
  // those of the contiguous batch + [m, n] layout its memory has.
  const Shape a_strides = broadcast_strides(a_rows, s.batch_plus(s.m, s.k));
  const Shape b_strides = broadcast_strides(b_rows, s.batch_plus(s.k, s.n));
  const Shape out_strides = contiguous_strides(s.batch_plus(s.m, s.n));
  dispatch_all(a.dtype(), [&](auto tag) {
    using scalar_t = decltype(tag);
    // float16/bfloat16 were upcast above and other dtypes refused.
    if constexpr (std::is_floating_point_v<scalar_t>) {
      const scalar_t* pa = a_rows.data_ptr<scalar_t>();
      const scalar_t* pb = b_rows.data_ptr<scalar_t>();
      scalar_t* pc = out.data_ptr<scalar_t>();
      if (s.other_matrix.size() == 2) {
        // One matrix 'other' for the whole batch: the rows of a_rows' matrices follow each
        // other in memory, as do out's, so the batch is one product with more rows.
        gemm_blocked(pa, pb, pc, shape_numel(s.batch) * s.m, s.k, s.n);
        return;
      }
      for_each_offset<3>(s.batch, {a_strides.data(), b_strides.data(), out_strides.data()},
                         [&](const std::array<int64_t, 3>& o) {
                           gemm_blocked(pa + o[0], pb + o[1], pc + o[2], s.m, s.k, s.n);
                         });
    }
  });
  return out;
}

struct Matmul : Function<Matmul> {
  static Tensor forward(Context& ctx, const Tensor& a, const Tensor& b) {
    const MatmulShapes s = matmul_shapes(a, b);
    ctx.save_for_backward({a, b});
    return matmul_kernel(a, b, s);
  }
  static tensor_list backward(Context& ctx, tensor_list grads) {
    const tensor_list saved = ctx.saved_tensors();
    const Tensor& a = saved[0];
    const Tensor& b = saved[1];
    const MatmulShapes s = matmul_shapes(a, b);
    const Tensor grad = grads[0].reshape(s.batch_plus(s.m, s.n));
    Tensor grad_a, grad_b;
    if (ctx.needs_input_grad(0)) {
      const Tensor b_transposed = b.reshape(s.other_matrix).transpose(-1, -2);
      grad_a = sum_to(matmul(grad, b_transposed), s.self_matrix).reshape(a.sizes());
    }
    if (ctx.needs_input_grad(1)) {
      const Shape other_batch(s.other_matrix.begin(), s.other_matrix.end() - 2);
      if (shape_numel(other_batch) == 1 && s.batch.size() > 0) {
        // 'other' is one matrix for every product: fold the batch into the inner size.
        const int64_t rows = shape_numel(s.batch) * s.m;
        grad_b = matmul(a.reshape({rows, s.k}).t(), grad.reshape({rows, s.n})).reshape(b.sizes());
      } else {
        const Tensor a_transposed = a.reshape(s.self_matrix).transpose(-1, -2);
        grad_b = sum_to(matmul(a_transposed, grad), s.other_matrix).reshape(b.sizes());
      }
    }
    return {grad_a, grad_b};
  }
};

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_defined("matmul", "self", a);
  check_defined("matmul", "other", b);
  check_floating("matmul", "self", a);
  check_same_dtype("matmul", "self", a, "other", b);
  check_same_device("matmul", "self", a, "other", b);
  return Matmul::apply(a, b);
}

Tensor Tensor::matmul(const Tensor& other) const { return minigrad::matmul(*this, other); }

}  // namespace minigrad
