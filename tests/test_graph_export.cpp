// to_dot: the tape in Graphviz DOT. A golden file pins the text of a small fixed graph (one
// MLP step); the other cases check what every graph's text must hold: one box per node
// with its sequence number, the leaves' shapes, the saved tensors, deterministic output,
// and no recursion on deep graphs.
//
// To regenerate the golden file after a deliberate change of the output (or of what an op
// saves): MINIGRAD_UPDATE_GOLDEN=1 ./test_graph_export, then review the diff of tests/golden.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/test_support.h"

using namespace minigrad;

namespace {

// tests/golden/<name>, found from this file's own path (the build passes absolute paths).
std::string golden_path(const std::string& name) {
  std::string here = __FILE__;
  return here.substr(0, here.find_last_of('/')) + "/golden/" + name;
}

// Compares `actual` with the golden file byte for byte. With MINIGRAD_UPDATE_GOLDEN=1 it
// rewrites the file instead. Without it, a missing file fails: it never passes by default.
void check_golden(const std::string& name, const std::string& actual) {
  const std::string path = golden_path(name);
  const char* update = std::getenv("MINIGRAD_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("rewrote " << path);
    return;
  }
  std::ifstream in(path, std::ios::binary);
  INFO("golden file " << path << " (MINIGRAD_UPDATE_GOLDEN=1 rewrites it)");
  REQUIRE(in.good());
  std::stringstream expected;
  expected << in.rdbuf();
  INFO("actual:\n" << actual);
  CHECK(actual == expected.str());
}

// Lines that declare a node (box or oval), not an edge.
size_t node_lines(const std::string& dot) {
  std::istringstream in(dot);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) {
    const bool declares = line.find(" [") != std::string::npos && line.find("node [") == std::string::npos;
    if (declares && line.find("->") == std::string::npos) ++n;
  }
  return n;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// One step of a one-layer MLP: loss = sum(relu(x @ w + b)).
Tensor mlp_loss(const Tensor& x, const Tensor& w, const Tensor& b) { return relu(matmul(x, w) + b).sum(); }

struct MlpParams {
  Tensor x = randn({4, 3});
  Tensor w = randn({3, 2}).requires_grad_();
  Tensor b = randn({2}).requires_grad_();
};

}  // namespace

TEST_CASE("to_dot of an MLP step matches the golden file") {
  MlpParams p;
  const Tensor loss = mlp_loss(p.x, p.w, p.b);
  autograd::DotOptions options;
  options.relative_sequence_numbers = true;  // the same text however many nodes ran before
  check_golden("mlp_step.dot", autograd::to_dot({loss}, options));
}

TEST_CASE("to_dot names every node with its sequence number, and the leaves with their shapes") {
  MlpParams p;
  const Tensor loss = mlp_loss(p.x, p.w, p.b);
  const std::string dot = autograd::to_dot({loss});
  INFO(dot);
  CHECK(dot.rfind("digraph autograd {\n", 0) == 0);
  CHECK(dot.find(fmt::format("{} #{}", loss.grad_fn()->name(), loss.grad_fn()->sequence_nr())) != std::string::npos);
  CHECK(count(dot, "AccumulateGrad") == 2);  // w and b; x needs no gradient and has no node
  CHECK(dot.find("leaf [3, 2] float32") != std::string::npos);
  CHECK(dot.find("leaf [2] float32") != std::string::npos);
  CHECK(dot.find("out0 [shape=oval, label=\"output 0\\n[] float32\"]") != std::string::npos);
  CHECK(dot.find("out0 -> n0;") != std::string::npos);
  // The output, 4 ops (matmul, add, relu, sum) and 2 accumulators.
  CHECK(node_lines(dot) == 7);
}

TEST_CASE("to_dot lists the shapes of the saved tensors, and none after backward freed them") {
  Tensor a = randn({2, 3}, kFloat64).requires_grad_();
  Tensor b = randn({2, 3}, kFloat64).requires_grad_();
  Tensor y = a * b;  // mul saves both inputs
  const std::string before = autograd::to_dot({y});
  INFO(before);
  CHECK(before.find("saved: [2, 3] float64, [2, 3] float64") != std::string::npos);
  CHECK(before.find("[label=\"input 0\"]") != std::string::npos);  // mul has two inputs: edges say which
  CHECK(before.find("[label=\"input 1\"]") != std::string::npos);
  y.sum().backward();
  CHECK(autograd::to_dot({y}).find("saved:") == std::string::npos);
}

TEST_CASE("to_dot is deterministic: two equal graphs give the same text, addresses do not matter") {
  auto build = [] {
    manual_seed(5);
    MlpParams p;
    return mlp_loss(p.x, p.w, p.b);
  };
  autograd::DotOptions options;
  options.relative_sequence_numbers = true;
  const Tensor first = build();
  const Tensor second = build();
  CHECK(autograd::to_dot({first}, options) == autograd::to_dot({second}, options));
  CHECK(autograd::to_dot({first}) == autograd::to_dot({first}));
  CHECK(autograd::to_dot({first}) != autograd::to_dot({second}));  // absolute numbers differ
}

TEST_CASE("to_dot visits a node reached twice once, and shows roots without history") {
  Tensor x = randn({3}, kFloat64).requires_grad_();
  Tensor y = x * 2.0;
  Tensor z = y * y;  // y used twice: one node, two edges into it
  const Tensor plain = randn({2});
  const std::string dot = autograd::to_dot({z, x, plain});
  INFO(dot);
  CHECK(count(dot, "AccumulateGrad") == 1);
  CHECK(count(dot, "n0 -> n1") == 2);
  CHECK(dot.find("output 1\\n[3] float64\\n(a leaf)") != std::string::npos);
  CHECK(dot.find("output 2\\n[2] float32\\n(no gradient)") != std::string::npos);
  CHECK_THROWS_CONTAINING(autograd::to_dot({Tensor()}), "to_dot: root 0 is an undefined tensor");
}

TEST_CASE("to_dot walks a deep graph without recursion") {
  Tensor x = ones({1}, kFloat64).requires_grad_();
  Tensor y = x;
  const int depth = 100000;
  for (int i = 0; i < depth; ++i) y = y * 1.0;
  const std::string dot = autograd::to_dot({y});
  CHECK(count(dot, "-> n") == static_cast<size_t>(depth) + 1);  // the chain, plus out0 -> n0
  CHECK(dot.find(fmt::format("n{} [label=\"AccumulateGrad", depth)) != std::string::npos);
}
