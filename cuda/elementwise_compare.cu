// The CUDA kernels of the comparisons (tensor with tensor, tensor with scalar) and of
// where, for every dtype: the elementwise engine (cuda/elementwise.cuh) instantiated for
// their functors. Comparisons write bool; where moves values of its branches' dtype.
#include "cuda/elementwise.cuh"

// One comparison functor over the six dtypes, against a tensor and against a scalar.
#define MG_COMPARISON_FOR(T, Compare)                  \
  MG_ELEMENTWISE_BINARY(bool, T, T, elementwise::Compare) \
  MG_ELEMENTWISE_UNARY(bool, T, elementwise::CompareWithScalar<elementwise::Compare>)
#define MG_COMPARISON(Compare)                \
  MG_COMPARISON_FOR(float, Compare)           \
  MG_COMPARISON_FOR(double, Compare)          \
  MG_COMPARISON_FOR(Half, Compare)            \
  MG_COMPARISON_FOR(BFloat16, Compare)        \
  MG_COMPARISON_FOR(int64_t, Compare)         \
  MG_COMPARISON_FOR(bool, Compare)

namespace minigrad {
namespace cuda {

MG_COMPARISON(Equal)
MG_COMPARISON(NotEqual)
MG_COMPARISON(Less)
MG_COMPARISON(LessEqual)
MG_COMPARISON(Greater)
MG_COMPARISON(GreaterEqual)

MG_ELEMENTWISE_TERNARY(float, bool, float, float, elementwise::Select)
MG_ELEMENTWISE_TERNARY(double, bool, double, double, elementwise::Select)
MG_ELEMENTWISE_TERNARY(Half, bool, Half, Half, elementwise::Select)
MG_ELEMENTWISE_TERNARY(BFloat16, bool, BFloat16, BFloat16, elementwise::Select)
MG_ELEMENTWISE_TERNARY(int64_t, bool, int64_t, int64_t, elementwise::Select)
MG_ELEMENTWISE_TERNARY(bool, bool, bool, bool, elementwise::Select)

}  // namespace cuda
}  // namespace minigrad
