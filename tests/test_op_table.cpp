// Every row of the op table (tests/op_table.h) on the CPU, one test case per property:
// gradcheck in float64, gradgradcheck of the twice-differentiable rows, the error of a
// second backward through a once-differentiable one, non-contiguous inputs, empty inputs,
// and every dtype a row takes against float64. The last cases check the checks: each must
// fail a row that is wrong in the way it looks for.
#include "tests/op_table_checks.h"

using namespace minigrad;
using namespace minigrad::test;

TEST_CASE("op table: the names are unique, so a failure names one row") {
  const std::vector<OpInfo>& rows = op_table();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = i + 1; j < rows.size(); ++j)
      if (rows[i].name == rows[j].name) FAIL_CHECK("two rows are named " << rows[i].name);
}

TEST_CASE("op table: gradcheck in float64; the rows without a gradient record none") {
  check_rows(every_row, [](const OpInfo& row) { return check_gradcheck(row, kCPU); });
}

TEST_CASE("op table: the twice-differentiable rows pass gradgradcheck in float64") {
  check_rows(twice_row, [](const OpInfo& row) { return check_gradgradcheck(row, kCPU); });
}

TEST_CASE("op table: the once-differentiable rows refuse a second backward, naming their Function") {
  // The normalizations: their backward is one fused kernel.
  check_rows(once_row, [](const OpInfo& row) { return check_once_differentiable(row, kCPU); });
}

TEST_CASE("op table: strided inputs give the contiguous inputs' values and gradients") {
  check_rows(every_row, check_noncontiguous);
}

TEST_CASE("op table: a size-0 dim gives an empty output of the expected shape, or the row's error") {
  check_rows([](const OpInfo& row) { return row.test_empty; },
             [](const OpInfo& row) { return check_empty(row, kCPU); });
}

TEST_CASE("op table: every dtype a row takes agrees with float64, values and gradients") {
  for (DType dtype : {kFloat32, kFloat16, kBFloat16}) {
    INFO("dtype: " << dtype_name(dtype));
    check_rows([dtype](const OpInfo& row) { return row.takes(dtype); },
               [dtype](const OpInfo& row) { return check_dtype(row, dtype); });
  }
}

// ---- the checks themselves ----

namespace {

// Its backward is a kernel the tape cannot see through.
struct SquareOnce : Function<SquareOnce> {
  static constexpr bool is_once_differentiable = true;
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0] * 2.0}; }
};

// Right first derivative (2 x g), wrong second: the backward takes 2 x through a detached
// copy, so differentiating it again misses the x-dependence.
struct SquareDetachedBackward : Function<SquareDetachedBackward> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0].detach() * 2.0}; }
};

// x * x computed from the raw buffer as if it were contiguous: wrong for a strided input.
struct SquareIgnoringStrides : Function<SquareIgnoringStrides> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    const Tensor flat = as_strided(x, {x.numel()}, {1}, x.storage_offset());
    return (flat * flat).view(x.sizes());
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_tensors()[0] * 2.0}; }
};

OpInfo local_row(const char* name, OpFn fn) {
  return OpInfo(name, [](const Samples& s) { return tensor_list{s.normal({2, 3})}; }, std::move(fn));
}

}  // namespace

TEST_CASE("op table checks: a once-differentiable Function passes as such and fails flagged wrongly") {
  const auto once = [](const tensor_list& x) { return SquareOnce::apply(x[0]); };
  CHECK(check_once_differentiable(local_row("once", once).once("SquareOnce"), kCPU).empty());
  // Flagged twice differentiable, it fails (the second backward is an error)...
  CHECK_THROWS_CONTAINING(check_gradgradcheck(local_row("once as twice", once), kCPU),
                          "SquareOnce.backward is once differentiable");
  // ... and the error must name the right Function.
  CHECK(!check_once_differentiable(local_row("wrong name", once).once("Other"), kCPU).empty());
  // A twice-differentiable op flagged once differentiable: the second backward succeeds.
  const auto twice = [](const tensor_list& x) { return x[0] * x[0]; };
  CHECK(check_once_differentiable(local_row("twice as once", twice).once("Mul"), kCPU) ==
        "a second backward through this once-differentiable op did not fail");
}

TEST_CASE("op table checks: gradgradcheck fails an op whose second derivative is wrong") {
  const OpInfo row = local_row("detached", [](const tensor_list& x) { return SquareDetachedBackward::apply(x[0]); });
  CHECK(check_gradgradcheck(row, kCPU).find("gradgradcheck FAILED") != std::string::npos);
}

TEST_CASE("op table checks: the strided inputs are strided, and an op that ignores strides fails") {
  const Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor s = strided_copy(x);
  CHECK(!s.is_contiguous());
  CHECK(s.requires_grad());
  CHECK(s.is_leaf());
  CHECK_ALLCLOSE(s, x, 0.0, 0.0);
  CHECK(!strided_copy(randn({3, 1}, kFloat64)).is_contiguous());
  const OpInfo row =
      local_row("ignores strides", [](const tensor_list& x) { return SquareIgnoringStrides::apply(x[0]); });
  CHECK(check_noncontiguous(row).find("every input strided: the output") != std::string::npos);
}

TEST_CASE("op table checks: the empty-input check fails a wrong shape, a wrong message and a missing error") {
  OpInfo sums = local_row("sum", [](const tensor_list& x) { return sum(x[0]); });
  CHECK(check_empty(sums, kCPU).find("must say its empty output's shape") != std::string::npos);
  CHECK(check_empty(OpInfo(sums).empty_shape({}), kCPU).empty());
  CHECK(check_empty(OpInfo(sums).empty_shape({0}), kCPU).find("expected [0]") != std::string::npos);
  CHECK(check_empty(OpInfo(sums).empty_error("sum: "), kCPU).find("were accepted") != std::string::npos);
  OpInfo maxes = local_row("max", [](const tensor_list& x) { return max(x[0]); });
  CHECK(check_empty(OpInfo(maxes).empty_error("max: the input 'self' is empty"), kCPU).empty());
  CHECK(check_empty(OpInfo(maxes).empty_error("another message"), kCPU).find("does not say") != std::string::npos);
}

TEST_CASE("op table checks: the dtype check fails an op that is wrong in float32 only") {
  const OpInfo row = local_row("off in float32", [](const tensor_list& x) {
    return x[0].dtype() == kFloat32 ? x[0] * 1.001 : x[0] * 1.0;
  });
  CHECK(check_dtype(row, kFloat64).empty());
  CHECK(check_dtype(row, kFloat32).find("the output") != std::string::npos);
}
