// Lesson: when a custom op wins by not storing something. Attention.
//
// Attention is softmax(scale * Q K^T + mask) V with dropout on the probabilities. Written as
// ops (the composite twin here: a matmul, softmax_dropout, a matmul), it materializes the
// scores of every query against every key: a [Sq, Sk] matrix per head, S^2 numbers where Q,
// K, V and the output are S x D each. At S = 4096 and D = 64 that is 64 times the size of
// Q, and the tape keeps the probabilities for the backward.
//
// The fused op never stores it. Each query row folds the keys in a tile at a time into a
// running maximum, a running sum of exponentials and a running weighted sum of values (the
// "online softmax": when the maximum grows, the sums so far are rescaled), and keeps one
// log-sum-exp per row for the backward, which recomputes the probabilities tile by tile
// from Q, K and that number. More arithmetic, far less memory: O(S) extra instead of O(S^2).
// ops/attention.cpp is the algorithm, written to be read.
//
// This program runs both, on the GPU where present (bfloat16: there the fused op is the
// tensor-core kernels of cuda/flash_attention.cu) or else on the CPU (float32), and prints
//   - that they compute the same thing: the output and dQ, dK, dV, the dropout included
//     (both draw the same stream and drop the same scores);
//   - time and memory of forward + backward side by side, and the size of one score matrix.
// Memory is the lesson: on an H100 the fused op allocated 65 MiB where the twin allocated
// 1568. Time followed only once the kernels' own costs came down: with dropout, each Philox
// call (8 decisions) was first made by every lane that held one of its scores, up to 8 times
// over, and the fused op took 2.28 ms against the twin's 1.98 (on cuBLAS and the fused
// softmax_dropout); with each call made once and its bits passed between lanes, 1.06 ms, and
// 0.95 with the causal tiles that do the most work started first (docs/perf-notes.md). A
// kernel that moves less memory is not fast by that alone.
//
//   attention [--device cpu|cuda]
//
// Exits non-zero if the two disagree.
#include <cmath>

#include <fmt/core.h>

#include <minigrad/core/generator.h>
#include <minigrad/minigrad.h>

#include "samples/device.h"
#include "samples/side_by_side.h"

using namespace minigrad;
using namespace minigrad::samples;

int main(int argc, char** argv) {
  manual_seed(0);
  const Device device = choose_device(argc, argv);
  // The GPU gets the shape and dtype attention is trained in; the CPU a size it runs in seconds.
  const bool gpu = device.is_cuda();
  const int64_t batch = gpu ? 4 : 1, heads = gpu ? 16 : 4, length = gpu ? 2048 : 512, head_dim = 64;
  const DType dtype = gpu ? kBFloat16 : kFloat32;
  const double p = 0.1;
  fmt::print("attention, q k v [{}, {}, {}, {}] {}, causal, dropout {}, on {}\n", batch, heads, length, head_dim,
             dtype_name(dtype), p, device.str());
  const TensorOptions options = TensorOptions(dtype).device(device);
  Tensor q = randn({batch, heads, length, head_dim}, options).requires_grad_();
  Tensor k = randn({batch, heads, length, head_dim}, options).requires_grad_();
  Tensor v = randn({batch, heads, length, head_dim}, options).requires_grad_();
  const Tensor grad = randn({batch, heads, length, head_dim}, options);

  using Attention = Tensor (*)(const Tensor&, const Tensor&, const Tensor&, const std::optional<Tensor>&, double, bool,
                               std::optional<double>, bool, Generator*);
  auto run = [&](Attention attention) {
    for (Tensor* leaf : {&q, &k, &v}) leaf->mutable_grad() = Tensor();
    Generator generator(1);  // both draw the same dropout stream
    const Tensor out = attention(q, k, v, std::nullopt, p, /*is_causal=*/true, std::nullopt, false, &generator);
    out.backward(grad);
    return tensor_list{out.detach(), q.grad(), k.grad(), v.grad()};
  };
  const tensor_list fused = run(scaled_dot_product_attention);
  const tensor_list twin = run(composite::scaled_dot_product_attention);
  // In bfloat16 each side rounds its own intermediates (the twin its scores and probabilities,
  // the kernels P and dS before their products): they agree to bfloat16's precision, 2^-8
  // relative, on values of order 1.
  const double tolerance = gpu ? 4e-2 : 1e-4;  // the gradients, sums of more terms: 2.5x
  bool ok = agree("output", twin[0], fused[0], tolerance);
  ok = agree("grad q", twin[1], fused[1], 2.5 * tolerance) && ok;
  ok = agree("grad k", twin[2], fused[2], 2.5 * tolerance) && ok;
  ok = agree("grad v", twin[3], fused[3], 2.5 * tolerance) && ok;

  const Measured twin_m = measure(device, [&] { run(composite::scaled_dot_product_attention); });
  const Measured fused_m = measure(device, [&] { run(scaled_dot_product_attention); });
  print_side_by_side("", twin_m, fused_m);
  const double scores_mib =
      static_cast<double>(batch * heads * length * length * element_size(dtype)) / (1024.0 * 1024.0);
  fmt::print("  one [B, H, S, S] {} score matrix is {:.1f} MiB; q is {:.1f} MiB. The twin allocates several\n"
             "  score-sized tensors (scores, probabilities, their gradients); the fused op none.\n",
             dtype_name(dtype), scores_mib, scores_mib * static_cast<double>(head_dim) / static_cast<double>(length));
  return ok ? 0 : 1;
}
