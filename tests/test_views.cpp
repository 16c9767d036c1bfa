// Views (view, reshape, transpose, t, permute, slice, select, expand, squeeze, unsqueeze)
// and copies (to, clone, contiguous). Expected values map each output multi-index to the
// input's by hand (tests/reference_indexing.h); storage sharing is checked by writing
// through a view.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/reference_indexing.h"
#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

using IndexMap = std::function<Shape(const Shape&)>;

// The values a view of x with `out_sizes` should hold: output element `index` is input
// element input_index(index).
Tensor reference_view(const Tensor& x, const Shape& out_sizes, const IndexMap& input_index) {
  const std::vector<double> values = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t flat = 0; flat < reference_numel(out_sizes); ++flat)
    out.push_back(values[static_cast<size_t>(ravel(input_index(unravel(flat, out_sizes)), x.sizes()))]);
  return float64_tensor(out, out_sizes);
}

// 0, 1, 2, ... in float64: every element tells where it came from.
Tensor counting(const Shape& sizes) {
  return arange(0.0, static_cast<double>(reference_numel(sizes)), 1.0, kFloat64).view(sizes);
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

// Double backward of fn at x: autograd::grad with create_graph gives a gradient with
// history, and gradgradcheck compares its derivatives (in x and in the output weights v)
// with finite differences.
void check_double_backward(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x,
                           const GradcheckOptions& options = {}) {
  const Tensor v = randn(fn(x.detach()).sizes(), kFloat64).requires_grad_();
  const Tensor g = autograd::grad({fn(x)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(g.requires_grad());
  CHECK_GRADGRADCHECK_OPTS([&fn](const tensor_list& t) { return fn(t[0]); }, tensor_list{x}, tensor_list{v},
                           options);
}

}  // namespace

TEST_CASE("view and reshape keep row-major order and infer -1") {
  Tensor x = counting({2, 3, 4});
  Tensor v = x.view({4, -1});
  CHECK(v.sizes() == Shape{4, 6});
  CHECK(v.to_vector<double>() == x.to_vector<double>());
  CHECK(shares_storage(v, x));
  CHECK(x.reshape({-1}).sizes() == Shape{24});
  CHECK(x.flatten().to_vector<double>() == x.to_vector<double>());
  CHECK(x.view({2, 1, 12, 1}).sizes() == Shape{2, 1, 12, 1});
  CHECK(scalar_tensor(5.0).view({1, 1}).sizes() == Shape{1, 1});
}

TEST_CASE("view works on non-contiguous inputs whose strides allow it, reshape copies otherwise") {
  Tensor x = counting({2, 3, 4});
  Tensor t = x.transpose(1, 2);  // [2, 4, 3], strides [12, 1, 4]
  // Splitting the size-4 dim stays inside one stride chunk: a view.
  Tensor split = t.view({2, 2, 2, 3});
  CHECK(shares_storage(split, x));
  CHECK(split.to_vector<double>() == t.to_vector<double>());
  // Merging the size-4 and size-3 dims would need one stride for both: impossible.
  CHECK_THROWS_CONTAINING(t.view({8, 3}), "view: size [8, 3] is not compatible with the input's strides");
  CHECK_THROWS_CONTAINING(t.view({8, 3}), "use reshape()");
  Tensor copied = t.reshape({8, 3});
  CHECK(!shares_storage(copied, x));
  CHECK(copied.to_vector<double>() == t.to_vector<double>());

  // Every other column of a [4, 6] tensor: evenly spaced by 2, so one stride-2 dim can hold it.
  Tensor every_other = counting({4, 6}).slice(1, 0, 6, 2);
  Tensor flat = every_other.view({12});
  CHECK(flat.strides() == Shape{2});
  CHECK(flat.to_vector<double>() == every_other.to_vector<double>());
  // A block of whole rows is contiguous.
  Tensor rows = counting({4, 6}).slice(0, 1, 3);
  CHECK(rows.view({12}).to_vector<double>() == rows.to_vector<double>());
  // Stride-0 dims can be split too.
  Tensor expanded = counting({3, 1}).expand({2, 3, 4});
  CHECK(expanded.view({2, 3, 2, 2}).to_vector<double>() == expanded.to_vector<double>());
  CHECK_THROWS_CONTAINING(expanded.view({6, 4}), "view: size [6, 4] is not compatible");
}

TEST_CASE("view and reshape errors name the op and the argument") {
  Tensor x = counting({2, 3, 4});
  CHECK_THROWS_CONTAINING(x.view({-1, -1}), "view: only one dimension can be inferred (-1) in the argument 'shape'");
  CHECK_THROWS_CONTAINING(x.view({5, -1}), "view: shape [5, -1] is invalid for an input of 24 elements");
  CHECK_THROWS_CONTAINING(x.view({2, -3, -4}), "view: invalid size -3 at dimension 1");
  CHECK_THROWS_CONTAINING(x.reshape({7}), "reshape: shape [7] is invalid for an input of 24 elements");
  CHECK_THROWS_CONTAINING(x.view({}), "view: shape [] is invalid for an input of 24 elements");
  CHECK_THROWS_CONTAINING(zeros({0, 3}).reshape({0, -1}), "reshape: cannot infer the -1");
  CHECK_THROWS_CONTAINING(Tensor().view({1}), "view: argument 'self' is an undefined tensor");
}

TEST_CASE("transpose, t and permute move sizes and strides") {
  Tensor x = counting({2, 3, 4});
  Tensor tr = x.transpose(0, -1);
  CHECK(tr.sizes() == Shape{4, 3, 2});
  CHECK(shares_storage(tr, x));
  CHECK_ALLCLOSE(tr, reference_view(x, {4, 3, 2}, [](const Shape& i) { return Shape{i[2], i[1], i[0]}; }), 0.0, 0.0);
  Tensor p = x.permute({1, -1, 0});
  CHECK(p.sizes() == Shape{3, 4, 2});
  CHECK_ALLCLOSE(p, reference_view(x, {3, 4, 2}, [](const Shape& i) { return Shape{i[2], i[0], i[1]}; }), 0.0, 0.0);
  Tensor m = counting({3, 5});
  CHECK_ALLCLOSE(m.t(), reference_view(m, {5, 3}, [](const Shape& i) { return Shape{i[1], i[0]}; }), 0.0, 0.0);
  CHECK(counting({4}).t().sizes() == Shape{4});
  CHECK(scalar_tensor(1.0).t().dim() == 0);

  CHECK_THROWS_CONTAINING(x.t(), "t: expects 'self' to have at most 2 dimensions, got 3-D");
  CHECK_THROWS_CONTAINING(x.transpose(0, 3), "transpose: dim 3 is out of range");
  CHECK_THROWS_CONTAINING(x.permute({0, 1}), "permute: the argument 'dims' [0, 1] has 2 entries, but 'self' has 3");
  CHECK_THROWS_CONTAINING(x.permute({0, 1, -3}), "permute: dim 0 appears more than once in the argument 'dims'");
  CHECK_THROWS_CONTAINING(x.permute({0, 1, 3}), "permute: dim 3 is out of range");
}

TEST_CASE("slice: negative and clamped bounds, steps, empty results") {
  Tensor x = counting({3, 7});
  auto check_slice = [&](int64_t start, int64_t end, int64_t step, int64_t first, int64_t count) {
    CAPTURE(start);
    CAPTURE(end);
    CAPTURE(step);
    Tensor s = x.slice(1, start, end, step);
    CHECK(s.sizes() == Shape{3, count});
    CHECK_ALLCLOSE(s, reference_view(x, {3, count}, [&](const Shape& i) { return Shape{i[0], first + i[1] * step}; }),
                   0.0, 0.0);
  };
  check_slice(1, 5, 1, 1, 4);
  check_slice(0, 7, 2, 0, 4);
  check_slice(1, 7, 3, 1, 2);
  check_slice(-3, -1, 1, 4, 2);
  check_slice(-100, 100, 1, 0, 7);   // clamped to [0, 7]
  check_slice(5, 2, 1, 5, 0);        // start past end: empty
  check_slice(7, 9, 1, 7, 0);
  CHECK(shares_storage(x.slice(0, 1, 2), x));
  CHECK(x.slice(-2, 1, 3).sizes() == Shape{2, 7});
  CHECK_THROWS_CONTAINING(x.slice(1, 0, 5, 0), "slice: the argument 'step' must be positive, got 0");
  CHECK_THROWS_CONTAINING(x.slice(1, 0, 5, -1), "slice: the argument 'step' must be positive, got -1");
  CHECK_THROWS_CONTAINING(x.slice(2, 0, 1), "slice: dim 2 is out of range");
}

TEST_CASE("select removes a dim; the index may be negative") {
  Tensor x = counting({2, 3, 4});
  CHECK_ALLCLOSE(x.select(1, 2), reference_view(x, {2, 4}, [](const Shape& i) { return Shape{i[0], 2, i[1]}; }), 0.0,
                 0.0);
  CHECK_ALLCLOSE(x.select(-1, -1), reference_view(x, {2, 3}, [](const Shape& i) { return Shape{i[0], i[1], 3}; }),
                 0.0, 0.0);
  CHECK(counting({3}).select(0, 1).dim() == 0);
  CHECK(counting({3}).select(0, 1).item<double>() == 1.0);
  CHECK_THROWS_CONTAINING(x.select(1, 3), "select: index 3 is out of range for dimension 1 with size 3");
  CHECK_THROWS_CONTAINING(x.select(-2, -4), "select: index -4 is out of range for dimension 1 with size 3");
  CHECK_THROWS_CONTAINING(x.select(3, 0), "select: dim 3 is out of range");
}

TEST_CASE("expand broadcasts size-1 dims and adds leading dims with stride 0") {
  Tensor x = counting({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.sizes() == Shape{2, 3, 4});
  CHECK(e.strides()[0] == 0);
  CHECK(e.strides()[2] == 0);
  CHECK(shares_storage(e, x));
  CHECK_ALLCLOSE(e, reference_view(x, {2, 3, 4}, [](const Shape& i) { return Shape{i[1], 0}; }), 0.0, 0.0);
  CHECK(x.expand({-1, 5}).sizes() == Shape{3, 5});
  CHECK(x.expand({3, 1}).strides() == x.strides());
  CHECK(scalar_tensor(2.0).expand({2, 2}).to_vector<double>() == std::vector<double>(4, 2.0));
  CHECK(x.expand({3, 0}).numel() == 0);

  CHECK_THROWS_CONTAINING(x.expand({4, 4}),
                          "expand: the expanded size 4 must match the existing size 3 at non-singleton dimension 0");
  CHECK_THROWS_CONTAINING(x.expand({3}), "expand: the argument 'sizes' [3] has 1 dimensions, fewer than the 2");
  CHECK_THROWS_CONTAINING(x.expand({-1, 3, 1}), "expand: size -1 is not allowed for the new leading dimension 0");
  CHECK_THROWS_CONTAINING(x.expand({3, -2}), "expand: invalid size -2 at dimension 1");
}

TEST_CASE("squeeze and unsqueeze") {
  Tensor x = counting({1, 3, 1, 2});
  CHECK(x.squeeze().sizes() == Shape{3, 2});
  CHECK(x.squeeze(0).sizes() == Shape{3, 1, 2});
  CHECK(x.squeeze(-2).sizes() == Shape{1, 3, 2});
  CHECK(x.squeeze(1).sizes() == Shape{1, 3, 1, 2});  // not size 1: unchanged, as in PyTorch
  CHECK(x.squeeze().to_vector<double>() == x.to_vector<double>());
  CHECK(shares_storage(x.squeeze(), x));
  CHECK(counting({1, 1}).squeeze().dim() == 0);

  Tensor y = counting({2, 3});
  CHECK(y.unsqueeze(0).sizes() == Shape{1, 2, 3});
  CHECK(y.unsqueeze(1).sizes() == Shape{2, 1, 3});
  CHECK(y.unsqueeze(-1).sizes() == Shape{2, 3, 1});
  CHECK(y.unsqueeze(2).is_contiguous());
  CHECK(y.unsqueeze(1).to_vector<double>() == y.to_vector<double>());
  CHECK(scalar_tensor(1.0).unsqueeze(0).sizes() == Shape{1});
  CHECK_THROWS_CONTAINING(y.unsqueeze(3), "unsqueeze: dim 3 is out of range");
  CHECK_THROWS_CONTAINING(y.squeeze(2), "squeeze: dim 2 is out of range");
}

TEST_CASE("gradcheck: every view, with non-contiguous inputs and negative dims") {
  manual_seed(30);
  Tensor x = randn({2, 3, 4}, kFloat64).requires_grad_();
  const std::vector<std::pair<const char*, GradcheckFn>> views = {
      {"view", [](const tensor_list& t) { return t[0].view({4, -1}); }},
      {"view of a transpose", [](const tensor_list& t) { return t[0].transpose(1, 2).view({2, 2, 2, 3}); }},
      {"reshape that copies", [](const tensor_list& t) { return t[0].transpose(0, 1).reshape({-1}); }},
      {"transpose", [](const tensor_list& t) { return t[0].transpose(-1, 0); }},
      {"t", [](const tensor_list& t) { return t[0].select(0, 1).t(); }},
      {"permute", [](const tensor_list& t) { return t[0].permute({2, 0, 1}); }},
      {"slice", [](const tensor_list& t) { return t[0].slice(-1, 1, 4, 2); }},
      {"slice of a transpose", [](const tensor_list& t) { return t[0].transpose(0, 2).slice(0, -2, 100); }},
      {"select", [](const tensor_list& t) { return t[0].select(-2, -1); }},
      {"expand", [](const tensor_list& t) { return t[0].slice(1, 0, 1).expand({3, 2, 3, 4}); }},
      {"squeeze", [](const tensor_list& t) { return t[0].slice(1, 1, 2).squeeze(); }},
      {"squeeze(dim)", [](const tensor_list& t) { return t[0].slice(2, 0, 1).squeeze(-1); }},
      {"unsqueeze", [](const tensor_list& t) { return t[0].transpose(0, 1).unsqueeze(-2); }},
  };
  for (const auto& [name, fn] : views) {
    INFO("op: " << name);
    CHECK_GRADCHECK(fn, tensor_list{x});
  }
}

TEST_CASE("slice and select route the gradient into their part of the input") {
  Tensor x = zeros({3, 4}, kFloat64).requires_grad_();
  x.slice(1, 1, 4, 2).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  Tensor y = zeros({3, 4}, kFloat64).requires_grad_();
  (y.select(0, -1) * 2.0).sum().backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2});
  Tensor z = ones({3, 1}, kFloat64).requires_grad_();
  z.expand({2, 3, 5}).sum().backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{10, 10, 10});
}

TEST_CASE("views share storage and the version counter with their base") {
  Tensor x = zeros({3, 4}, kFloat64);
  const uint64_t version = x.version();
  Tensor column = x.t().select(0, 1);  // x[:, 1]
  column.fill_(5.0);
  CHECK(x.to_vector<double>() == std::vector<double>{0, 5, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0});
  CHECK(x.version() > version);
  CHECK(column.version() == x.version());

  const uint64_t before_slice = x.version();
  Tensor block = x.slice(0, 1, 3).slice(1, 2, 4);
  block.fill_(7.0);
  CHECK(x.to_vector<double>() == std::vector<double>{0, 5, 0, 0, 0, 5, 7, 7, 0, 5, 7, 7});
  CHECK(x.version() > before_slice);

  Tensor reshaped = x.view({2, 6});
  reshaped.select(0, 0).fill_(1.0);
  CHECK(x.select(0, 0).to_vector<double>() == std::vector<double>{1, 1, 1, 1});
  CHECK(x.select(0, 1).to_vector<double>() == std::vector<double>{1, 1, 7, 7});

  Tensor unsqueezed = x.unsqueeze(0).permute({2, 1, 0}).squeeze();
  CHECK(unsqueezed.sizes() == Shape{4, 3});
  unsqueezed.fill_(-1.0);
  CHECK(x.to_vector<double>() == std::vector<double>(12, -1.0));
}

TEST_CASE("views of empty tensors") {
  Tensor x = zeros({0, 3}, kFloat64);
  CHECK(x.view({3, 0}).sizes() == Shape{3, 0});
  CHECK(x.reshape({-1, 3}).sizes() == Shape{0, 3});
  CHECK(x.t().sizes() == Shape{3, 0});
  CHECK(x.slice(1, 1, 3).sizes() == Shape{0, 2});
  CHECK(x.select(1, 2).sizes() == Shape{0});
  CHECK(x.unsqueeze(1).expand({0, 4, 3}).numel() == 0);
  Tensor leaf = zeros({0, 3}, kFloat64).requires_grad_();
  leaf.t().slice(0, 1, 3).sum().backward();
  CHECK(leaf.grad().sizes() == Shape{0, 3});
}

TEST_CASE("contiguous and to() return the tensor itself when nothing changes") {
  Tensor x = counting({2, 3});
  CHECK(x.contiguous().is_same(x));
  CHECK(x.to(kFloat64).is_same(x));
  CHECK(x.to(kCPU).is_same(x));
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(!shares_storage(c, x));
  CHECK(c.to_vector<double>() == t.to_vector<double>());
}

TEST_CASE("clone and to() copy; their gradients come back in the input's dtype") {
  Tensor x = counting({2, 3});
  Tensor cl = x.clone();
  CHECK(!shares_storage(cl, x));
  cl.fill_(0.0);
  CHECK(x.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4, 5});

  Tensor f = x.to(kFloat32);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<double>() == x.to_vector<double>());
  CHECK(to_dtype(x, kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5});
  CHECK(to_device(x, kCPU).is_same(x));

  Tensor leaf = counting({2, 3}).requires_grad_();
  (leaf.to(kFloat32) * 2.0).sum().backward();
  CHECK(leaf.grad().dtype() == kFloat64);
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>(6, 2.0));
  // Integer results carry no gradient, as in PyTorch.
  CHECK(!leaf.to(kInt64).requires_grad());

  Tensor y = randn({3, 4}, kFloat64).requires_grad_();
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].clone(); }, tensor_list{y});
  CHECK_GRADCHECK([](const tensor_list& t) { return t[0].t().contiguous(); }, tensor_list{y});
  CHECK_THROWS_CONTAINING(Tensor().clone(), "clone: argument 'self' is an undefined tensor");
  CHECK_THROWS_CONTAINING(Tensor().to(kFloat32), "to: argument 'self' is an undefined tensor");
}

TEST_CASE("a second backward through views works without retain_graph and accumulates") {
  // The views keep only shapes and dims (typed state, which survives backward): no tensor
  // is saved, so the graph can be run again, as in PyTorch.
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> views = {
      {"view", [](const Tensor& t) { return t.view({3, 2}); }},
      {"reshape", [](const Tensor& t) { return t.reshape({-1}); }},
      {"transpose", [](const Tensor& t) { return t.transpose(0, 1); }},
      {"permute", [](const Tensor& t) { return t.permute({1, 0}); }},
      {"slice", [](const Tensor& t) { return t.slice(1, 0, 3, 2); }},
      {"select", [](const Tensor& t) { return t.select(0, 1); }},
      {"expand", [](const Tensor& t) { return t.expand({4, 2, 3}); }},
      {"squeeze", [](const Tensor& t) { return t.unsqueeze(0).squeeze(); }},
      {"unsqueeze", [](const Tensor& t) { return t.unsqueeze(1); }},
  };
  for (const auto& [name, fn] : views) {
    INFO("op: " << name);
    Tensor x = counting({2, 3}).requires_grad_();
    Tensor y = fn(x).sum();
    y.backward();
    const std::vector<double> once = x.grad().to_vector<double>();
    y.backward();
    std::vector<double> twice = once;
    for (double& g : twice) g *= 2.0;
    CHECK(x.grad().to_vector<double>() == twice);
  }
}

TEST_CASE("double backward: every view, to, clone and contiguous are twice differentiable") {
  manual_seed(31);
  Tensor x = randn({2, 3, 4}, kFloat64).requires_grad_();
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"view", [](const Tensor& t) { return t.view({4, -1}); }},
      {"reshape that copies", [](const Tensor& t) { return t.transpose(0, 1).reshape({-1}); }},
      {"transpose", [](const Tensor& t) { return t.transpose(-1, 0); }},
      {"permute", [](const Tensor& t) { return t.permute({2, 0, 1}); }},
      {"slice", [](const Tensor& t) { return t.slice(-1, 1, 4, 2); }},
      {"slice of a transpose", [](const Tensor& t) { return t.transpose(0, 2).slice(0, -2, 100); }},
      {"select", [](const Tensor& t) { return t.select(-2, -1); }},
      {"expand", [](const Tensor& t) { return t.slice(1, 0, 1).expand({3, 2, 3, 4}); }},
      {"squeeze", [](const Tensor& t) { return t.slice(1, 1, 2).squeeze(); }},
      {"squeeze(dim)", [](const Tensor& t) { return t.slice(2, 0, 1).squeeze(-1); }},
      {"unsqueeze", [](const Tensor& t) { return t.transpose(0, 1).unsqueeze(-2); }},
      {"clone", [](const Tensor& t) { return t.clone(); }},
      {"contiguous", [](const Tensor& t) { return t.transpose(0, 2).contiguous(); }},
      // Squared, so the gradient depends on x too: its derivative in x runs the view's
      // backward backwards (SliceBackward's backward is a slice, SelectBackward's a select).
      {"slice squared", [](const Tensor& t) { return t.slice(1, 0, 3, 2) * t.slice(1, 0, 3, 2); }},
      {"select squared", [](const Tensor& t) { return t.select(2, 1) * t.select(2, 1); }},
      {"expand squared", [](const Tensor& t) { return t.select(0, 0).expand({2, 3, 4}) * t.select(0, 0); }},
      {"permute squared", [](const Tensor& t) { return t.permute({1, 2, 0}) * t.permute({1, 2, 0}); }},
  };
  for (const auto& [name, fn] : ops) {
    INFO("op: " << name);
    check_double_backward(fn, x);
  }
  // A round trip through float32: exact for these finite differences only with a wide step
  // (the function is linear in the output weights, so any step gives the same slope).
  GradcheckOptions through_float32;
  through_float32.eps = 1e-2;
  through_float32.atol = 1e-4;
  check_double_backward([](const Tensor& t) { return t.to(kFloat32).to(kFloat64) * t; }, x, through_float32);
}

TEST_CASE("the gradients of slice and select are recorded Functions under create_graph") {
  Tensor x = counting({3, 4}).requires_grad_();
  Tensor v = ones({3, 2}, kFloat64).requires_grad_();
  Tensor g = autograd::grad({x.slice(1, 1, 4, 2)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
  REQUIRE(g.grad_fn() != nullptr);
  CHECK(g.grad_fn()->name().find("SliceBackward") != std::string::npos);
  CHECK(g.to_vector<double>() == std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  // Its backward is the slice of its incoming gradient: v gets the odd columns of the weights.
  (g * counting({3, 4})).sum().backward();
  CHECK(v.grad().to_vector<double>() == std::vector<double>{1, 3, 5, 7, 9, 11});

  Tensor w = scalar_tensor(2.0, kFloat64).requires_grad_();
  Tensor h = autograd::grad({x.select(0, 2).sum()}, {x}, {w}, std::nullopt, /*create_graph=*/true)[0];
  REQUIRE(h.grad_fn() != nullptr);
  CHECK(h.to_vector<double>() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2});
  (h * counting({3, 4})).sum().backward();
  CHECK(w.grad().item<double>() == 8.0 + 9.0 + 10.0 + 11.0);
}

TEST_CASE("the gradient of to() converts back through a recorded conversion under create_graph") {
  Tensor x = counting({2, 2}).requires_grad_();
  Tensor v = ones({2, 2}, kFloat32).requires_grad_();
  Tensor g = autograd::grad({x.to(kFloat32)}, {x}, {v}, std::nullopt, /*create_graph=*/true)[0];
  CHECK(g.dtype() == kFloat64);
  REQUIRE(g.grad_fn() != nullptr);
  (g * counting({2, 2})).sum().backward();
  CHECK(v.grad().dtype() == kFloat32);
  CHECK(v.grad().to_vector<double>() == std::vector<double>{0, 1, 2, 3});
}

TEST_CASE("0-d tensors: transpose is an alias, select and slice are refused") {
  Tensor s = scalar_tensor(3.0, kFloat64).requires_grad_();
  for (const auto& [dim0, dim1] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {-1, 0}, {0, -1}}) {
    CAPTURE(dim0);
    CAPTURE(dim1);
    Tensor t = s.transpose(dim0, dim1);
    CHECK(t.dim() == 0);
    CHECK(shares_storage(t, s));
    CHECK(!t.is_same(s));
    CHECK(t.item<double>() == 3.0);
  }
  (s.transpose(0, 0) * 2.0).backward();
  CHECK(s.grad().item<double>() == 2.0);
  CHECK_THROWS_CONTAINING(s.transpose(0, 1), "transpose: dim 1 is out of range");
  CHECK_THROWS_CONTAINING(s.select(0, 0), "select: cannot be applied to a 0-d tensor 'self'");
  CHECK_THROWS_CONTAINING(s.select(-1, 0), "select: cannot be applied to a 0-d tensor 'self'");
  CHECK_THROWS_CONTAINING(s.slice(0, 0, 1), "slice: cannot be applied to a 0-d tensor 'self'");
  // The other views of a 0-d tensor are fine.
  CHECK(s.permute({}).dim() == 0);
  CHECK(s.squeeze(0).dim() == 0);
  CHECK(s.unsqueeze(-1).sizes() == Shape{1});
  CHECK(s.expand({2}).sizes() == Shape{2});
  CHECK(s.view({-1}).sizes() == Shape{1});
}

TEST_CASE("sizes whose product overflows int64 are refused by view, reshape and expand") {
  const int64_t big = int64_t{1} << 62;
  Tensor x = counting({4});
  CHECK_THROWS_CONTAINING(x.view({big, big, 4}), "view: shape");
  CHECK_THROWS_CONTAINING(x.view({big, big, 4}), "overflows int64");
  // Without the check the product of the known sizes, 2^62 * 2^62 * 4, wraps around to 0.
  CHECK_THROWS_CONTAINING(x.reshape({big, big, 4, -1}), "reshape: shape");
  CHECK_THROWS_CONTAINING(x.reshape({big, big, 4, -1}), "overflows int64");
  // Without -1: 2^62 * 2 * 2 wraps to 0 as well; refused for the overflow, not the count.
  CHECK_THROWS_CONTAINING(x.reshape({big, 2, 2}), "overflows int64");
  Tensor one = counting({1, 1});
  CHECK_THROWS_CONTAINING(one.expand({big, big}), "expand: shape");
  CHECK_THROWS_CONTAINING(one.expand({big, big}), "overflows int64");
  CHECK_THROWS_CONTAINING(one.expand({4, big, -1}), "overflows int64");
  // A zero size makes any product 0: no overflow, as in PyTorch.
  CHECK(zeros({0}).view({0, big, big}).numel() == 0);
  CHECK(one.expand({0, big}).numel() == 0);
}

TEST_CASE("slice with a huge step does not overflow the length") {
  const int64_t huge = std::numeric_limits<int64_t>::max();
  Tensor x = counting({3, 7});
  Tensor first = x.slice(1, 2, 7, huge);
  CHECK(first.sizes() == Shape{3, 1});
  CHECK(first.to_vector<double>() == std::vector<double>{2, 9, 16});
  CHECK(x.slice(1, 0, huge, huge).sizes() == Shape{3, 1});
  CHECK(x.slice(1, 7, 7, huge).sizes() == Shape{3, 0});
  CHECK(x.slice(0, 1, 3, huge - 1).to_vector<double>() == x.select(0, 1).to_vector<double>());
  CHECK(x.slice(1, -huge, huge, 3).sizes() == Shape{3, 3});

  Tensor leaf = counting({3, 7}).requires_grad_();
  leaf.slice(1, 5, 7, huge).sum().backward();
  std::vector<double> expected(21, 0.0);
  for (int row = 0; row < 3; ++row) expected[static_cast<size_t>(row * 7 + 5)] = 1.0;
  CHECK(leaf.grad().to_vector<double>() == expected);
  CHECK_GRADCHECK([&](const tensor_list& t) { return t[0].slice(0, 1, 3, huge); },
                  tensor_list{randn({3, 4}, kFloat64).requires_grad_()});
}
