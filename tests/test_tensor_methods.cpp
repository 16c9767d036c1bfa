// The member forms of the public ops (x.exp(), x.sum(1, true), x.add(y, alpha), ...): each
// gives the bits of the function it names, records the same history, and the integer-dim
// overloads of the reductions do not change what a braced list means.
#include <functional>
#include <string>
#include <vector>

#include "tests/test_support.h"

using namespace minigrad;
using minigrad::test::same_bits;

namespace {

struct MemberCase {
  std::string name;
  std::function<Tensor(const Tensor&, const Tensor&)> member;    // x.f(y)
  std::function<Tensor(const Tensor&, const Tensor&)> function;  // f(x, y)
  bool differentiable = true;
};

}  // namespace

TEST_CASE("each member form gives the bits and the history of its function") {
  manual_seed(11);
  // Positive x for log, sqrt and pow; y broadcast along the rows.
  const Tensor x = add(rand({3, 4}, kFloat64), 0.5);
  const Tensor y = randn({4}, kFloat64);
  // Indices for the indexing members: repeated entries, along dim 1 of x.
  const Tensor rows = from_vector<int64_t>({3, 0, 3}, {3});
  const Tensor cols = from_vector<int64_t>({1, 1, 0, 3, 2, 0}, {3, 2});
  const std::vector<MemberCase> cases = {
      {"add", [](auto& a, auto& b) { return a.add(b); }, [](auto& a, auto& b) { return add(a, b); }},
      {"add alpha", [](auto& a, auto& b) { return a.add(b, 2.5); }, [](auto& a, auto& b) { return add(a, mul(b, 2.5)); }},
      {"add scalar", [](auto& a, auto&) { return a.add(1.5); }, [](auto& a, auto&) { return add(a, 1.5); }},
      {"sub", [](auto& a, auto& b) { return a.sub(b); }, [](auto& a, auto& b) { return sub(a, b); }},
      {"sub alpha", [](auto& a, auto& b) { return a.sub(b, -3.0); }, [](auto& a, auto& b) { return sub(a, mul(b, -3.0)); }},
      {"sub scalar", [](auto& a, auto&) { return a.sub(1.5); }, [](auto& a, auto&) { return sub(a, 1.5); }},
      {"mul", [](auto& a, auto& b) { return a.mul(b); }, [](auto& a, auto& b) { return mul(a, b); }},
      {"mul scalar", [](auto& a, auto&) { return a.mul(-2.0); }, [](auto& a, auto&) { return mul(a, -2.0); }},
      {"div", [](auto& a, auto& b) { return a.div(b); }, [](auto& a, auto& b) { return div(a, b); }},
      {"div scalar", [](auto& a, auto&) { return a.div(3.0); }, [](auto& a, auto&) { return div(a, 3.0); }},
      {"neg", [](auto& a, auto&) { return a.neg(); }, [](auto& a, auto&) { return neg(a); }},
      {"exp", [](auto& a, auto&) { return a.exp(); }, [](auto& a, auto&) { return exp(a); }},
      {"log", [](auto& a, auto&) { return a.log(); }, [](auto& a, auto&) { return log(a); }},
      {"sqrt", [](auto& a, auto&) { return a.sqrt(); }, [](auto& a, auto&) { return sqrt(a); }},
      {"erf", [](auto& a, auto&) { return a.erf(); }, [](auto& a, auto&) { return erf(a); }},
      {"tanh", [](auto& a, auto&) { return a.tanh(); }, [](auto& a, auto&) { return tanh(a); }},
      {"sigmoid", [](auto& a, auto&) { return a.sigmoid(); }, [](auto& a, auto&) { return sigmoid(a); }},
      {"abs", [](auto& a, auto& b) { return a.mul(b).abs(); }, [](auto& a, auto& b) { return abs(mul(a, b)); }},
      {"pow scalar", [](auto& a, auto&) { return a.pow(2.5); }, [](auto& a, auto&) { return pow(a, 2.5); }},
      {"pow tensor", [](auto& a, auto& b) { return a.pow(b); }, [](auto& a, auto& b) { return pow(a, b); }},
      {"clamp", [](auto& a, auto&) { return a.clamp(0.7, 1.2); }, [](auto& a, auto&) { return clamp(a, 0.7, 1.2); }},
      {"clamp_min", [](auto& a, auto&) { return a.clamp_min(0.9); }, [](auto& a, auto&) { return clamp_min(a, 0.9); }},
      {"clamp_max", [](auto& a, auto&) { return a.clamp_max(0.9); }, [](auto& a, auto&) { return clamp_max(a, 0.9); }},
      {"eq", [](auto& a, auto& b) { return a.eq(b); }, [](auto& a, auto& b) { return eq(a, b); }, false},
      {"eq scalar", [](auto& a, auto&) { return a.eq(1.0); }, [](auto& a, auto&) { return eq(a, 1.0); }, false},
      {"ne", [](auto& a, auto& b) { return a.ne(b); }, [](auto& a, auto& b) { return ne(a, b); }, false},
      {"ne scalar", [](auto& a, auto&) { return a.ne(1.0); }, [](auto& a, auto&) { return ne(a, 1.0); }, false},
      {"lt", [](auto& a, auto& b) { return a.lt(b); }, [](auto& a, auto& b) { return lt(a, b); }, false},
      {"lt scalar", [](auto& a, auto&) { return a.lt(1.0); }, [](auto& a, auto&) { return lt(a, 1.0); }, false},
      {"le", [](auto& a, auto& b) { return a.le(b); }, [](auto& a, auto& b) { return le(a, b); }, false},
      {"le scalar", [](auto& a, auto&) { return a.le(1.0); }, [](auto& a, auto&) { return le(a, 1.0); }, false},
      {"gt", [](auto& a, auto& b) { return a.gt(b); }, [](auto& a, auto& b) { return gt(a, b); }, false},
      {"gt scalar", [](auto& a, auto&) { return a.gt(1.0); }, [](auto& a, auto&) { return gt(a, 1.0); }, false},
      {"ge", [](auto& a, auto& b) { return a.ge(b); }, [](auto& a, auto& b) { return ge(a, b); }, false},
      {"ge scalar", [](auto& a, auto&) { return a.ge(1.0); }, [](auto& a, auto&) { return ge(a, 1.0); }, false},
      {"matmul", [](auto& a, auto& b) { return a.matmul(b); }, [](auto& a, auto& b) { return matmul(a, b); }},
      {"softmax", [](auto& a, auto&) { return a.softmax(-1); }, [](auto& a, auto&) { return softmax(a, -1); }},
      {"log_softmax", [](auto& a, auto&) { return a.log_softmax(0); }, [](auto& a, auto&) { return log_softmax(a, 0); }},
      {"relu", [](auto& a, auto& b) { return a.sub(b).relu(); }, [](auto& a, auto& b) { return relu(sub(a, b)); }},
      {"gelu", [](auto& a, auto& b) { return a.mul(b).gelu(); }, [](auto& a, auto& b) { return gelu(mul(a, b)); }},
      {"gelu tanh", [](auto& a, auto& b) { return a.mul(b).gelu(GeluApproximation::Tanh); },
       [](auto& a, auto& b) { return gelu(mul(a, b), GeluApproximation::Tanh); }},
      {"softplus", [](auto& a, auto& b) { return a.mul(b).softplus(2.0, 1.5); },
       [](auto& a, auto& b) { return softplus(mul(a, b), 2.0, 1.5); }},
      {"sum dim", [](auto& a, auto&) { return a.sum(1); }, [](auto& a, auto&) { return sum(a, {1}); }},
      {"sum dim keepdim", [](auto& a, auto&) { return a.sum(-1, true); }, [](auto& a, auto&) { return sum(a, {-1}, true); }},
      {"mean dim", [](auto& a, auto&) { return a.mean(0); }, [](auto& a, auto&) { return mean(a, {0}); }},
      {"mean dim keepdim", [](auto& a, auto&) { return a.mean(int64_t{1}, true); },
       [](auto& a, auto&) { return mean(a, {1}, true); }},
      {"argmax", [](auto& a, auto&) { return a.argmax(1); }, [](auto& a, auto&) { return argmax(a, 1); }, false},
      {"max dim", [](auto& a, auto&) { return std::get<0>(a.max(1)); },
       [](auto& a, auto&) { return std::get<0>(max(a, 1)); }},
      {"min", [](auto& a, auto&) { return a.min(); }, [](auto& a, auto&) { return min(a); }},
      {"min dim keepdim", [](auto& a, auto&) { return std::get<0>(a.min(0, true)); },
       [](auto& a, auto&) { return std::get<0>(min(a, 0, true)); }},
      {"argmin", [](auto& a, auto&) { return a.argmin(1); }, [](auto& a, auto&) { return argmin(a, 1); }, false},
      {"amax dim", [](auto& a, auto&) { return a.amax(1); }, [](auto& a, auto&) { return amax(a, {1}); }},
      {"amin dims keepdim", [](auto& a, auto&) { return a.amin({0, 1}, true); },
       [](auto& a, auto&) { return amin(a, {0, 1}, true); }},
      {"logsumexp dim", [](auto& a, auto&) { return a.logsumexp(-1); },
       [](auto& a, auto&) { return logsumexp(a, {-1}); }},
      {"prod", [](auto& a, auto&) { return a.prod(); }, [](auto& a, auto&) { return prod(a); }},
      {"prod dim keepdim", [](auto& a, auto&) { return a.prod(1, true); },
       [](auto& a, auto&) { return prod(a, 1, true); }},
      {"var", [](auto& a, auto&) { return a.var(); }, [](auto& a, auto&) { return var(a); }},
      {"var dim", [](auto& a, auto&) { return a.var(0, 0.0, true); },
       [](auto& a, auto&) { return var(a, {0}, 0.0, true); }},
      {"std dim", [](auto& a, auto&) { return a.std(1); }, [](auto& a, auto&) { return minigrad::std(a, {1}); }},
      {"norm", [](auto& a, auto&) { return a.norm(); }, [](auto& a, auto&) { return norm(a); }},
      {"norm p dim", [](auto& a, auto&) { return a.norm(3, 1); }, [](auto& a, auto&) { return norm(a, 3, {1}); }},
      {"cumsum", [](auto& a, auto&) { return a.cumsum(1); }, [](auto& a, auto&) { return cumsum(a, 1); }},
      {"any", [](auto& a, auto&) { return a.any(); }, [](auto& a, auto&) { return any(a); }, false},
      {"all dim keepdim", [](auto& a, auto&) { return a.all(1, true); },
       [](auto& a, auto&) { return all(a, 1, true); }, false},
      // more views and joins
      {"narrow", [](auto& a, auto&) { return a.narrow(1, 1, 2); }, [](auto& a, auto&) { return narrow(a, 1, 1, 2); }},
      {"flatten dims", [](auto& a, auto&) { return a.flatten(0, 1); }, [](auto& a, auto&) { return flatten(a, 0, 1); }},
      {"unflatten", [](auto& a, auto&) { return a.unflatten(1, {2, -1}); },
       [](auto& a, auto&) { return a.view({3, 2, 2}); }},
      {"view_as", [](auto& a, auto&) { return a.view_as(zeros({4, 3})); },
       [](auto& a, auto&) { return a.view({4, 3}); }},
      {"reshape_as", [](auto& a, auto&) { return a.t().reshape_as(zeros({12})); },
       [](auto& a, auto&) { return a.t().reshape({12}); }},
      {"expand_as", [](auto& a, auto& b) { return b.expand_as(a); },
       [](auto& a, auto& b) { return b.expand(a.sizes()); }},
      {"movedim", [](auto& a, auto&) { return a.movedim(0, 1); }, [](auto& a, auto&) { return movedim(a, 0, 1); }},
      {"movedim list", [](auto& a, auto&) { return a.movedim({0, 1}, {1, 0}); },
       [](auto& a, auto&) { return movedim(a, {0, 1}, {1, 0}); }},
      {"swapaxes", [](auto& a, auto&) { return a.swapaxes(0, 1); }, [](auto& a, auto&) { return swapaxes(a, 0, 1); }},
      {"swapdims", [](auto& a, auto&) { return a.swapdims(1, 0); }, [](auto& a, auto&) { return swapdims(a, 1, 0); }},
      {"mT", [](auto& a, auto&) { return a.mT(); }, [](auto& a, auto&) { return a.transpose(-2, -1); }},
      {"chunk", [](auto& a, auto&) { return a.chunk(2, 1)[1]; }, [](auto& a, auto&) { return chunk(a, 2, 1)[1]; }},
      {"split", [](auto& a, auto&) { return a.split(3, 1)[1]; }, [](auto& a, auto&) { return split(a, 3, 1)[1]; }},
      {"split sizes", [](auto& a, auto&) { return a.split({1, 2}, 0)[1]; },
       [](auto& a, auto&) { return split(a, {1, 2}, 0)[1]; }},
      {"split_with_sizes", [](auto& a, auto&) { return a.split_with_sizes({3, 1}, 1)[0]; },
       [](auto& a, auto&) { return split_with_sizes(a, {3, 1}, 1)[0]; }},
      {"unbind", [](auto& a, auto&) { return a.unbind(1)[2]; }, [](auto& a, auto&) { return unbind(a, 1)[2]; }},
      {"repeat", [](auto& a, auto&) { return a.repeat({2, 1}); }, [](auto& a, auto&) { return cat({a, a}, 0); }},
      {"flip", [](auto& a, auto&) { return a.flip({0, 1}); }, [](auto& a, auto&) { return flip(a, {0, 1}); }},
      {"tril", [](auto& a, auto&) { return a.tril(1); }, [](auto& a, auto&) { return tril(a, 1); }},
      {"triu", [](auto& a, auto&) { return a.triu(-1); }, [](auto& a, auto&) { return triu(a, -1); }},
      {"index_select", [&](auto& a, auto&) { return a.index_select(1, rows.to(a.device())); },
       [&](auto& a, auto&) { return index_select(a, 1, rows.to(a.device())); }},
      {"index_add", [&](auto& a, auto& b) { return a.index_add(1, rows.to(a.device()), b.slice(0, 0, 3).expand({3, 3}), 2.0); },
       [&](auto& a, auto& b) { return index_add(a, 1, rows.to(a.device()), b.slice(0, 0, 3).expand({3, 3}), 2.0); }},
      {"gather", [&](auto& a, auto&) { return a.gather(1, cols.to(a.device())); },
       [&](auto& a, auto&) { return gather(a, 1, cols.to(a.device())); }},
      {"scatter", [&](auto& a, auto& b) { return a.scatter(1, cols.to(a.device()), b.expand({3, 4})); },
       [&](auto& a, auto& b) { return scatter(a, 1, cols.to(a.device()), b.expand({3, 4})); }},
      {"scatter value", [&](auto& a, auto&) { return a.scatter(1, cols.to(a.device()), 0.5); },
       [&](auto& a, auto&) { return scatter(a, 1, cols.to(a.device()), 0.5); }},
      {"scatter_add", [&](auto& a, auto& b) { return a.scatter_add(1, cols.to(a.device()), b.expand({3, 4})); },
       [&](auto& a, auto& b) { return scatter_add(a, 1, cols.to(a.device()), b.expand({3, 4})); }},
      {"topk values", [](auto& a, auto&) { return std::get<0>(a.topk(2)); },
       [](auto& a, auto&) { return std::get<0>(topk(a, 2)); }},
      {"topk indices", [](auto& a, auto&) { return std::get<1>(a.topk(3, 0, false)); },
       [](auto& a, auto&) { return std::get<1>(topk(a, 3, 0, false)); }, false},
      // ---- more elementwise ----
      {"square", [](auto& a, auto& b) { return a.mul(b).square(); }, [](auto& a, auto& b) { return square(mul(a, b)); }},
      {"rsqrt", [](auto& a, auto&) { return a.rsqrt(); }, [](auto& a, auto&) { return rsqrt(a); }},
      {"reciprocal", [](auto& a, auto&) { return a.reciprocal(); }, [](auto& a, auto&) { return reciprocal(a); }},
      {"log1p", [](auto& a, auto&) { return a.log1p(); }, [](auto& a, auto&) { return log1p(a); }},
      {"expm1", [](auto& a, auto&) { return a.expm1(); }, [](auto& a, auto&) { return expm1(a); }},
      {"sin", [](auto& a, auto& b) { return a.mul(b).sin(); }, [](auto& a, auto& b) { return sin(mul(a, b)); }},
      {"cos", [](auto& a, auto& b) { return a.mul(b).cos(); }, [](auto& a, auto& b) { return cos(mul(a, b)); }},
      {"sign", [](auto& a, auto& b) { return a.mul(b).sign(); }, [](auto& a, auto& b) { return sign(mul(a, b)); }},
      {"floor", [](auto& a, auto& b) { return a.mul(b).floor(); }, [](auto& a, auto& b) { return floor(mul(a, b)); }},
      {"clamp optional", [](auto& a, auto&) { return a.clamp(std::nullopt, 1.2); },
       [](auto& a, auto&) { return clamp(a, std::nullopt, 1.2); }},
      {"clamp tensors", [](auto& a, auto& b) { return a.clamp(b, add(b, 1.0)); },
       [](auto& a, auto& b) { return clamp(a, b, add(b, 1.0)); }},
      {"clamp_min tensor", [](auto& a, auto& b) { return a.clamp_min(b); }, [](auto& a, auto& b) { return clamp_min(a, b); }},
      {"clamp_max tensor", [](auto& a, auto& b) { return a.clamp_max(b); }, [](auto& a, auto& b) { return clamp_max(a, b); }},
      {"maximum", [](auto& a, auto& b) { return a.maximum(b); }, [](auto& a, auto& b) { return maximum(a, b); }},
      {"minimum", [](auto& a, auto& b) { return a.minimum(b); }, [](auto& a, auto& b) { return minimum(a, b); }},
      {"lerp scalar", [](auto& a, auto& b) { return a.lerp(b, 0.3); }, [](auto& a, auto& b) { return lerp(a, b, 0.3); }},
      {"lerp tensor", [](auto& a, auto& b) { return a.lerp(mul(a, 2.0), b); },
       [](auto& a, auto& b) { return lerp(a, mul(a, 2.0), b); }},
      {"masked_fill", [](auto& a, auto& b) { return a.masked_fill(gt(b, 0.0), -1.0); },
       [](auto& a, auto& b) { return masked_fill(a, gt(b, 0.0), -1.0); }},
      {"masked_fill tensor", [](auto& a, auto& b) { return a.masked_fill(gt(b, 0.0), b.sum()); },
       [](auto& a, auto& b) { return masked_fill(a, gt(b, 0.0), b.sum()); }},
      {"logical_and", [](auto& a, auto& b) { return a.logical_and(gt(b, 0.0)); },
       [](auto& a, auto& b) { return logical_and(a, gt(b, 0.0)); }, false},
      {"logical_or", [](auto& a, auto& b) { return gt(a, 1.0).logical_or(b); },
       [](auto& a, auto& b) { return logical_or(gt(a, 1.0), b); }, false},
      {"logical_xor", [](auto& a, auto& b) { return gt(a, 1.0).logical_xor(gt(b, 0.0)); },
       [](auto& a, auto& b) { return logical_xor(gt(a, 1.0), gt(b, 0.0)); }, false},
      {"logical_not", [](auto& a, auto&) { return gt(a, 1.0).logical_not(); },
       [](auto& a, auto&) { return logical_not(gt(a, 1.0)); }, false},
      {"bitwise_and", [](auto& a, auto& b) { return gt(a, 1.0).bitwise_and(gt(b, 0.0)); },
       [](auto& a, auto& b) { return bitwise_and(gt(a, 1.0), gt(b, 0.0)); }, false},
      {"bitwise_or", [](auto& a, auto& b) { return gt(a, 1.0).bitwise_or(gt(b, 0.0)); },
       [](auto& a, auto& b) { return bitwise_or(gt(a, 1.0), gt(b, 0.0)); }, false},
      {"bitwise_xor", [](auto& a, auto& b) { return gt(a, 1.0).bitwise_xor(gt(b, 0.0)); },
       [](auto& a, auto& b) { return bitwise_xor(gt(a, 1.0), gt(b, 0.0)); }, false},
      {"bitwise_not", [](auto& a, auto&) { return gt(a, 1.0).bitwise_not(); },
       [](auto& a, auto&) { return bitwise_not(gt(a, 1.0)); }, false},
      {"isnan", [](auto& a, auto& b) { return a.div(b).isnan(); }, [](auto& a, auto& b) { return isnan(div(a, b)); }, false},
      {"isinf", [](auto& a, auto& b) { return a.div(b).isinf(); }, [](auto& a, auto& b) { return isinf(div(a, b)); }, false},
      {"isfinite", [](auto& a, auto& b) { return a.div(b).isfinite(); },
       [](auto& a, auto& b) { return isfinite(div(a, b)); }, false},
      {"isclose", [](auto& a, auto& b) { return a.isclose(b, 0.5, 0.1); },
       [](auto& a, auto& b) { return isclose(a, b, 0.5, 0.1); }, false},
  };
  std::vector<Device> devices = {Device::cpu()};
  if (cuda_is_available()) devices.push_back(Device::cuda(0));
  for (Device device : devices) {
    for (const MemberCase& c : cases) {
      CAPTURE(c.name);
      CAPTURE(device);
      const Tensor a = x.detach().to(device).requires_grad_();
      // matmul needs a [4, k] right side: y as a column.
      const Tensor b = (c.name == "matmul" ? y.reshape({4, 1}) : y).detach().to(device).requires_grad_();
      const Tensor by_member = c.member(a, b);
      const Tensor by_function = c.function(a, b);
      CHECK(by_member.device() == device);
      CHECK(same_bits(by_member, by_function));
      CHECK(by_member.requires_grad() == c.differentiable);
      if (!c.differentiable) continue;
      // The same history: the gradients through each are the same bits.
      const Tensor g = randn(by_member.sizes(), kFloat64).to(device);
      const tensor_list via_member = autograd::grad({by_member}, {a, b}, {g}, false, false, true);
      const tensor_list via_function = autograd::grad({by_function}, {a, b}, {g}, false, false, true);
      for (size_t i = 0; i < 2; ++i) {
        CHECK(via_member[i].defined() == via_function[i].defined());
        if (via_member[i].defined()) CHECK(same_bits(via_member[i], via_function[i]));
      }
    }
  }
}

TEST_CASE("equal and allclose as members give the functions' answers") {
  manual_seed(13);
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor near = add(x, 1e-9);
  std::vector<Device> devices = {Device::cpu()};
  if (cuda_is_available()) devices.push_back(Device::cuda(0));
  for (Device device : devices) {
    CAPTURE(device);
    const Tensor a = x.to(device);
    const Tensor b = near.to(device);
    CHECK(a.equal(a.clone()) == equal(a, a.clone()));
    CHECK(a.equal(a.clone()));
    CHECK_FALSE(a.equal(b));
    CHECK(a.allclose(b) == allclose(a, b));
    CHECK(a.allclose(b));
    CHECK_FALSE(a.allclose(b, 0.0, 1e-12));
    CHECK(a.allclose(b, 0.0, 1e-8, true));
  }
}

TEST_CASE("sum and mean of one integer dim; a braced list keeps its meaning") {
  manual_seed(12);
  const Tensor x = randn({2, 3, 4});
  CHECK(x.sum(1).sizes() == Shape{2, 4});
  CHECK(x.sum(1, true).sizes() == Shape{2, 1, 4});
  CHECK(x.sum(-1).sizes() == Shape{2, 3});
  CHECK(x.mean(2, true).sizes() == Shape{2, 3, 1});
  CHECK(x.sum(int64_t{0}).sizes() == Shape{3, 4});
  // {} is every dim, {1} one dim, {0, 2} two: the list overload, never the integer one.
  CHECK(x.sum({}).dim() == 0);
  CHECK(same_bits(x.sum({}), sum(x)));
  CHECK(same_bits(x.sum({1}), x.sum(1)));
  CHECK(x.sum({0, 2}).sizes() == Shape{3});
  CHECK(x.mean({}).dim() == 0);
  CHECK_THROWS_CONTAINING(x.sum(3), "sum");
  // The same for the other reductions that take one dim or a list of them.
  CHECK(x.amax(1).sizes() == Shape{2, 4});
  CHECK(x.amin(-1, true).sizes() == Shape{2, 3, 1});
  CHECK(x.amax({}).dim() == 0);
  CHECK(same_bits(x.amax({1}), x.amax(1)));
  CHECK(x.amin({0, 2}).sizes() == Shape{3});
  CHECK(x.logsumexp(2).sizes() == Shape{2, 3});
  CHECK(x.logsumexp({}).dim() == 0);
  CHECK(x.var(1).sizes() == Shape{2, 4});
  CHECK(same_bits(x.var(1), x.var({1})));
  CHECK(x.var({}).dim() == 0);
  CHECK(same_bits(x.var({}), x.var()));
  CHECK(x.std(0, 1.0, true).sizes() == Shape{1, 3, 4});
  CHECK(x.std({0, 2}).sizes() == Shape{3});
  CHECK(x.norm(2, 1).sizes() == Shape{2, 4});
  CHECK(same_bits(x.norm(2, {1}), x.norm(2, 1)));
  CHECK(x.norm(1, {}).dim() == 0);
  CHECK_THROWS_CONTAINING(x.var(3), "var");
}

TEST_CASE("add and sub with alpha scale the other tensor, as in LibTorch") {
  const Tensor a = from_vector<double>({1, 2, 3}, {3}).requires_grad_();
  const Tensor b = from_vector<double>({10, 20, 30}, {3}).requires_grad_();
  CHECK(a.add(b, 0.5).to_vector<double>() == std::vector<double>{6, 12, 18});
  CHECK(a.sub(b, 0.1).to_vector<double>() == std::vector<double>{0, 0, 0});
  Tensor y = a.add(b, 0.5).sum();
  y.backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 1, 1});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{0.5, 0.5, 0.5});
}

TEST_CASE("x.multinomial draws what multinomial(x) draws from the same generator state") {
  const Tensor probs = from_vector<double>({0.1, 0.2, 0.3, 0.4, 1.0, 0.0, 2.0, 3.0}, {2, 4});
  Generator a(9), b(9);
  CHECK(probs.multinomial(6, true, &a).to_vector<int64_t>() == multinomial(probs, 6, true, &b).to_vector<int64_t>());
  CHECK(probs.multinomial(3, false, &a).to_vector<int64_t>() == multinomial(probs, 3, false, &b).to_vector<int64_t>());
}
