// The in-place ops added for LibTorch's spellings (sub_, div_, clamp_, relu_, detach_,
// set_requires_grad) and item()'s Scalar, on the CPU and, where there is one, the GPU.
// add_, mul_, fill_ and friends are tested with the elementwise suites.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tests/cuda_test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

using Update = std::function<void(Tensor&)>;

// Applies `update` to a copy of x (on `device`, viewed through `view`), and checks that it
// wrote `expected` (computed from x's values by the caller), went through the view into the
// base, and bumped the version once.
void check_update(const Tensor& x, Device device, const std::function<Tensor(const Tensor&)>& view,
                  const Update& update, const std::vector<double>& expected) {
  Tensor base = x.to(device).clone();
  Tensor self = view(base);
  const uint64_t version = self.version();
  update(self);
  CHECK(self.version() == version + 1);
  CHECK(self.device() == device);
  const std::vector<double> got = self.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(expected[i])) {
      CHECK(std::isnan(got[i]));
    } else {
      CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-12));
    }
  }
  // Through the view into the base: the base's values in the view's positions changed.
  CHECK(view(base).to_vector<double>() == got);
}

std::vector<double> map_values(const Tensor& t, const std::function<double(double)>& f) {
  std::vector<double> v = t.to_vector<double>();
  for (double& e : v) e = f(e);
  return v;
}

std::vector<double> zip_values(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  const std::vector<double> u = a.to_vector<double>();
  const std::vector<double> w = b.expand(a.sizes()).to_vector<double>();
  std::vector<double> out(u.size());
  for (size_t i = 0; i < u.size(); ++i) out[i] = f(u[i], w[i]);
  return out;
}

void check_all_updates(Device device) {
  manual_seed(11);
  const Tensor x = randn({5, 6}, kFloat64);
  const Tensor row = randn({6}, kFloat64).to(device);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> views = {
      {"whole", [](const Tensor& t) { return t; }},
      {"transposed", [](const Tensor& t) { return t.t(); }},
      {"every other column", [](const Tensor& t) { return t.slice(1, 0, 6, 2); }}};
  for (const auto& [name, view] : views) {
    INFO("view: " << std::string(name));
    const Tensor xv = view(x);
    const Tensor rowv = row.slice(0, 0, xv.size(-1)).cpu();
    const Tensor divisor = rand({xv.size(-1)}, kFloat64) + 0.5;  // away from 0
    check_update(x, device, view, [&](Tensor& t) { t.sub_(rowv.to(device), 0.5); },
                 zip_values(xv, rowv, [](double u, double v) { return u - 0.5 * v; }));
    check_update(x, device, view, [](Tensor& t) { t.sub_(1.25); }, map_values(xv, [](double u) { return u - 1.25; }));
    check_update(x, device, view, [&](Tensor& t) { t.div_(divisor.to(device)); },
                 zip_values(xv, divisor, [](double u, double v) { return u / v; }));
    check_update(x, device, view, [](Tensor& t) { t.div_(-4.0); }, map_values(xv, [](double u) { return u / -4.0; }));
    check_update(x, device, view, [](Tensor& t) { t.clamp_(-0.5, 0.25); },
                 map_values(xv, [](double u) { return std::min(std::max(u, -0.5), 0.25); }));
    check_update(x, device, view, [](Tensor& t) { t.clamp_(std::nullopt, 0.25); },
                 map_values(xv, [](double u) { return std::min(u, 0.25); }));
    check_update(x, device, view, [](Tensor& t) { t.clamp_min_(-0.5); },
                 map_values(xv, [](double u) { return std::max(u, -0.5); }));
    check_update(x, device, view, [](Tensor& t) { t.clamp_max_(0.5); },
                 map_values(xv, [](double u) { return std::min(u, 0.5); }));
    check_update(x, device, view, [](Tensor& t) { t.relu_(); }, map_values(xv, [](double u) { return u > 0 ? u : 0.0; }));
  }
  // int64: sub_ works (and wraps as add_ does); true division and clamp need floating point.
  Tensor n = from_vector<int64_t>({7, -3, 10}, {3}).to(device);
  n.sub_(from_vector<int64_t>({2, 2, 2}, {3}).to(device), 3);
  CHECK(n.to_vector<int64_t>() == std::vector<int64_t>{1, -9, 4});
  n.sub_(1.0);
  CHECK(n.to_vector<int64_t>() == std::vector<int64_t>{0, -10, 3});
  CHECK_THROWS_CONTAINING(n.div_(2.0), "div_: argument 'self' has dtype int64");
  CHECK_THROWS_CONTAINING(n.clamp_(0.0, 1.0), "clamp_: argument 'self' has dtype int64");
  CHECK_THROWS_CONTAINING(n.sub_(0.5), "sub_: argument 'other' is 0.5, which an int64 tensor cannot hold");
  // NaN stays NaN through clamp_ and relu_, as through clamp and relu.
  Tensor with_nan = from_vector<double>({std::nan(""), -1.0, 2.0}, {3}).to(device);
  with_nan.clamp_(-0.5, 0.5);
  CHECK(std::isnan(with_nan.to_vector<double>()[0]));
  with_nan.relu_();
  CHECK(std::isnan(with_nan.to_vector<double>()[0]));
  CHECK(with_nan.to_vector<double>()[1] == 0.0);
  // The half types and float32 go through the same kernels.
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    if (device.is_cpu() && dt != kFloat32) continue;
    INFO("dtype: " << std::string(dtype_name(dt)));
    Tensor h = from_vector<double>({-2.0, -0.5, 0.75, 3.0}, {4}).to(dt).to(device);
    h.relu_().sub_(0.25).clamp_(std::nullopt, 1.0).div_(2.0);
    CHECK(h.to_vector<double>() == std::vector<double>{-0.125, -0.125, 0.25, 0.5});
  }
  // Empty tensors: nothing to write, still a version bump.
  Tensor empty_tensor = empty({0, 3}, TensorOptions(kFloat32).device(device));
  const uint64_t v = empty_tensor.version();
  empty_tensor.relu_();
  CHECK(empty_tensor.version() == v + 1);
}

void check_recording_refused(Device device) {
  Tensor w = randn({3}, TensorOptions(kFloat32).device(device).requires_grad(true));
  CHECK_THROWS_CONTAINING(w.sub_(1.0), "sub_: in-place ops on a tensor that requires grad are not recorded");
  CHECK_THROWS_CONTAINING(w.div_(2.0), "use div(), or update under NoGradGuard");
  CHECK_THROWS_CONTAINING(w.clamp_(0.0, 1.0), "clamp_");
  CHECK_THROWS_CONTAINING(w.relu_(), "relu_");
  {
    NoGradGuard no_grad;  // an optimizer's step
    w.sub_(randn({3}, TensorOptions(kFloat32).device(device)), 0.1).clamp_(-1.0, 1.0);
  }
  Tensor plain = randn({3}, TensorOptions(kFloat32).device(device));
  CHECK_THROWS_CONTAINING(plain.clamp_(std::nullopt, std::nullopt), "clamp_: at least one of 'min' and 'max'");
  CHECK_THROWS_CONTAINING(plain.sub_(randn({4}, TensorOptions(kFloat32).device(device))),
                          "sub_: argument 'other' of shape [4] does not broadcast to the shape [3]");
}

}  // namespace

TEST_CASE("sub_, div_, clamp_, relu_: values, through views, one version bump each") { check_all_updates(kCPU); }

TEST_CASE("sub_, div_, clamp_, relu_: refused while recording, allowed under NoGradGuard; bad arguments") {
  check_recording_refused(kCPU);
}

TEST_CASE("cuda sub_, div_, clamp_, relu_: the CPU's values, through views" * doctest::skip(!cuda_is_available())) {
  check_all_updates(kGpu);
  check_recording_refused(kGpu);
}

TEST_CASE("detach_: the tensor itself leaves the graph; the graph already built still backpropagates") {
  Tensor x = randn({4}, kFloat64).requires_grad_();
  Tensor y = x * 2.0;
  Tensor z = y * y;  // recorded with y's history
  Tensor same_y = y;  // another handle to the same tensor
  y.detach_();
  CHECK(y.is_leaf());
  CHECK_FALSE(y.requires_grad());
  CHECK(same_y.grad_fn() == nullptr);
  CHECK_FALSE((y * 3.0).requires_grad());
  z.sum().backward();  // through the graph recorded before detach_
  CHECK(allclose(x.grad(), 8.0 * x.detach()));
  // A leaf that required grad stops requiring it.
  Tensor leaf = randn({2}).requires_grad_();
  leaf.detach_();
  CHECK_FALSE(leaf.requires_grad());
}

TEST_CASE("set_requires_grad is requires_grad_ under LibTorch's name") {
  Tensor x = randn({2});
  CHECK(&x.set_requires_grad(true) == &x);
  CHECK(x.requires_grad());
  x.set_requires_grad(false);
  CHECK_FALSE(x.requires_grad());
}

TEST_CASE("item() gives a Scalar of the tensor's kind; item<T>() converts") {
  const Scalar f = scalar_tensor(2.5, kFloat64).item();
  CHECK(f.isFloatingPoint());
  CHECK(f.toDouble() == 2.5);
  CHECK(f.toFloat() == 2.5f);
  CHECK(f.toBool());
  CHECK_THROWS_CONTAINING(f.toLong(), "Scalar::toLong: 2.5 has no int64 value");
  CHECK(scalar_tensor(-3.0, kFloat32).item().toLong() == -3);
  CHECK(scalar_tensor(1.5, kBFloat16).item().toDouble() == 1.5);
  // int64 stays exact past 2^53, where a double would round.
  const int64_t big = (int64_t{1} << 53) + 1;
  const Scalar n = from_vector<int64_t>({big}, {1}).item();
  CHECK(n.isIntegral());
  CHECK_FALSE(n.isFloatingPoint());
  CHECK(n.toLong() == big);
  CHECK(n.to<int64_t>() == big);
  CHECK(fmt::format("{}", n) == "9007199254740993");
  const Scalar b = (scalar_tensor(1.0) > 0.0).item();
  CHECK(b.isBoolean());
  CHECK(b.isIntegral(/*include_bool=*/true));
  CHECK(b.toBool());
  CHECK(b.toLong() == 1);
  CHECK(fmt::format("{}", b) == "true");
  CHECK(fmt::format("{}", f) == "2.5");
  CHECK(Scalar(3) == Scalar(3.0));
  CHECK(Scalar(int64_t{-1}) != Scalar(1));
  CHECK(scalar_tensor(0.75).item<float>() == 0.75f);
  CHECK_THROWS_CONTAINING(randn({2}).item(), "item: only a one-element tensor has an item");
  if (cuda_is_available()) CHECK(scalar_tensor(4.0, kFloat64).to(kGpu).item().toDouble() == 4.0);
}
