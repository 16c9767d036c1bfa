// cross_entropy and mse_loss on the CPU: values against double loops written here from the
// definitions, cross_entropy against its composite twin in value and gradient (every
// reduction, ignore_index, label smoothing, class counts from 1 up), gradcheck, half logits,
// and the errors. The GPU's against the CPU's come from the op table (tests/op_table.h).
#include <cmath>
#include <limits>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;
using namespace minigrad::test;

namespace {

// Per-row losses from the definition: -(1 - eps) log p_t - eps * mean_j log p_j, 0 when ignored.
std::vector<double> reference_rows(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index,
                                   double eps) {
  const std::vector<double> x = logits.to_vector<double>();
  const int64_t n = logits.size(0), c = logits.size(1);
  std::vector<double> rows(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = targets[static_cast<size_t>(i)];
    if (t == ignore_index) continue;
    const double* r = x.data() + i * c;
    double max = r[0];
    for (int64_t j = 1; j < c; ++j) max = std::max(max, r[j]);
    double s = 0.0;
    for (int64_t j = 0; j < c; ++j) s += std::exp(r[j] - max);
    const double lse = max + std::log(s);
    double mean_log_p = 0.0;
    for (int64_t j = 0; j < c; ++j) mean_log_p += (r[j] - lse) / static_cast<double>(c);
    rows[static_cast<size_t>(i)] = -(1.0 - eps) * (r[t] - lse) - eps * mean_log_p;
  }
  return rows;
}

std::vector<int64_t> random_targets(int64_t n, int64_t classes, int64_t ignore_index, bool with_ignored) {
  std::vector<int64_t> t = randint(classes, {n}).to_vector<int64_t>();
  if (with_ignored)
    for (size_t i = 0; i < t.size(); i += 3) t[i] = ignore_index;
  return t;
}

}  // namespace

TEST_CASE("cross_entropy: values against the definition, every reduction, ignore_index, label smoothing") {
  manual_seed(1200);
  for (int64_t classes : {1, 2, 7, 1000}) {
    for (double eps : {0.0, 0.1}) {
      for (bool with_ignored : {false, true}) {
        CAPTURE(classes);
        CAPTURE(eps);
        CAPTURE(with_ignored);
        const int64_t n = 10;
        const Tensor x = randn({n, classes}, kFloat64) * 3.0;
        const std::vector<int64_t> t = random_targets(n, classes, -100, with_ignored);
        const Tensor targets = from_vector<int64_t>(t, {n});
        const std::vector<double> rows = reference_rows(x, t, -100, eps);
        double total = 0.0, counted = 0.0;
        for (size_t i = 0; i < rows.size(); ++i) {
          total += rows[i];
          counted += t[i] != -100 ? 1.0 : 0.0;
        }
        CHECK_ALLCLOSE(cross_entropy(x, targets, -100, eps, Reduction::None), from_vector(rows, {n}), 1e-12, 1e-12);
        CHECK(cross_entropy(x, targets, -100, eps, Reduction::Sum).item<double>() == doctest::Approx(total));
        CHECK(cross_entropy(x, targets, -100, eps).item<double>() == doctest::Approx(total / counted));
      }
    }
  }
}

TEST_CASE("cross_entropy: against its twin in value and gradient") {
  manual_seed(1201);
  for (int64_t classes : {1, 3, 65536}) {
    for (Reduction reduction : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      CAPTURE(classes);
      const int64_t n = classes > 1000 ? 3 : 9;
      const Tensor x = randn({n, classes}, kFloat64);
      const Tensor targets = from_vector<int64_t>(random_targets(n, classes, 5, true), {n});
      const Tensor dy = reduction == Reduction::None ? randn({n}, kFloat64) : full({}, 1.7, kFloat64);
      auto run = [&](bool fused) {
        const Tensor leaf = x.detach().requires_grad_();
        const Tensor loss = fused ? cross_entropy(leaf, targets, 5, 0.05, reduction)
                                  : composite::cross_entropy(leaf, targets, 5, 0.05, reduction);
        loss.backward(dy);
        return tensor_list{loss.detach(), leaf.grad()};
      };
      const tensor_list f = run(true), t = run(false);
      CHECK_ALLCLOSE(f[0], t[0], 1e-12, 1e-12);
      CHECK_ALLCLOSE(f[1], t[1], 1e-12, 1e-12);
    }
  }
}

TEST_CASE("cross_entropy: gradcheck in float64; once differentiable") {
  manual_seed(1202);
  const Tensor x = randn({4, 5}, kFloat64).requires_grad_();
  const Tensor targets = from_vector<int64_t>({4, -100, 0, 2}, {4});
  CHECK_GRADCHECK([&](const tensor_list& in) { return cross_entropy(in[0], targets, -100, 0.3); }, (tensor_list{x}));
  const Tensor loss = cross_entropy(x, targets);
  const tensor_list first = autograd::grad({loss}, {x}, {}, std::nullopt, /*create_graph=*/true);
  CHECK_THROWS_CONTAINING((first[0] * first[0]).sum().backward(), "CrossEntropy.backward is once differentiable");
}

TEST_CASE("cross_entropy: every row ignored gives NaN with Mean (0 / 0, as PyTorch) and 0 with Sum; the gradient "
          "is 0 with both") {
  const Tensor x = randn({2, 3}, kFloat64).requires_grad_();
  const Tensor targets = from_vector<int64_t>({-100, -100}, {2});
  const Tensor mean_loss = cross_entropy(x, targets);
  CHECK(std::isnan(mean_loss.item<double>()));
  mean_loss.backward();
  CHECK(equal(x.grad(), zeros({2, 3}, kFloat64)));
  Tensor(x).mutable_grad() = Tensor();
  const Tensor total = cross_entropy(x, targets, -100, 0.0, Reduction::Sum);
  CHECK(total.item<double>() == 0.0);
  total.backward();
  CHECK(equal(x.grad(), zeros({2, 3}, kFloat64)));
}

TEST_CASE("cross_entropy: bfloat16 and float16 logits, computed in float32") {
  manual_seed(1203);
  const Tensor x = randn({6, 11}, kFloat64);
  const Tensor targets = from_vector<int64_t>({0, 10, 3, 3, 7, 1}, {6});
  const Tensor expected = cross_entropy(x, targets);
  for (DType half : {kBFloat16, kFloat16}) {
    CAPTURE(half);
    const Tensor leaf = x.to(half).requires_grad_();
    const Tensor loss = cross_entropy(leaf, targets);
    CHECK(loss.dtype() == half);
    CHECK(loss.to(kFloat64).item<double>() == doctest::Approx(expected.item<double>()).epsilon(2e-2));
    loss.backward();
    CHECK(leaf.grad().dtype() == half);
  }
}

TEST_CASE("mse_loss: the mean, the sum and each element of (input - target)^2") {
  manual_seed(1204);
  const Tensor a = randn({3, 4}, kFloat64), b = randn({3, 4}, kFloat64);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> squares;
  double total = 0.0;
  for (size_t i = 0; i < av.size(); ++i) {
    squares.push_back((av[i] - bv[i]) * (av[i] - bv[i]));
    total += squares.back();
  }
  CHECK_ALLCLOSE(mse_loss(a, b, Reduction::None), from_vector(squares, {3, 4}), 1e-14, 1e-14);
  CHECK(mse_loss(a, b, Reduction::Sum).item<double>() == doctest::Approx(total));
  CHECK(mse_loss(a, b).item<double>() == doctest::Approx(total / 12.0));
}

TEST_CASE("losses: errors name the op and the argument") {
  const Tensor x = randn({3, 4});
  CHECK_THROWS_CONTAINING(cross_entropy(x, zeros({3})), "cross_entropy: argument 'target' must hold int64 class indices");
  CHECK_THROWS_CONTAINING(cross_entropy(x, zeros({2}, kInt64)), "cross_entropy: expected 'input' [N, C] and 'target' [N]");
  CHECK_THROWS_CONTAINING(cross_entropy(x, from_vector<int64_t>({0, 4, 1}, {3})),
                          "cross_entropy: a target is outside [0, 4) and is not ignore_index (-100)");
  CHECK_THROWS_CONTAINING(cross_entropy(x, zeros({3}, kInt64), -100, 1.5), "label_smoothing must be in [0, 1], got 1.5");
  CHECK_THROWS_CONTAINING(composite::cross_entropy(x, zeros({3}, kInt64), -100, -0.1), "label_smoothing");
  CHECK_THROWS_CONTAINING(mse_loss(x, randn({4, 3})), "mse_loss: 'input' has shape [3, 4] and 'target' [4, 3]");
}
