#pragma once
// The public ops. Each is a Function<T> (forward + backward) with a CPU reference kernel;
// one file per op family in ops/ holds the public function, the Function subclass and the
// kernel together. Same-dtype rule: binary ops take two tensors of one dtype (a mismatch
// is a clear error, not a silent promotion); a double scalar takes the tensor's dtype.
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>

#include <minigrad/core/tensor.h>

namespace minigrad {

// ---- arithmetic with broadcasting (ops/binary.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor rsub(double a, const Tensor& b);  // a - b
Tensor rdiv(double a, const Tensor& b);  // a / b

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return rsub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return rdiv(a, b); }

// ---- elementwise math (ops/unary.cpp) ----
Tensor neg(const Tensor& x);
inline Tensor operator-(const Tensor& x) { return neg(x); }
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);  // broadcasting
// Limits may be +-infinity for a one-sided clamp. Gradient 1 inside [min, max], 0 outside.
Tensor clamp(const Tensor& x, double min, double max);
inline Tensor clamp_min(const Tensor& x, double min) { return clamp(x, min, std::numeric_limits<double>::infinity()); }
inline Tensor clamp_max(const Tensor& x, double max) { return clamp(x, -std::numeric_limits<double>::infinity(), max); }

// ---- comparisons, returning bool tensors (no gradient), and where (ops/compare.cpp) ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }
// cond ? a : b elementwise, broadcasting all three; differentiable in a and b.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);

// ---- reductions (ops/reduce.cpp) ----
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor max(const Tensor& x);                                // over all elements
// (values, indices): the maximum along dim and where it is (int64, the first maximum), as
// torch::max(x, dim). amax(x, {dim}) when only the values are wanted.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, no gradient
// ---- more reductions ----
Tensor min(const Tensor& x);                                // over all elements
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, no gradient
// The maximum / minimum over any dims (an empty list: every dim; a dim of size 0 is an
// error). The gradient is split evenly among the elements that tie for it.
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// log(sum(exp(x))) over dims, computed as m + log(sum(exp(x - m))) with m the maximum: no
// overflow, and a row of -inf gives -inf. Floating inputs.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// Products: int64 for integer and bool inputs (wrapping around, as sums do); prod of no
// elements is 1.
Tensor prod(const Tensor& x);
Tensor prod(const Tensor& x, int64_t dim, bool keepdim = false);
// Variance and standard deviation: the squared deviations summed, divided by
// max(0, N - correction) (correction 1: Bessel's). Floating inputs.
Tensor var(const Tensor& x);
Tensor var(const Tensor& x, const Shape& dims, double correction = 1.0, bool keepdim = false);
Tensor std(const Tensor& x);
Tensor std(const Tensor& x, const Shape& dims, double correction = 1.0, bool keepdim = false);
// The p-norm over dims (an empty list: every dim): (sum |x|^p)^(1/p); p = inf and -inf are
// the largest and smallest |x|, p = 0 the count of non-zeros. Floating inputs. At a zero
// norm the gradient is 0, as in PyTorch.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);
// The running sum along dim: int64 for integer and bool inputs.
Tensor cumsum(const Tensor& x, int64_t dim);
// Whether any / all elements are non-zero (NaN counts as non-zero): bool, for any dtype.
Tensor any(const Tensor& x);
Tensor any(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor all(const Tensor& x);
Tensor all(const Tensor& x, int64_t dim, bool keepdim = false);
// Sums a broadcast gradient back down to `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- matmul (ops/matmul.cpp): 1-D, 2-D and batched with broadcast batch dims ----
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- linear (ops/linear.cpp) ----
// x W^T + b with PyTorch's layout: weight [out_features, in_features], x [..., in_features]
// (or [in_features]), bias [out_features] or none; the result is [..., out_features].
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
enum class GeluApproximation { None, Tanh };  // None: exact, x * Phi(x) with erf
// gelu(linear(x, weight, bias)): on the GPU in float16/bfloat16 one cuBLASLt GEMM whose
// epilogue adds the bias and applies GELU (the tanh form); the exact form, float32 and
// float64 run the GELU kernel after the GEMM (cuBLASLt's GELU is half-precise).
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                   GeluApproximation approximate = GeluApproximation::None);
// The transformer's feed-forward block, linear(gelu(linear(x, w1, b1)), w2, b2): w1 [hidden,
// in], w2 [out, hidden]. Its backward applies gelu' in the epilogue of the GEMM that computes
// the hidden layer's gradient, and sums b1's gradient in the epilogue of dW1's.
Tensor mlp(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
           const std::optional<Tensor>& b2, GeluApproximation approximate = GeluApproximation::None);
namespace composite {
// matmul(x, weight^T) + bias on the tape.
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);
// gelu(matmul(x, weight^T) + bias), and the block of two, op by op on the tape.
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                   GeluApproximation approximate = GeluApproximation::None);
Tensor mlp(const Tensor& x, const Tensor& w1, const std::optional<Tensor>& b1, const Tensor& w2,
           const std::optional<Tensor>& b2, GeluApproximation approximate = GeluApproximation::None);
}  // namespace composite

// ---- losses (ops/loss.cpp) ----
// How a loss's per-element (or per-row) values are reduced: PyTorch's reduction argument.
enum class Reduction { None, Mean, Sum };
// logits [N, C], targets [N] int64 class indices. A row whose target is ignore_index adds
// nothing (and is not counted by Mean); label_smoothing mixes the target distribution with
// the uniform one, as PyTorch's does. Its backward is written by hand (once differentiable).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::Mean);
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
namespace composite {
// log_softmax + gather + mean on the tape.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::Mean);
}  // namespace composite

// ---- softmax family (ops/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- dropout (ops/dropout.cpp) ----
// PyTorch's names and meanings. Element i (its index in x's row-major order) is dropped with
// probability p rounded to a multiple of 2^-16 (kernels/dropout.h), drawn from one stream of
// `generator` (the default one when null) reserved per call; the kept ones are scaled by
// 1 / (1 - p). p in [0, 1). training == false or p == 0 draws nothing: dropout returns x.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);
// dropout(softmax(scale * x + mask, dim), p) in one pass forward and one backward. mask
// broadcasts to x: bool (false masks out, as attn_mask of PyTorch's SDPA) or additive, of
// x's dtype, never requiring grad. is_causal masks column j > row i of the last two dims
// (dim must be the last). A row with every element masked out gives zeros, not NaN.
Tensor softmax_dropout(const Tensor& x, int64_t dim, double p, bool training = true,
                       const std::optional<Tensor>& mask = std::nullopt, bool is_causal = false,
                       std::optional<double> scale = std::nullopt, Generator* generator = nullptr);
namespace composite {
// The twins, from existing ops and differentiated by the tape; same arguments, same draws.
// (The twin of softmax_dropout gives NaN on a fully masked row: softmax of -inf everywhere.)
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, Generator* generator = nullptr);
Tensor softmax_dropout(const Tensor& x, int64_t dim, double p, bool training = true,
                       const std::optional<Tensor>& mask = std::nullopt, bool is_causal = false,
                       std::optional<double> scale = std::nullopt, Generator* generator = nullptr);
// The keep-mask of the stream (seed, offset): 1 where kept, 0 where dropped, in options' dtype.
Tensor dropout_mask(const Shape& sizes, double p, uint64_t seed, uint64_t offset, TensorOptions options);
// 1 / (1 - p_q), the factor of a kept element, with p_q the rounded p.
double dropout_keep_scale(double p);
}  // namespace composite
// ---- end of dropout ----

// ---- attention (ops/attention.cpp) ----
// softmax(scale * q k^T + attn_mask) v with dropout on the probabilities, PyTorch's
// scaled_dot_product_attention: q [B, Hq, Sq, D], k [B, Hk, Sk, D], v [B, Hk, Sk, Dv], any
// strides with a contiguous last dim; the result [B, Hq, Sq, Dv]. attn_mask broadcasts to
// [B, Hq, Sq, Sk]: bool (false masks out) or additive, of q's dtype, never requiring grad.
// is_causal masks key j > query i (top-left aligned, as PyTorch), and may be combined with
// attn_mask. scale defaults to 1 / sqrt(D). enable_gqa lets Hk divide Hq: query head h reads
// key/value head h / (Hq / Hk). Dropout (dropout_p > 0) keeps or drops score (b, h, i, j)
// exactly as softmax_dropout keys the [B, Hq, Sq, Sk] scores, from one reserved stream of
// `generator`. A query whose every key is masked out gets zeros. On the CPU the scores are
// never stored: the forward keeps the output and one log-sum-exp a query row. On the GPU it
// runs as its twin for now (the scores stored), until its CUDA kernel is written.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false, Generator* generator = nullptr);
namespace composite {
// The twin: softmax_dropout(q k^T, -1, dropout_p, true, attn_mask, is_causal, scale) v with
// k and v repeated across the query heads that share them; the [B, Hq, Sq, Sk] scores stored.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = std::nullopt, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = std::nullopt,
                                    bool enable_gqa = false, Generator* generator = nullptr);
}  // namespace composite
// ---- end of attention ----

// ---- activations: the tutorial's custom Functions (ops/relu.cpp, ops/gelu.cpp, ops/softplus.cpp) ----
Tensor relu(const Tensor& x);
// GeluApproximation: declared with linear_gelu above.
Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
// grad * gelu'(x) in one kernel: gelu's backward, itself differentiable.
Tensor gelu_backward(const Tensor& grad, const Tensor& x, GeluApproximation approximate = GeluApproximation::None);
// log(1 + exp(beta x)) / beta, and x where beta x > threshold (PyTorch's softplus).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

// ---- normalizations (ops/normalization.cpp) ----
// Over the trailing dims normalized_shape of x (each row of prod(normalized_shape) elements
// on its own), then times weight plus bias (either optional, of shape normalized_shape), as
// torch::layer_norm and torch::rms_norm:
//   layer_norm: (x - mean) / sqrt(var + eps), var biased
//   rms_norm:   x / sqrt(mean(x^2) + eps), eps by default the machine epsilon of float
//               (of double for float64 inputs)
// layer_norm_gelu is gelu(layer_norm(...)) in one pass. Each backward is one fused kernel:
// the three are once differentiable.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
Tensor layer_norm_gelu(const Tensor& x, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight = std::nullopt,
                       const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5,
                       GeluApproximation approximate = GeluApproximation::None);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
// The same three built from the public ops (mean, var, rsqrt, mul, add, gelu) and
// differentiated by the tape: the reference the fused ones are tested against.
namespace composite {
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                  const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5);
Tensor layer_norm_gelu(const Tensor& x, const Shape& normalized_shape,
                       const std::optional<Tensor>& weight = std::nullopt,
                       const std::optional<Tensor>& bias = std::nullopt, double eps = 1e-5,
                       GeluApproximation approximate = GeluApproximation::None);
Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight = std::nullopt,
                std::optional<double> eps = std::nullopt);
}  // namespace composite

// ---- more elementwise ----
// Math (ops/unary.cpp). square is pow(x, 2) and reciprocal is 1 / x (rdiv), as in PyTorch;
// sign and floor are piecewise constant: their gradient is 0.
Tensor square(const Tensor& x);
Tensor rsqrt(const Tensor& x);       // 1 / sqrt(x)
Tensor reciprocal(const Tensor& x);  // 1 / x
Tensor log1p(const Tensor& x);       // log(1 + x), exact near 0
Tensor expm1(const Tensor& x);       // exp(x) - 1, exact near 0
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor sign(const Tensor& x);        // -1, 0 or 1; 0 for NaN, as in PyTorch
Tensor floor(const Tensor& x);
Tensor pow(double base, const Tensor& exponent);  // base^exponent elementwise
// clamp with either bound left out (clamp(x, std::nullopt, 3.0)); at least one is given.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);

// maximum, minimum (broadcasting; NaN in either gives NaN; at a tie each input gets half the
// gradient) and clamp with tensor bounds (broadcasting all three; the gradient goes to x
// where min <= x <= max, to min where x < min, to max where x > max) (ops/minmax.cpp).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor clamp_min(const Tensor& x, const Tensor& min);
Tensor clamp_max(const Tensor& x, const Tensor& max);

// start + weight * (end - start), broadcasting (ops/lerp.cpp).
Tensor lerp(const Tensor& start, const Tensor& end, double weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);

// Activations (ops/activations.cpp): functions in LibTorch, not members.
Tensor silu(const Tensor& x);                                   // x * sigmoid(x)
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);  // x, or slope * x where x <= 0
Tensor elu(const Tensor& x, double alpha = 1.0);                // x, or alpha (exp(x) - 1) where x <= 0

// masked_fill out of place: value where mask, x elsewhere, x and mask broadcast to one
// shape; the value a double or a 0-d tensor (which gets the gradient of the filled
// elements). where with a scalar branch: the scalar takes the other branch's dtype, and
// with two scalars the result is float32 (ops/compare.cpp).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
Tensor where(const Tensor& condition, double a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, double b);
Tensor where(const Tensor& condition, double a, double b);

// Bool ops, no gradient (ops/logical.cpp). The logical ops take any dtypes (nonzero is
// true, NaN included) and return bool; the bitwise ops take bool or int64, both operands of
// one dtype, and return it; & | ^ ~ are the bitwise ops, as in LibTorch.
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_not(const Tensor& x);
inline Tensor operator&(const Tensor& a, const Tensor& b) { return bitwise_and(a, b); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return bitwise_or(a, b); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); }
inline Tensor operator~(const Tensor& x) { return bitwise_not(x); }
// Tests of each value, any dtype, a bool result (an int64 or bool value is never NaN or
// infinite).
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
// |a - b| <= atol + rtol * |b| elementwise (broadcasting), equal values always close, NaN
// close to NaN only with equal_nan. allclose: every element close. equal: the same shape
// and the same values (NaN is not equal to itself). Both operands of one dtype and device.
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);

// ---- views and joins (ops/views.cpp, ops/joins.cpp) ----
// The free forms of the members of the same names (core/tensor.h), and cat and stack.
// cat: the tensors joined along an existing dim; all of one dtype and device, and of one
// shape but for dim. A 1-D tensor of size 0 is skipped whatever the others' shapes, as
// PyTorch still does for legacy code that starts a loop of cats from an empty tensor.
Tensor cat(const tensor_list& tensors, int64_t dim = 0);
// stack: tensors of one shape joined along a new dim (dim may be tensors[0].dim()).
Tensor stack(const tensor_list& tensors, int64_t dim = 0);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
tensor_list chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
template <typename Int, IfInteger<Int> = 0>
tensor_list split(const Tensor& x, Int split_size, int64_t dim = 0) {
  return x.split(split_size, dim);
}
inline tensor_list split(const Tensor& x, const Shape& split_sizes, int64_t dim = 0) {
  return x.split_with_sizes(split_sizes, dim);
}
inline tensor_list split_with_sizes(const Tensor& x, const Shape& split_sizes, int64_t dim = 0) {
  return x.split_with_sizes(split_sizes, dim);
}
tensor_list unbind(const Tensor& x, int64_t dim = 0);
Tensor flip(const Tensor& x, const Shape& dims);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor movedim(const Tensor& x, int64_t source, int64_t destination);
Tensor movedim(const Tensor& x, const Shape& source, const Shape& destination);
Tensor swapaxes(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor swapdims(const Tensor& x, int64_t dim0, int64_t dim1);

// ---- indexing ----
// ops/indexing.cpp, PyTorch's semantics. Index tensors are int64; an index outside
// [0, size) is an error naming the op, the value and the size (on the GPU, checked on the
// host after a min/max pass over the index: one synchronization). The scatters are out of
// place and deterministic on both devices: where positions repeat, scatter keeps the last
// in row-major order and scatter_add adds in that order (kernels/indexing.h), with the
// same bits on the CPU and the GPU.
//
// x with `dim` indexed by a 1-D (or 0-d) index: out.size(dim) == index.numel().
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// x + alpha * source added into the slices index names along dim (source.size(dim) == index.numel()).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1; index has x's rank, out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// x with out[i][index[i][j][k]][k] = src[i][j][k] (dim 1), or the value, or += src (scatter_add).
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// The rows of weight ([num, dim]) that indices (int64, any shape) name: indices.shape + [dim].
// padding_idx's row (negative counts from the end) gets no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
// indices.shape + [num_classes], int64; num_classes -1: the largest index + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
// The k largest (or smallest) elements along dim and their positions. Ties and NaN follow
// kernels/indexing.h's order (NaN above every number, ties by position), so the result is
// the same on both devices. sorted=false may return them in any order; they come sorted.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
// Categories drawn from each row of probs (1-D or 2-D, weights that need not sum to 1), int64
// [num_samples] or [rows, num_samples], from `generator` (the default one when null). The
// same generator state draws the same categories on either device (without replacement,
// unless two of a row's keys lie within an ulp: kernels/indexing.h's race_key).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   Generator* generator = nullptr);

// ---- copies (ops/copy.cpp) ----
Tensor to_dtype(const Tensor& x, DType dtype);
Tensor to_device(const Tensor& x, Device device);

}  // namespace minigrad
