// The tape and the engine: recording, ordering, accumulation, freeing, and the pitfalls
// each given a clear error.
#include <memory>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;

namespace {

// x -> x^2, the seed's GoodOp: saves its input.
struct Square : Function<Square> {
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    Tensor x = ctx.saved_tensors()[0];
    return {g[0] * x * 2.0};
  }
};

// The seed's BadOp: forgot to save its input, and its backward asks for it anyway.
struct ForgotToSave : Function<ForgotToSave> {
  static Tensor forward(Context&, const Tensor& x) { return x * x; }
  static tensor_list backward(Context& ctx, tensor_list g) {
    Tensor x = ctx.saved_tensors()[0];
    return {g[0] * x * 2.0};
  }
};

// The seed's other BadOp: returns no gradient at all.
struct ReturnsNothing : Function<ReturnsNothing> {
  static Tensor forward(Context&, const Tensor& x) { return x * x; }
  static tensor_list backward(Context&, tensor_list) { return {Tensor()}; }
};

struct WrongCount : Function<WrongCount> {
  static Tensor forward(Context&, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(Context&, tensor_list g) { return {g[0], g[0]}; }
};

struct WrongShape : Function<WrongShape> {
  static Tensor forward(Context&, const Tensor& x) { return x.sum(); }
  static tensor_list backward(Context&, tensor_list g) { return {g[0]}; }  // should expand to x's shape
};

struct WrongDtype : Function<WrongDtype> {
  static Tensor forward(Context&, const Tensor& x) { return x * 2.0; }
  static tensor_list backward(Context&, tensor_list g) { return {g[0].to(kFloat32)}; }
};

// Returns its input unchanged: recording must not rewrite the input's history.
struct Identity : Function<Identity> {
  static Tensor forward(Context&, const Tensor& x) { return x; }
  static tensor_list backward(Context&, tensor_list g) { return {g[0]}; }
};

// Two outputs; a non-tensor argument kept in saved_data; needs_input_grad observed.
struct ScaleTwice : Function<ScaleTwice> {
  static inline std::vector<bool> seen_needs;
  static tensor_list forward(Context& ctx, const Tensor& x, double scale, const Tensor& y) {
    ctx.saved_data["scale"] = scale;
    seen_needs = {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)};
    return {x * scale, y * (2.0 * scale)};
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    const double scale = ctx.saved_data["scale"].toDouble();
    return {ctx.needs_input_grad(0) ? g[0] * scale : Tensor(), Tensor(),
            ctx.needs_input_grad(2) ? g[1] * (2.0 * scale) : Tensor()};
  }
};

// Records the order in which backward runs.
struct Logged : Function<Logged> {
  static inline std::vector<int> order;
  static Tensor forward(Context& ctx, const Tensor& x, int64_t id) {
    ctx.saved_data["id"] = id;
    return x * 1.0;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    order.push_back(static_cast<int>(ctx.saved_data["id"].toInt()));
    return {g[0], Tensor()};
  }
};

}  // namespace

TEST_CASE("a chain of ops records on the tape and backward gives the analytic gradient") {
  Tensor x = from_vector<double>({1, -2, 3}, {3}).requires_grad_();
  Tensor y = (x * x + x * 3.0).sum();  // dy/dx = 2x + 3
  CHECK(y.grad_fn() != nullptr);
  CHECK(!y.is_leaf());
  y.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, -1, 9});
}

TEST_CASE("a tensor used twice gets the sum of its gradients; backward accumulates into .grad") {
  Tensor x = from_vector<double>({2}, {1}).requires_grad_();
  Tensor y = Square::apply(x) + Square::apply(x) + x;  // 2x^2 + x: gradient 4x + 1
  y.backward(Tensor(), /*retain_graph=*/true);
  CHECK(x.grad().item() == 9.0);
  y.backward();  // accumulates: 9 + 9
  CHECK(x.grad().item() == 18.0);
}

TEST_CASE("backward replays the tape in reverse order of recording") {
  Logged::order.clear();
  Tensor x = from_vector<double>({1}, {1}).requires_grad_();
  Tensor a = Logged::apply(x, int64_t{1});
  Tensor b = Logged::apply(a, int64_t{2});
  Tensor c = Logged::apply(x, int64_t{3});     // a branch recorded after b
  Tensor d = Logged::apply(b + c, int64_t{4});
  CHECK(a.grad_fn()->sequence_nr() < b.grad_fn()->sequence_nr());
  d.backward();
  CHECK(Logged::order == std::vector<int>{4, 3, 2, 1});
  CHECK(x.grad().item() == 2.0);
}

TEST_CASE("backward through a freed graph is a clear error; retain_graph keeps it") {
  Tensor x = from_vector<double>({3}, {1}).requires_grad_();
  Tensor y = Square::apply(x);
  y.backward();
  CHECK_THROWS_CONTAINING(y.backward(), "backward through the graph a second time");
  Tensor z = Square::apply(x);
  z.backward(Tensor(), true);
  z.backward();
  CHECK(x.grad().item() == 6.0 + 12.0);
}

TEST_CASE("the gradient-leak pitfall fails loudly") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  CHECK_THROWS_CONTAINING(ForgotToSave::apply(x).sum().backward(),
                          "ForgotToSave.backward asked for saved tensors, but forward never called "
                          "ctx.save_for_backward()");
  CHECK_THROWS_CONTAINING(ReturnsNothing::apply(x).sum().backward(),
                          "ReturnsNothing.backward returned no gradient for argument 0, which requires grad");
}

TEST_CASE("a backward returning the wrong number, shape or dtype of gradients is a clear error") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  CHECK_THROWS_CONTAINING(WrongCount::apply(x).sum().backward(),
                          "WrongCount.backward returned 2 gradients, but forward took 1 arguments");
  CHECK_THROWS_CONTAINING(WrongShape::apply(x).backward(),
                          "WrongShape.backward returned a gradient of shape [] for argument 0 of shape [2]");
  CHECK_THROWS_CONTAINING(WrongDtype::apply(x).sum().backward(),
                          "WrongDtype.backward returned a float32 gradient for argument 0, which is float64");
}

TEST_CASE("a saved tensor modified in place is detected by its version") {
  Tensor w = from_vector<double>({1, 2}, {2});  // no grad needed, so in-place is allowed
  Tensor x = from_vector<double>({3, 4}, {2}).requires_grad_();
  Tensor y = (x * w).sum();  // mul saves w at version 0
  w.mul_(10.0);
  CHECK(w.version() == 1);
  CHECK_THROWS_CONTAINING(y.backward(), "was modified by an in-place op after it was saved");
}

TEST_CASE("backward on a non-scalar needs a gradient; its shape must match") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = x * 2.0;
  CHECK_THROWS_CONTAINING(y.backward(), "a gradient can be implied only for a one-element output");
  CHECK_THROWS_CONTAINING(y.backward(ones({3}, kFloat64)), "backward: gradient 0 has shape [3]");
  y.backward(from_vector<double>({1, 10}, {2}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 20});
  CHECK_THROWS_CONTAINING(from_vector<double>({1}, {1}).backward(), "does not require grad and has no grad_fn");
}

TEST_CASE("NoGradGuard stops recording; detach cuts history; requires_grad propagates") {
  Tensor x = randn({3}, kFloat64).requires_grad_();
  {
    NoGradGuard no_grad;
    Tensor y = x * 2.0;
    CHECK(!y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  CHECK(GradMode::is_enabled());
  Tensor z = x * 2.0;
  CHECK(z.requires_grad());
  Tensor d = z.detach();
  CHECK(!d.requires_grad());
  CHECK(d.storage() == z.storage());
  CHECK(!(randn({3}) * 2.0).requires_grad());
}

TEST_CASE("in-place ops refuse tensors that require grad while recording, and allow updates under NoGradGuard") {
  Tensor p = randn({3}, kFloat64).requires_grad_();
  CHECK_THROWS_CONTAINING(p.add_(1.0), "add_: in-place");
  {
    NoGradGuard no_grad;
    const uint64_t v = p.version();
    p.add_(ones({3}, kFloat64), -0.5);
    CHECK(p.version() == v + 1);
  }
}

TEST_CASE("a Function returning its input leaves the input a leaf") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = Identity::apply(x);
  CHECK(x.is_leaf());
  CHECK(!y.is_leaf());
  CHECK(y.storage() == x.storage());
  y.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("multi-output Functions: unused outputs give zero gradients; needs_input_grad; saved_data") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor y = from_vector<double>({3}, {1});  // does not require grad
  tensor_list outs = ScaleTwice::apply(x, 3.0, y);
  CHECK(ScaleTwice::seen_needs == std::vector<bool>{true, false, false});
  CHECK(outs[0].requires_grad());
  outs[0].sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
  Tensor y2 = from_vector<double>({3}, {1}).requires_grad_();
  tensor_list outs2 = ScaleTwice::apply(x, 3.0, y2);
  outs2[1].sum().backward();  // outs2[0] unused: its gradient is zeros
  CHECK(y2.grad().item() == 6.0);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("a 100000-op chain runs backward and is destroyed without overflowing the stack") {
  Tensor x = from_vector<double>({1.0}, {1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.backward(Tensor(), true);
  CHECK(x.grad().item() == 1.0);
  y = Tensor();  // the whole chain dies here, iteratively
  CHECK(x.is_leaf());
}

TEST_CASE("no reference cycles: the graph and its saved tensors die with the last output") {
  std::weak_ptr<autograd::Node> node;
  std::weak_ptr<Storage> saved_output;
  {
    Tensor x = randn({4}, kFloat64).requires_grad_();
    Tensor y = exp(x);  // exp saves its own output: the classic cycle, if saved naively
    node = y.grad_fn();
    saved_output = y.storage();
    CHECK(!node.expired());
  }
  CHECK(node.expired());
  CHECK(saved_output.expired());
}
