// Views (view, reshape, transpose, t, permute, slice, select, expand, squeeze, unsqueeze,
// and narrow, flatten, unflatten, movedim, swapaxes, mT, chunk, split, unbind), copies (to,
// clone, contiguous) and the joins and rearrangements (cat, stack, repeat, flip, tril, triu).
// Expected values map each output multi-index to the input's by hand
// (tests/reference_indexing.h); storage sharing is checked by writing through a view.
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

// ---- more views and joins: narrow, flatten, unflatten, *_as, movedim, swapaxes, mT, chunk,
// split, unbind, cat, stack, repeat, flip, tril, triu ----

namespace {

// A float64 tensor of `sizes` whose element at index i is value_at(i).
Tensor reference_tensor(const Shape& sizes, const std::function<double(const Shape&)>& value_at) {
  std::vector<double> out;
  for (int64_t flat = 0; flat < reference_numel(sizes); ++flat) out.push_back(value_at(unravel(flat, sizes)));
  return float64_tensor(out, sizes);
}

// x's element at a multi-index, from its row-major values.
double element(const std::vector<double>& values, const Shape& sizes, const Shape& index) {
  return values[static_cast<size_t>(ravel(index, sizes))];
}

// A [3, 5, 4] float64 tensor read through a transpose: non-contiguous, random, never zero.
Tensor noncontiguous_input(uint64_t seed) {
  manual_seed(seed);
  return add(rand({3, 4, 5}, kFloat64), 0.5).transpose(1, 2);
}

}  // namespace

TEST_CASE("narrow is slice(dim, start, start + length), negative start counting from the end") {
  const Tensor x = counting({3, 7});
  const Tensor n = x.narrow(1, 2, 3);
  CHECK(n.sizes() == Shape{3, 3});
  CHECK(shares_storage(n, x));
  CHECK_ALLCLOSE(n, reference_view(x, {3, 3}, [](const Shape& i) { return Shape{i[0], i[1] + 2}; }), 0.0, 0.0);
  CHECK_ALLCLOSE(x.narrow(-1, -3, 2), x.slice(1, 4, 6), 0.0, 0.0);
  CHECK_ALLCLOSE(narrow(x, 0, 1, 2), x.slice(0, 1, 3), 0.0, 0.0);
  CHECK(x.narrow(1, 7, 0).sizes() == Shape{3, 0});
  CHECK_THROWS_CONTAINING(x.narrow(1, 8, 0), "narrow: start 8 is out of range for dimension 1 with size 7");
  CHECK_THROWS_CONTAINING(x.narrow(1, -8, 1), "narrow: start -8 is out of range");
  CHECK_THROWS_CONTAINING(x.narrow(1, 5, 3), "narrow: start (5) + length (3) exceeds the size 7 of dimension 1");
  CHECK_THROWS_CONTAINING(x.narrow(1, 0, -1), "narrow: length must be non-negative, got -1");
  CHECK_THROWS_CONTAINING(x.narrow(2, 0, 1), "narrow: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(scalar_tensor(1.0).narrow(0, 0, 1), "narrow: cannot be applied to a 0-d tensor");
}

TEST_CASE("flatten merges a range of dims, unflatten splits one; both are views") {
  const Tensor x = counting({2, 3, 4, 5});
  CHECK(x.flatten(1).sizes() == Shape{2, 60});
  CHECK(x.flatten(1, 2).sizes() == Shape{2, 12, 5});
  CHECK(x.flatten(-3, -2).sizes() == Shape{2, 12, 5});
  CHECK(flatten(x).sizes() == Shape{120});
  CHECK(x.flatten(0, -1).to_vector<double>() == x.to_vector<double>());
  CHECK(shares_storage(x.flatten(1, 2), x));
  CHECK(x.flatten(2, 2).is_same(x));  // one dim: the tensor itself, as in PyTorch
  CHECK(scalar_tensor(2.0).flatten(0).sizes() == Shape{1});
  CHECK(scalar_tensor(2.0).flatten().sizes() == Shape{1});
  // A transposed input whose merged dims are not one stride run: a copy with the same values.
  const Tensor t = x.transpose(1, 2);
  CHECK(t.flatten(1, 2).to_vector<double>() == t.to_vector<double>());
  CHECK_THROWS_CONTAINING(x.flatten(2, 1), "flatten: start_dim (2) cannot come after end_dim (1)");
  CHECK_THROWS_CONTAINING(x.flatten(4), "flatten: dim 4 is out of range");

  const Tensor u = x.unflatten(2, {2, -1});
  CHECK(u.sizes() == Shape{2, 3, 2, 2, 5});
  CHECK(shares_storage(u, x));
  CHECK(u.to_vector<double>() == x.to_vector<double>());
  CHECK(x.unflatten(-1, {5, 1}).sizes() == Shape{2, 3, 4, 5, 1});
  CHECK(t.unflatten(1, {2, 2}).to_vector<double>() == t.to_vector<double>());  // a view of a transpose too
  CHECK(shares_storage(t.unflatten(1, {2, 2}), x));
  CHECK_THROWS_CONTAINING(x.unflatten(1, {2, 2}), "unflatten: shape [2, 2] is invalid for an input of 3 elements");
  CHECK_THROWS_CONTAINING(x.unflatten(1, {}), "unflatten: the argument 'sizes' must be non-empty");
  CHECK_THROWS_CONTAINING(scalar_tensor(1.0).unflatten(0, {1}), "unflatten: cannot be applied to a 0-d tensor");
}

TEST_CASE("view_as, reshape_as and expand_as take the other tensor's sizes") {
  const Tensor x = counting({2, 6});
  const Tensor other = zeros({3, 4});
  CHECK(x.view_as(other).sizes() == Shape{3, 4});
  CHECK(shares_storage(x.view_as(other), x));
  CHECK(x.t().reshape_as(other).to_vector<double>() == x.t().contiguous().to_vector<double>());
  CHECK(counting({1, 4}).expand_as(other).sizes() == Shape{3, 4});
  CHECK_THROWS_CONTAINING(x.view_as(zeros({5})), "view: shape [5] is invalid for an input of 12 elements");
  CHECK_THROWS_CONTAINING(x.expand_as(other), "expand: the expanded size 3 must match the existing size 2");
  CHECK_THROWS_CONTAINING(x.view_as(Tensor()), "view_as: argument 'other' is an undefined tensor");
}

TEST_CASE("movedim, swapaxes, swapdims and mT are permutations of the dims") {
  const Tensor x = counting({2, 3, 4, 5});
  const Tensor m = x.movedim(1, -1);
  CHECK(m.sizes() == Shape{2, 4, 5, 3});
  CHECK(shares_storage(m, x));
  CHECK_ALLCLOSE(m, reference_view(x, {2, 4, 5, 3}, [](const Shape& i) { return Shape{i[0], i[3], i[1], i[2]}; }),
                 0.0, 0.0);
  // source 0 -> 2 and 3 -> 0; dims 1 and 2 fill positions 1 and 3 in their order.
  const Tensor ml = movedim(x, {0, 3}, {2, 0});
  CHECK(ml.sizes() == Shape{5, 3, 2, 4});
  CHECK_ALLCLOSE(ml, reference_view(x, {5, 3, 2, 4}, [](const Shape& i) { return Shape{i[2], i[1], i[3], i[0]}; }),
                 0.0, 0.0);
  CHECK(x.movedim(Shape{}, Shape{}).sizes() == x.sizes());
  CHECK(scalar_tensor(1.0).movedim(0, -1).dim() == 0);
  CHECK_THROWS_CONTAINING(x.movedim({0, 1}, {2}), "movedim: 'source' [0, 1] and 'destination' [2] must have the same");
  CHECK_THROWS_CONTAINING(x.movedim({0, -4}, {1, 2}), "movedim: repeated dim 0 in 'source'");
  CHECK_THROWS_CONTAINING(x.movedim({0, 1}, {2, -2}), "movedim: repeated dim 2 in 'destination'");
  CHECK_THROWS_CONTAINING(x.movedim(4, 0), "movedim: dim 4 is out of range");

  CHECK_ALLCLOSE(x.swapaxes(0, -1), x.transpose(0, 3), 0.0, 0.0);
  CHECK_ALLCLOSE(swapdims(x, 1, 2), x.transpose(1, 2), 0.0, 0.0);
  CHECK_ALLCLOSE(swapaxes(x, 1, 2), x.transpose(1, 2), 0.0, 0.0);
  CHECK_THROWS_CONTAINING(x.swapaxes(0, 4), "swapaxes: dim 4 is out of range");
  CHECK_THROWS_CONTAINING(x.swapdims(-5, 0), "swapdims: dim -5 is out of range");
  CHECK_ALLCLOSE(x.mT(), x.transpose(2, 3), 0.0, 0.0);
  CHECK(counting({3, 4}).mT().sizes() == Shape{4, 3});
  CHECK_THROWS_CONTAINING(counting({3}).mT(), "mT: expects 'self' to have at least 2 dimensions, got 1-D");
}

TEST_CASE("chunk, split and unbind give views of the pieces, in PyTorch's sizes") {
  const Tensor x = counting({3, 5});
  auto sizes_along = [](const tensor_list& pieces, int64_t dim) {
    Shape s;
    for (const Tensor& p : pieces) s.push_back(p.size(dim));
    return s;
  };
  CHECK(sizes_along(x.chunk(2, 1), 1) == Shape{3, 2});
  CHECK(sizes_along(x.chunk(4, 1), 1) == Shape{2, 2, 1});
  CHECK(sizes_along(counting({6}).chunk(4), 0) == Shape{2, 2, 2});  // fewer pieces than asked for
  CHECK(sizes_along(x.chunk(9, 1), 1) == Shape{1, 1, 1, 1, 1});
  CHECK(sizes_along(zeros({2, 0}).chunk(3, 1), 1) == Shape{0, 0, 0});
  CHECK(sizes_along(x.split(2, 1), 1) == Shape{2, 2, 1});
  CHECK(sizes_along(x.split(5, 1), 1) == Shape{5});
  CHECK(sizes_along(x.split(7, -1), 1) == Shape{5});
  CHECK(sizes_along(zeros({0, 2}).split(0), 0) == Shape{0});
  CHECK(sizes_along(x.split({1, 0, 4}, 1), 1) == Shape{1, 0, 4});
  CHECK(sizes_along(split(x, {2, 1}, 0), 0) == Shape{2, 1});
  CHECK(sizes_along(split(x, 2, 0), 0) == Shape{2, 1});
  CHECK(sizes_along(split_with_sizes(x, {4, 1}, 1), 1) == Shape{4, 1});
  // A braced list of one size is the list form (the sizes must add up), not a split size.
  CHECK(x.split({5}, 1).size() == 1);
  CHECK_THROWS_CONTAINING(x.split({2}, 1), "split_with_sizes: expects split_sizes [2] to sum exactly to 5");

  int64_t start = 0;
  for (const Tensor& piece : x.split({1, 3, 1}, 1)) {
    CHECK(shares_storage(piece, x));
    CHECK_ALLCLOSE(piece, x.slice(1, start, start + piece.size(1)), 0.0, 0.0);
    start += piece.size(1);
  }
  const Tensor t = counting({4, 3}).t();  // non-contiguous
  const tensor_list rows = chunk(t, 2, 1);
  CHECK_ALLCLOSE(rows[1], t.slice(1, 2, 4), 0.0, 0.0);

  const tensor_list columns = x.unbind(1);
  REQUIRE(columns.size() == 5);
  for (int64_t i = 0; i < 5; ++i) {
    CHECK(columns[static_cast<size_t>(i)].sizes() == Shape{3});
    CHECK(shares_storage(columns[static_cast<size_t>(i)], x));
    CHECK_ALLCLOSE(columns[static_cast<size_t>(i)], x.select(1, i), 0.0, 0.0);
  }
  CHECK(unbind(x).size() == 3);
  CHECK(zeros({2, 0}).unbind(1).empty());

  CHECK_THROWS_CONTAINING(x.chunk(0), "chunk: expects 'chunks' to be greater than 0, got 0");
  CHECK_THROWS_CONTAINING(x.split(0, 1), "split: split_size can be 0 only for a dimension of size 0, not 5");
  CHECK_THROWS_CONTAINING(x.split(-1, 1), "split: split_size must be non-negative, got -1");
  CHECK_THROWS_CONTAINING(x.split({2, -1, 4}, 1), "split_with_sizes: split_sizes [2, -1, 4] holds a negative size");
  CHECK_THROWS_CONTAINING(x.split(1, 2), "split: dim 2 is out of range");
  CHECK_THROWS_CONTAINING(scalar_tensor(1.0).unbind(0), "unbind: cannot be applied to a 0-d tensor");
  CHECK_THROWS_CONTAINING(scalar_tensor(1.0).chunk(1), "chunk: cannot be applied to a 0-d tensor");
}

TEST_CASE("cat joins along a dim, any layouts and dtypes, skipping legacy empty 1-D tensors") {
  manual_seed(500);
  const Tensor a = randn({2, 3, 4}, kFloat64);
  const Tensor b = randn({4, 2, 3}, kFloat64).permute({1, 2, 0});  // [2, 3, 4], non-contiguous
  const Tensor c = randn({2, 5, 4}, kFloat64).slice(1, 0, 5, 2);    // [2, 3, 4], strided
  for (int64_t dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    const Tensor out = cat({a, b, c}, dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape expected_sizes = a.sizes();
    expected_sizes[static_cast<size_t>(d)] *= 3;
    CHECK(out.sizes() == expected_sizes);
    CHECK(out.is_contiguous());
    const std::vector<std::vector<double>> values = {a.to_vector<double>(), b.to_vector<double>(),
                                                     c.to_vector<double>()};
    const Tensor expected = reference_tensor(expected_sizes, [&](const Shape& i) {
      Shape j = i;
      const int64_t which = i[static_cast<size_t>(d)] / a.size(d);
      j[static_cast<size_t>(d)] = i[static_cast<size_t>(d)] % a.size(d);
      return element(values[static_cast<size_t>(which)], a.sizes(), j);
    });
    CHECK_ALLCLOSE(out, expected, 0.0, 0.0);
  }
  // Different sizes along dim, one input empty along it.
  const Tensor joined = cat({a, zeros({2, 0, 4}, kFloat64), a.slice(1, 1, 3)}, 1);
  CHECK(joined.sizes() == Shape{2, 5, 4});
  CHECK_ALLCLOSE(joined.slice(1, 3, 5), a.slice(1, 1, 3), 0.0, 0.0);
  // One tensor: a copy.
  const Tensor single = cat({a}, 0);
  CHECK(!shares_storage(single, a));
  CHECK_ALLCLOSE(single, a, 0.0, 0.0);
  // Integer and bool tensors.
  CHECK(cat({arange(3), arange(2)}).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 0, 1});
  CHECK(cat({gt(arange(3), 1.0), lt(arange(2), 1.0)}).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true, false});
  // A 1-D tensor of size 0 is skipped whatever the other shapes; all of them give one.
  const Tensor legacy = cat({zeros({0}, kFloat64), a, zeros({0}, kFloat64)}, 1);
  CHECK_ALLCLOSE(legacy, a, 0.0, 0.0);
  CHECK(cat({zeros({0}), zeros({0})}).sizes() == Shape{0});
  CHECK(cat({zeros({2, 0}), zeros({3, 0})}).sizes() == Shape{5, 0});

  CHECK_THROWS_CONTAINING(cat({}, 0), "cat: expected a non-empty list of tensors");
  CHECK_THROWS_CONTAINING(cat({a, Tensor()}, 0), "cat: the tensor at position 1 is undefined");
  CHECK_THROWS_CONTAINING(cat({a, a, a.to(kFloat32)}, 0),
                          "cat: expected all tensors to have dtype float64 (that of the tensor at position 0), but the "
                          "tensor at position 2 has dtype float32");
  CHECK_THROWS_CONTAINING(cat({zeros({0}), a}, 0), "the tensor at position 1 has dtype float64");  // skipped ones too
  CHECK_THROWS_CONTAINING(cat({a, randn({2, 4, 4}, kFloat64)}, 0),
                          "cat: sizes of tensors must match except in dimension 0: expected size 3 but got size 4 for "
                          "the tensor at position 1 in dimension 1");
  CHECK_THROWS_CONTAINING(cat({a, randn({2, 3}, kFloat64)}, 0),
                          "cat: tensors must have the same number of dimensions: the tensor at position 0 has 3, the "
                          "one at position 1 has 2");
  CHECK_THROWS_CONTAINING(cat({scalar_tensor(1.0), scalar_tensor(2.0)}, 0),
                          "cat: the tensor at position 0 is 0-d, and a 0-d tensor cannot be concatenated");
  CHECK_THROWS_CONTAINING(cat({a, a}, 3), "cat: dim 3 is out of range");
}

TEST_CASE("stack joins tensors of one shape along a new dim") {
  manual_seed(501);
  const Tensor a = randn({3, 4}, kFloat64);
  const Tensor b = randn({4, 3}, kFloat64).t();
  for (int64_t dim : {0, 1, 2, -1, -3}) {
    CAPTURE(dim);
    const Tensor out = stack({a, b}, dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    Shape expected_sizes = a.sizes();
    expected_sizes.insert(expected_sizes.begin() + d, 2);
    CHECK(out.sizes() == expected_sizes);
    const std::vector<std::vector<double>> values = {a.to_vector<double>(), b.to_vector<double>()};
    const Tensor expected = reference_tensor(expected_sizes, [&](const Shape& i) {
      Shape j = i;
      j.erase(j.begin() + d);
      return element(values[static_cast<size_t>(i[static_cast<size_t>(d)])], a.sizes(), j);
    });
    CHECK_ALLCLOSE(out, expected, 0.0, 0.0);
  }
  CHECK(stack({scalar_tensor(1.0), scalar_tensor(2.0)}).to_vector<float>() == std::vector<float>{1.0f, 2.0f});
  CHECK(stack({zeros({0}), zeros({0})}, 1).sizes() == Shape{0, 2});
  CHECK_THROWS_CONTAINING(stack({a, a.slice(0, 0, 2)}, 0),
                          "stack: expects each tensor to be of equal size, but got [3, 4] at position 0 and [2, 4] at "
                          "position 1");
  CHECK_THROWS_CONTAINING(stack({a, a.to(kFloat32)}, 0), "stack: expected all tensors to have dtype float64");
  CHECK_THROWS_CONTAINING(stack({a, a}, 3), "stack: dim 3 is out of range");
  CHECK_THROWS_CONTAINING(stack({}, 0), "stack: expected a non-empty list of tensors");
}

TEST_CASE("repeat tiles the tensor, adding leading dims") {
  manual_seed(502);
  const Tensor x = randn({3, 2}, kFloat64).t();  // [2, 3], non-contiguous
  const std::vector<double> values = x.to_vector<double>();
  const Tensor r = x.repeat({2, 2, 3});
  CHECK(r.sizes() == Shape{2, 4, 9});
  CHECK(!shares_storage(r, x));
  CHECK_ALLCLOSE(r, reference_tensor({2, 4, 9}, [&](const Shape& i) {
                   return element(values, {2, 3}, {i[1] % 2, i[2] % 3});
                 }),
                 0.0, 0.0);
  const Tensor same = x.repeat({1, 1});
  CHECK(!shares_storage(same, x));  // always a copy, as in PyTorch
  CHECK_ALLCLOSE(same, x, 0.0, 0.0);
  CHECK(x.repeat({0, 2}).sizes() == Shape{0, 6});
  CHECK(scalar_tensor(4.0).repeat({3}).to_vector<float>() == std::vector<float>{4.0f, 4.0f, 4.0f});
  CHECK(arange(2).repeat({2}).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1});
  CHECK_THROWS_CONTAINING(x.repeat({2}),
                          "repeat: the number of repeats (1) cannot be smaller than the number of dimensions of 'self' "
                          "(2)");
  CHECK_THROWS_CONTAINING(x.repeat({2, -1}), "repeat: repeats [2, -1] holds a negative count -1");
}

TEST_CASE("flip reverses the order along each given dim, in a copy") {
  manual_seed(503);
  const Tensor x = noncontiguous_input(504);  // [3, 5, 4]
  const std::vector<double> values = x.to_vector<double>();
  const Shape sizes = x.sizes();
  const Tensor f = x.flip({0, -1});
  CHECK(f.is_contiguous());
  CHECK(f.strides() == Shape{20, 4, 1});
  CHECK(!shares_storage(f, x));
  CHECK_ALLCLOSE(f, reference_tensor(sizes, [&](const Shape& i) {
                   return element(values, sizes, {2 - i[0], i[1], 3 - i[2]});
                 }),
                 0.0, 0.0);
  CHECK_ALLCLOSE(flip(x, {1}), reference_tensor(sizes, [&](const Shape& i) {
                   return element(values, sizes, {i[0], 4 - i[1], i[2]});
                 }),
                 0.0, 0.0);
  CHECK_ALLCLOSE(x.flip({}), x, 0.0, 0.0);
  CHECK_ALLCLOSE(x.flip({2}).flip({2}), x, 0.0, 0.0);
  CHECK(arange(4).flip({0}).to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1, 0});
  CHECK(lt(arange(3), 1.0).flip({0}).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(scalar_tensor(2.0).flip({0}).item() == 2.0);
  CHECK(zeros({2, 0}).flip({0, 1}).sizes() == Shape{2, 0});
  CHECK_THROWS_CONTAINING(x.flip({0, -3}), "flip: dim 0 appears more than once in the argument 'dims'");
  CHECK_THROWS_CONTAINING(x.flip({3}), "flip: dim 3 is out of range");
}

TEST_CASE("tril and triu keep the elements on and below (above) a diagonal of the last two dims") {
  const Tensor x = noncontiguous_input(505);  // [3, 5, 4]: a batch of 3 matrices 5 x 4
  const std::vector<double> values = x.to_vector<double>();
  const Shape sizes = x.sizes();
  for (int64_t diagonal : std::vector<int64_t>{-6, -2, -1, 0, 1, 3, 4, 100, std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max()}) {
    CAPTURE(diagonal);
    auto kept = [&](bool lower) {
      return reference_tensor(sizes, [&, lower](const Shape& i) {
        const double offset = static_cast<double>(i[2]) - static_cast<double>(i[1]);
        const bool keep = lower ? offset <= static_cast<double>(diagonal) : offset >= static_cast<double>(diagonal);
        return keep ? element(values, sizes, i) : 0.0;
      });
    };
    CHECK_ALLCLOSE(x.tril(diagonal), kept(true), 0.0, 0.0);
    CHECK_ALLCLOSE(triu(x, diagonal), kept(false), 0.0, 0.0);
  }
  CHECK_ALLCLOSE(tril(x), x.tril(0), 0.0, 0.0);
  const Tensor ints = arange(1.0, 10.0, 1.0).view({3, 3});
  CHECK(ints.triu(1).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 3, 0, 0, 6, 0, 0, 0});
  CHECK(gt(ints, 0.0).tril().to_vector<bool>() ==
        std::vector<bool>{true, false, false, true, true, false, true, true, true});
  CHECK(zeros({0, 3}).tril().sizes() == Shape{0, 3});
  CHECK_THROWS_CONTAINING(arange(3).tril(), "tril: expects 'self' to have at least 2 dimensions, got 1-D");
  CHECK_THROWS_CONTAINING(Tensor().triu(), "triu: argument 'self' is an undefined tensor");
}

namespace {

struct JoinCase {
  std::string name;
  std::function<Tensor(const tensor_list&)> fn;
};

// Every new differentiable op, on non-contiguous float64 inputs: a [3, 5, 4] transpose,
// a [3, 2, 4] slice and a [3, 5, 4] tensor read through a permute.
std::vector<JoinCase> join_cases() {
  return {
      {"narrow", [](const tensor_list& t) { return t[0].narrow(1, 1, 3); }},
      {"flatten", [](const tensor_list& t) { return t[0].flatten(1); }},
      {"unflatten", [](const tensor_list& t) { return t[0].unflatten(1, {5, 1}); }},
      {"movedim", [](const tensor_list& t) { return t[0].movedim({0, 2}, {2, 0}); }},
      {"swapaxes", [](const tensor_list& t) { return t[0].swapaxes(0, 2); }},
      {"mT", [](const tensor_list& t) { return t[0].mT(); }},
      {"expand_as", [](const tensor_list& t) { return t[1].narrow(1, 0, 1).expand_as(t[0]); }},
      {"chunk", [](const tensor_list& t) { return t[0].chunk(2, 1)[1]; }},  // one piece: the others get zeros
      {"split + cat", [](const tensor_list& t) {
         const tensor_list p = t[0].split({2, 0, 3}, 1);
         return cat({p[2], p[1], p[0]}, 1);
       }},
      {"unbind + stack", [](const tensor_list& t) { return stack(t[0].unbind(2), 0); }},
      {"cat", [](const tensor_list& t) { return cat({t[0], t[1], t[2]}, 1); }},
      {"cat, legacy empty", [](const tensor_list& t) { return cat({t[1], zeros({0}, kFloat64), t[1]}, -1); }},
      {"stack", [](const tensor_list& t) { return stack({t[0], t[2]}, 3); }},
      {"repeat", [](const tensor_list& t) { return t[1].repeat({2, 1, 3, 1}); }},
      {"flip", [](const tensor_list& t) { return t[0].flip({0, 2}); }},
      {"tril", [](const tensor_list& t) { return t[0].tril(-1); }},
      {"triu", [](const tensor_list& t) { return t[0].triu(1); }},
  };
}

tensor_list join_inputs() {
  manual_seed(506);
  return {noncontiguous_input(507).detach().requires_grad_(),
          add(rand({3, 4, 4}, kFloat64), 0.5).slice(1, 1, 3).detach().requires_grad_(),
          add(rand({5, 4, 3}, kFloat64), 0.5).permute({2, 0, 1}).detach().requires_grad_()};
}

}  // namespace

TEST_CASE("gradcheck and gradgradcheck in float64: the new views and joins, non-contiguous inputs") {
  const tensor_list inputs = join_inputs();
  CHECK(!inputs[0].is_contiguous());
  for (const JoinCase& c : join_cases()) {
    INFO(c.name);
    GradcheckOptions options;
    options.allow_unused = true;  // most cases read one or two of the three inputs
    CHECK_GRADCHECK_OPTS(c.fn, inputs, options);
    const Tensor v = randn(c.fn(inputs).sizes(), kFloat64).requires_grad_();
    // Squared, so that the second derivative is not zero.
    CHECK_GRADGRADCHECK_OPTS([&c](const tensor_list& t) { return c.fn(t) * c.fn(t); }, inputs, tensor_list{v},
                             options);
  }
}

TEST_CASE("gradients of the joins: values by hand and empty inputs") {
  manual_seed(508);
  const Tensor a = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor b = randn({2, 1}, kFloat64).requires_grad_();
  const Tensor e = zeros({0}, kFloat64).requires_grad_();
  const Tensor g = randn({2, 4}, kFloat64);
  cat({a, e, b}, 1).backward(g);
  CHECK_ALLCLOSE(a.grad(), g.slice(1, 0, 3), 0.0, 0.0);
  CHECK_ALLCLOSE(b.grad(), g.slice(1, 3, 4), 0.0, 0.0);
  CHECK(e.grad().sizes() == Shape{0});

  // Empty inputs everywhere: the gradients are empty of the inputs' shapes.
  const Tensor z = zeros({0, 3}, kFloat64).requires_grad_();
  const tensor_list outs = {cat({z, z}, 0), stack({z, z}, 1), z.flip({0, 1}), z.tril(), z.repeat({2, 2}),
                            z.narrow(1, 1, 2), z.flatten(0), z.mT()};
  for (const Tensor& out : outs) {
    const Tensor grad = autograd::grad({out.sum()}, {z})[0];
    CHECK(grad.sizes() == Shape{0, 3});
  }
  // gradcheck and gradgradcheck accept them too (nothing to perturb, no element to compare,
  // but the backward runs and must give gradients of the right shapes).
  const tensor_list empty_inputs = {z, zeros({0, 3}, kFloat64).t().detach().requires_grad_()};
  for (const JoinCase& c : std::vector<JoinCase>{
           {"cat", [](const tensor_list& t) { return cat({t[0], t[1].t()}, 1); }},
           {"stack", [](const tensor_list& t) { return stack({t[0], t[1].t()}, 0); }},
           {"flip", [](const tensor_list& t) { return t[1].flip({0}); }},
           {"triu", [](const tensor_list& t) { return t[1].triu(1); }},
           {"repeat", [](const tensor_list& t) { return t[0].repeat({3, 1}); }},
           {"unbind + stack", [](const tensor_list& t) { return stack(t[0].unbind(1), 0); }},
       }) {
    INFO(c.name);
    GradcheckOptions options;
    options.allow_unused = true;
    CHECK_GRADCHECK_OPTS(c.fn, empty_inputs, options);
    CHECK_GRADGRADCHECK_OPTS(c.fn, empty_inputs, tensor_list{}, options);
  }
  const tensor_list pieces = z.split(1, 1);
  CHECK(pieces.size() == 3);
  CHECK(autograd::grad({pieces[1].sum()}, {z})[0].sizes() == Shape{0, 3});

  // The pieces of split that get no gradient contribute zeros.
  const Tensor x = randn({4, 3}, kFloat64).requires_grad_();
  const tensor_list rows = x.unbind(0);
  (rows[1] * 2.0).sum().backward();
  const Tensor expected = zeros({4, 3}, kFloat64);
  expected.select(0, 1).fill_(2.0);
  CHECK_ALLCLOSE(x.grad(), expected, 0.0, 0.0);
}
