// Lesson: gradients of gradients.
//
// backward() normally runs the backward formulas as plain computation: the gradients it
// returns are numbers with no history. With create_graph=true the engine records the
// backward itself, op by op, exactly as it records a forward, so a gradient is again a
// tensor on the tape and can be differentiated once more. Everything that needs second
// derivatives is built on this one switch:
//   1. a second derivative, d^2/dx^2 tanh(x), against its formula;
//   2. a Hessian-vector product H v, without ever forming H;
//   3. a gradient penalty (as in WGAN-GP), a loss that contains a gradient;
//   4. the graphs themselves, printed with to_dot: the gradient is a graph too.
//
// The program exits non-zero if a comparison fails, so it cannot silently stop checking
// what it claims to.
#include <cmath>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

using namespace minigrad;

namespace {

double max_abs_difference(const Tensor& a, const Tensor& b) { return abs(a - b).max().item<double>(); }

bool report(const std::string& what, double difference, double tolerance) {
  const bool ok = difference <= tolerance;
  fmt::print("{}: max |difference| = {:.3e} (tolerance {:.0e}) {}\n", what, difference, tolerance,
             ok ? "ok" : "FAILED");
  return ok;
}

}  // namespace

int main() {
  manual_seed(7);
  bool ok = true;

  fmt::print("== 1. The second derivative of tanh ==\n");
  {
    // tanh'(x) = 1 - tanh^2(x), and differentiating again by the chain rule:
    //   tanh''(x) = -2 tanh(x) (1 - tanh^2(x)).
    const std::vector<double> points = {-2.0, -0.5, 0.0, 0.3, 1.0, 2.5};
    Tensor x = from_vector(points, {6}).requires_grad_();
    Tensor y = tanh(x);
    // The first gradient, recorded: dy has a grad_fn, so it can be differentiated.
    // (A sum turns the elementwise derivative into a gradient: d/dx_i sum_j tanh(x_j) = tanh'(x_i).)
    Tensor dy = autograd::grad({y.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    fmt::print("tanh'(x) has history: made by '{}'\n", dy.grad_fn()->name());
    Tensor d2y = autograd::grad({dy.sum()}, {x})[0];

    std::vector<double> formula;
    for (double p : points) formula.push_back(-2.0 * std::tanh(p) * (1.0 - std::tanh(p) * std::tanh(p)));
    const Tensor expected = from_vector(formula, {6});
    fmt::print("x                       = {}\n", x);
    fmt::print("tanh''(x), autograd     = {}\n", d2y);
    fmt::print("-2 tanh (1 - tanh^2)    = {}\n", expected);
    ok &= report("second derivative vs formula", max_abs_difference(d2y, expected), 1e-12);

    // Where no formula is at hand, gradgradcheck compares the recorded backward's own
    // derivative with finite differences of the gradient (autograd/gradcheck.h).
    const GradcheckReport r =
        gradgradcheck([](const tensor_list& in) { return tanh(in[0]); }, {x.detach().requires_grad_()});
    fmt::print("{}\n", r.summary());
    ok &= r.passed;
  }

  fmt::print("\n== 2. A Hessian-vector product ==\n");
  {
    // f(x) = 1/2 x^T A x + sum(x^4) / 12, with A symmetric, has the Hessian
    //   H = A + diag(x^2).
    // For n parameters H has n^2 entries: too many for a network. But H v is the gradient of
    // (grad f . v), a scalar: one create_graph backward and one more backward, about twice
    // the cost of a gradient, for any n. Optimizers (Newton-CG) and curvature estimates
    // only ever need products like this.
    const Tensor A = from_vector<double>({2.0, -1.0, 0.5, -1.0, 3.0, 0.0, 0.5, 0.0, 1.0}, {3, 3});
    Tensor x = from_vector<double>({0.5, -1.0, 2.0}, {3}).requires_grad_();
    const Tensor v = from_vector<double>({1.0, 2.0, -1.0}, {3});

    Tensor f = 0.5 * (x * matmul(A, x)).sum() + pow(x, 4.0).sum() / 12.0;
    Tensor grad_f = autograd::grad({f}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    Tensor hv = autograd::grad({(grad_f * v).sum()}, {x})[0];

    // The exact H v, in plain doubles: (A v)_i + x_i^2 v_i.
    const std::vector<double> a = A.to_vector<double>(), xs = x.to_vector<double>(), vs = v.to_vector<double>();
    std::vector<double> exact(3);
    for (size_t i = 0; i < 3; ++i) {
      for (size_t j = 0; j < 3; ++j) exact[i] += a[i * 3 + j] * vs[j];
      exact[i] += xs[i] * xs[i] * vs[i];
    }
    const Tensor expected = from_vector(exact, {3});
    fmt::print("H v, autograd           = {}\n", hv);
    fmt::print("(A + diag(x^2)) v       = {}\n", expected);
    ok &= report("Hessian-vector product vs exact", max_abs_difference(hv, expected), 1e-12);
  }

  fmt::print("\n== 3. A gradient penalty ==\n");
  {
    // WGAN-GP keeps a critic f roughly 1-Lipschitz by penalizing the norm of its gradient
    // with respect to its input:
    //   loss(w) = mean_i f(x_i; w) + lambda * mean_i (||grad_x f(x_i; w)||_2 - 1)^2.
    // The penalty contains a gradient, so the gradient of the loss with respect to w goes
    // through a backward: exactly what create_graph records. Here f(x; w) = tanh(x . w), a
    // one-neuron critic, on a batch of 5 points in 3-D.
    const double lambda = 10.0;
    const Tensor points = randn({5, 3}, kFloat64);
    auto critic_loss = [&](const Tensor& w) {
      Tensor x = points.detach().requires_grad_();  // the penalty needs a gradient w.r.t. x
      Tensor scores = tanh(matmul(x, w));           // f(x_i; w), one per point
      // grad_x of sum_i f(x_i): row i is grad_x f(x_i), since each score depends on its own row.
      Tensor grad_x = autograd::grad({scores.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
      Tensor norms = sqrt((grad_x * grad_x).sum({1}));
      Tensor penalty = pow(norms - 1.0, 2.0).mean();
      return scores.mean() + lambda * penalty;
    };

    Tensor w = from_vector<double>({0.3, -0.2, 0.5}, {3}).requires_grad_();
    Tensor loss = critic_loss(w);
    loss.backward();  // through the scores and through the gradient inside the penalty
    fmt::print("loss = {:.6f}, grad w = {}\n", loss.item<double>(), w.grad());
    // Is that gradient right? Finite differences of the whole loss say so independently.
    const GradcheckReport r =
        gradcheck([&](const tensor_list& in) { return critic_loss(in[0]); }, {w.detach().requires_grad_()});
    fmt::print("{}\n", r.summary());
    if (!r.passed) fmt::print("FAILED: the gradient through the penalty is wrong\n");
    ok &= r.passed;
  }

  fmt::print("\n== 4. The graphs, as Graphviz DOT ==\n");
  {
    // Paste the text into `dot -Tsvg -o graph.svg` (or any Graphviz viewer). Boxes are
    // nodes (op, sequence number, saved tensors), arrows are the edges backward follows.
    Tensor x = from_vector<double>({0.5, -1.0}, {2}).requires_grad_();
    Tensor w = from_vector<double>({2.0, 3.0}, {2}).requires_grad_();
    Tensor y = (tanh(x) * w).sum();
    autograd::DotOptions options;
    options.relative_sequence_numbers = true;  // numbered from 0 in this graph
    fmt::print("The forward, y = sum(tanh(x) * w):\n{}\n", autograd::to_dot({y}, options));
    // The first gradient with create_graph is a graph of its own: tanh's backward formula,
    // recorded op by op, hanging off the forward's tensors (x, w and tanh's saved output).
    Tensor dx = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    const std::string gradient_graph = autograd::to_dot({dx}, options);
    fmt::print("Its gradient dy/dx, recorded by create_graph:\n{}", gradient_graph);
    const bool has_history = dx.grad_fn() != nullptr && gradient_graph.find("AccumulateGrad") != std::string::npos;
    if (!has_history) fmt::print("FAILED: the recorded gradient should lead back to the leaves\n");
    ok &= has_history;
  }

  if (!ok) {
    fmt::print("\nFAILED: a higher-order gradient did not match its reference\n");
    return 1;
  }
  fmt::print("\nAll higher-order gradients match.\n");
  return 0;
}
