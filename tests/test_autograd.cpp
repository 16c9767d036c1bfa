// The tape and the engine: recording, ordering, accumulation, freeing, and the pitfalls
// each given a clear error.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;

namespace {

// x -> x^2, the tutorial's GoodOp: saves its input.
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

// The tutorial's BadOp: forgot to save its input, and its backward asks for it anyway.
struct ForgotToSave : Function<ForgotToSave> {
  static Tensor forward(Context&, const Tensor& x) { return x * x; }
  static tensor_list backward(Context& ctx, tensor_list g) {
    Tensor x = ctx.saved_tensors()[0];
    return {g[0] * x * 2.0};
  }
};

// The tutorial's other BadOp: returns no gradient at all.
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
  CHECK(x.grad().item<double>() == 9.0);
  y.backward();  // accumulates: 9 + 9
  CHECK(x.grad().item<double>() == 18.0);
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
  CHECK(x.grad().item<double>() == 2.0);
}

TEST_CASE("backward through a freed graph is a clear error; retain_graph keeps it") {
  Tensor x = from_vector<double>({3}, {1}).requires_grad_();
  Tensor y = Square::apply(x);
  y.backward();
  CHECK_THROWS_CONTAINING(y.backward(), "backward through the graph a second time");
  Tensor z = Square::apply(x);
  z.backward(Tensor(), true);
  z.backward();
  CHECK(x.grad().item<double>() == 6.0 + 12.0);
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
  CHECK(y2.grad().item<double>() == 6.0);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("a 100000-op chain runs backward and is destroyed without overflowing the stack") {
  Tensor x = from_vector<double>({1.0}, {1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.backward(Tensor(), true);
  CHECK(x.grad().item<double>() == 1.0);
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

TEST_CASE("a 100000-op chain of ops that save their inputs is freed without overflowing the stack") {
  Tensor x = from_vector<double>({1.0}, {1}).requires_grad_();
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * x;  // each Mul saves its inputs, with their history
  y = Tensor();
  CHECK(x.is_leaf());
}

// ---- higher-order gradients ----

TEST_CASE("create_graph: the gradient has history, and its backward is the second derivative") {
  // d/dx tanh = 1 - tanh^2; d2/dx2 tanh = -2 tanh (1 - tanh^2).
  Tensor x = from_vector<double>({-1.5, 0.3, 2.0}, {3}).requires_grad_();
  Tensor y = tanh(x).sum();
  Tensor g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(g.requires_grad());
  CHECK(!x.grad().defined());  // grad() returns, it does not accumulate
  g.sum().backward();
  const std::vector<double> xs = x.to_vector<double>(), second = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double t = std::tanh(xs[i]);
    CHECK(second[i] == doctest::Approx(-2 * t * (1 - t * t)).epsilon(1e-12));
  }
}

TEST_CASE("create_graph through backward(): .grad keeps its history, retain_graph defaults to create_graph") {
  Tensor x = from_vector<double>({2.0}, {1}).requires_grad_();
  Tensor y = (x * x * x).sum();  // y' = 3x^2, y'' = 6x
  y.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  Tensor g = x.grad();
  CHECK(g.item<double>() == 12.0);
  CHECK(g.requires_grad());
  Tensor x2 = autograd::grad({g.sum()}, {x}, {}, /*retain_graph=*/true)[0];
  y.backward();  // the graph was retained by create_graph: a second backward works
  CHECK(x.grad().item<double>() == 24.0);
  CHECK(x2.item<double>() == 12.0);  // 6x
}

TEST_CASE("a saved output comes back with history under create_graph") {
  Tensor x = from_vector<double>({0.5, -1.0}, {2}).requires_grad_();
  Tensor y = exp(x);  // Exp saves its own output
  Tensor g = autograd::grad({y.sum()}, {x}, {}, std::nullopt, true)[0];  // exp(x), through the saved output
  Tensor gg = autograd::grad({g.sum()}, {x})[0];                          // exp(x) again
  CHECK_ALLCLOSE(gg, exp(x.detach()), 1e-12, 0.0);
}

TEST_CASE("autograd::grad: several inputs, grad_outputs, allow_unused, unused input is an error") {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor b = from_vector<double>({3, 4}, {2}).requires_grad_();
  Tensor c = from_vector<double>({5}, {1}).requires_grad_();
  Tensor y = a * b;
  tensor_list g = autograd::grad({y}, {a, b}, {from_vector<double>({1, 10}, {2})}, true);
  CHECK(g[0].to_vector<double>() == std::vector<double>{3, 40});
  CHECK(g[1].to_vector<double>() == std::vector<double>{1, 20});
  CHECK_THROWS_CONTAINING(autograd::grad({y.sum()}, {a, c}, {}, true), "grad: input 1 was not used");
  tensor_list unused = autograd::grad({y.sum()}, {a, c}, {}, true, false, /*allow_unused=*/true);
  CHECK(unused[0].defined());
  CHECK(!unused[1].defined());
  // A non-leaf input: the gradient flowing into it.
  Tensor h = a * 2.0;
  Tensor z = (h * h).sum();
  CHECK(autograd::grad({z}, {h})[0].to_vector<double>() == std::vector<double>{4, 8});
  CHECK(!a.grad().defined());
}

struct RawDoubler : Function<RawDoubler> {
  static constexpr bool is_once_differentiable = true;
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    CHECK(!GradMode::is_enabled());  // runs unrecorded, even under create_graph
    return {g[0] * ctx.saved_tensors()[0] * 2.0};
  }
};

TEST_CASE("a once-differentiable Function: first backward works, a second one names it") {
  Tensor x = from_vector<double>({3}, {1}).requires_grad_();
  Tensor g = autograd::grad({RawDoubler::apply(x).sum()}, {x}, {}, std::nullopt, true)[0];
  CHECK(g.item<double>() == 6.0);
  CHECK(g.requires_grad());
  CHECK_THROWS_CONTAINING(g.sum().backward(), "RawDoubler.backward is once differentiable");
}

// Computes its gradient in forward and keeps it in its state, saving no tensor (as
// cross_entropy does on CUDA): the gradient still depends on x.
struct GradientInForward : Function<GradientInForward> {
  static constexpr bool is_once_differentiable = true;
  struct State {
    Tensor gradient;
  };
  static Tensor forward(Context& ctx, const Tensor& x) {
    ctx.state<State>().gradient = x * 2.0;
    return x * x;
  }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.state<State>().gradient}; }
};

TEST_CASE("a once-differentiable Function that saved no tensor: a second backward names it, not 'no grad_fn'") {
  Tensor x = from_vector<double>({3}, {1}).requires_grad_();
  // dy = 1 has no history and nothing was saved: only the edge to x connects g to x.
  Tensor g = autograd::grad({GradientInForward::apply(x).sum()}, {x}, {}, std::nullopt, true)[0];
  CHECK(g.item<double>() == 6.0);
  CHECK(g.requires_grad());
  CHECK_THROWS_CONTAINING(autograd::grad({g.sum()}, {x}), "GradientInForward.backward is once differentiable");
}

// ---- a complete Context ----

// Two outputs, the second an auxiliary statistic that is not differentiable.
struct SumAndCount : Function<SumAndCount> {
  static inline bool saw_undefined = false;
  static tensor_list forward(Context& ctx, const Tensor& x) {
    Tensor count = full({}, static_cast<double>(x.numel()), kFloat64);
    ctx.mark_non_differentiable({count});
    ctx.set_materialize_grads(false);
    ctx.saved_data["n"] = x.numel();
    return {x.sum(), count};
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    saw_undefined = !g[1].defined();
    return {g[0].expand({ctx.saved_data["n"].toInt()}).contiguous()};
  }
};

TEST_CASE("mark_non_differentiable and set_materialize_grads(false)") {
  Tensor x = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  tensor_list out = SumAndCount::apply(x);
  CHECK(out[0].requires_grad());
  CHECK(!out[1].requires_grad());
  CHECK(out[1].item<double>() == 3.0);
  out[0].backward();
  CHECK(SumAndCount::saw_undefined);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
}

// Weighted sum of a list of tensors plus an optional bias.
struct WeightedSum : Function<WeightedSum> {
  static Tensor forward(Context& ctx, const tensor_list& xs, const std::optional<Tensor>& bias, double w) {
    ctx.saved_data["count"] = xs.size();
    ctx.saved_data["w"] = w;
    Tensor out = xs[0] * w;
    for (size_t i = 1; i < xs.size(); ++i) out = out + xs[i] * w;
    return bias ? out + *bias : out;
  }
  static tensor_list backward(Context& ctx, tensor_list g) {
    tensor_list grads;
    for (int64_t i = 0; i < ctx.saved_data["count"].toInt(); ++i)
      grads.push_back(ctx.needs_input_grad(static_cast<size_t>(i)) ? g[0] * ctx.saved_data["w"].toDouble() : Tensor());
    grads.push_back(g[0]);     // the optional bias
    grads.push_back(Tensor());  // w
    return grads;
  }
};

TEST_CASE("Function arguments: tensor_list (one gradient per element) and std::optional<Tensor>") {
  Tensor a = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor b = from_vector<double>({3, 4}, {2});
  Tensor c = from_vector<double>({5, 6}, {2}).requires_grad_();
  Tensor bias = from_vector<double>({1, 1}, {2}).requires_grad_();
  WeightedSum::apply(tensor_list{a, b, c}, std::optional<Tensor>(bias), 2.0).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2});
  CHECK(c.grad().to_vector<double>() == std::vector<double>{2, 2});
  CHECK(bias.grad().to_vector<double>() == std::vector<double>{1, 1});
  Tensor y = WeightedSum::apply(tensor_list{a}, std::optional<Tensor>(), 3.0);  // no bias: needs no gradient
  y.sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{5, 5});
}

struct ReadsMissingKey : Function<ReadsMissingKey> {
  static Tensor forward(Context&, const Tensor& x) { return x * 1.0; }
  static tensor_list backward(Context& ctx, tensor_list g) { return {g[0] * ctx.saved_data["scale"].toDouble()}; }
};

TEST_CASE("saved_data: a key forward never set is an error naming the Function and the key") {
  Tensor x = from_vector<double>({1}, {1}).requires_grad_();
  CHECK_THROWS_CONTAINING(ReadsMissingKey::apply(x).sum().backward(),
                          "ReadsMissingKey.backward read ctx.saved_data[\"scale\"], which forward never set");
}

TEST_CASE("saved_data and state survive backward: a second backward through nodes that saved no tensors works") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  tensor_list outs = ScaleTwice::apply(x, 3.0, from_vector<double>({1}, {1}));
  Tensor y = outs[0].sum();
  y.backward();
  y.backward();  // Sum, ScaleTwice saved values only: nothing was freed
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 6});
  Tensor z = (x.t() * 2.0).view({2, 1}).sum();  // views and a scalar multiply
  z.backward();
  z.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{10, 10});
}

// ---- hooks ----

TEST_CASE("register_hook on a non-leaf replaces its gradient; remove_hook; a void hook observes") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor h = x * 3.0;
  std::vector<double> seen;
  const size_t doubler = h.register_hook([](const Tensor& g) { return g * 2.0; });
  h.register_hook([&](const Tensor& g) { seen = g.to_vector<double>(); });
  h.sum().backward(Tensor(), true);
  CHECK(seen == std::vector<double>{2, 2});                              // after the doubler
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 6});
  h.remove_hook(doubler);
  h.sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{9, 9});
}

TEST_CASE("register_hook on a leaf runs before accumulation and in autograd::grad") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  x.register_hook([](const Tensor& g) { return g * 10.0; });
  (x * x).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{20, 40});
  CHECK(autograd::grad({(x * 1.0).sum()}, {x})[0].to_vector<double>() == std::vector<double>{10, 10});
}

TEST_CASE("retain_grad keeps a non-leaf's gradient, accumulated over backward calls") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  Tensor h = x * 3.0;
  CHECK(!h.retains_grad());
  h.retain_grad();
  CHECK(h.retains_grad());
  Tensor y = (h * h).sum();
  y.backward(Tensor(), true);
  CHECK(h.grad().to_vector<double>() == std::vector<double>{6, 12});  // 2h
  y.backward();
  CHECK(h.grad().to_vector<double>() == std::vector<double>{12, 24});
}

TEST_CASE("post-accumulate-grad hooks see the updated .grad; queue_callback runs once backward ends") {
  Tensor w = from_vector<double>({1, 2}, {2}).requires_grad_();
  std::vector<std::string> log;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    log.push_back(fmt::format("post {}", leaf.grad().sum().item<double>()));
    autograd::queue_callback([&] { log.push_back("done"); });
  });
  Tensor v = from_vector<double>({5}, {1}).requires_grad_();
  ((w * 2.0).sum() + v.sum()).backward();
  CHECK(log == std::vector<std::string>{"post 4", "done"});
  CHECK_THROWS_CONTAINING(autograd::queue_callback([] {}), "queue_callback: no backward is running");
}

TEST_CASE("gradient clipping with a callback: every .grad is complete when it runs") {
  Tensor a = from_vector<double>({3, 4}, {2}).requires_grad_();
  Tensor b = from_vector<double>({12}, {1}).requires_grad_();
  Tensor y = (a * a).sum() + b * 0.5;
  a.register_hook([&](const Tensor&) {
    autograd::queue_callback([&] {
      NoGradGuard no_grad;
      const double norm = std::sqrt((a.grad() * a.grad()).sum().item<double>() + (b.grad() * b.grad()).sum().item<double>());
      a.mutable_grad()->mul_(1.0 / norm);
      b.mutable_grad()->mul_(1.0 / norm);
    });
  });
  y.sum().backward();
  const double norm = std::sqrt(36.0 + 64.0 + 0.25);
  CHECK(a.grad().to_vector<double>()[1] == doctest::Approx(8.0 / norm));
  CHECK(b.grad().item<double>() == doctest::Approx(0.5 / norm));
}

// ---- accumulation ----

TEST_CASE("gradients accumulate in place into a .grad nobody else holds, and out of place otherwise") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  (x * 2.0).sum().backward();
  const void* first = x.grad().raw_data();
  (x * 2.0).sum().backward();
  CHECK(x.grad().raw_data() == first);  // summed into the same memory
  Tensor held = x.grad();
  (x * 2.0).sum().backward();
  CHECK(held.to_vector<double>() == std::vector<double>{4, 4});  // what we held stays as it was
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 6});
}

TEST_CASE("a .grad with history is refused: it would make a reference cycle") {
  Tensor x = from_vector<double>({1, 2}, {2}).requires_grad_();
  (x * 2.0).sum().backward();
  CHECK_THROWS_CONTAINING(x.mutable_grad() = x.grad() + x * 1e-4, "mutable_grad: the gradient assigned has history");
  CHECK_THROWS_CONTAINING(x.mutable_grad() = zeros({3}, kFloat64), "mutable_grad: assigned a gradient of shape [3]");
  {
    NoGradGuard no_grad;
    x.mutable_grad() = x.grad() + x * 1e-4;  // fine: no history
  }
  CHECK(x.grad().to_vector<double>()[0] == doctest::Approx(2.0001));
  x.mutable_grad() = Tensor();
  CHECK(!x.grad().defined());
}

TEST_CASE("two threads backpropagating into one shared leaf: every gradient arrives") {
  Tensor w = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  constexpr int kSteps = 200;
  auto worker = [&] {
    for (int i = 0; i < kSteps; ++i) (w * 2.0).sum().backward();
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  CHECK(w.grad().to_vector<double>() == std::vector<double>(3, 4.0 * kSteps));
}
