#pragma once
// The tape as a picture: to_dot writes the part of the graph reachable from some tensors in
// Graphviz's DOT language. Render it with `dot -Tsvg graph.dot -o graph.svg`.
//
// One box per node (the op's name and its sequence number, and the shapes of the tensors it
// saved for backward), one box per leaf accumulator (the leaf's shape and dtype), one oval
// per root, and an arrow along every edge backward follows: from an op to the ops that made
// its inputs. Nodes are numbered in the order a breadth-first walk from the roots meets them,
// so the same graph always gives the same text, whatever the addresses.
#include <string>

#include <minigrad/core/tensor.h>

namespace minigrad {
namespace autograd {

struct DotOptions {
  // Sequence numbers count every node a thread has ever recorded, so they differ between
  // programs (and between runs of a test suite filtered differently). true prints them
  // relative to the smallest in the graph: the same code then gives the same text anywhere.
  bool relative_sequence_numbers = false;
};

std::string to_dot(const tensor_list& roots, const DotOptions& options = {});

}  // namespace autograd
}  // namespace minigrad
