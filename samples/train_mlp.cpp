// Lesson: training a real model, written as a PyTorch user writes one: a Module holding the
// parameters, the library's loss and optimizer, and the loop zero_grad, forward, backward, step.
//
// The dataset is two interleaved spirals, a classic that no straight line can separate: a
// model has to bend its decision boundary around 1.5 turns. The model is a two-layer MLP
// (2 -> 64 -> 2, tanh) built from nn::Linear, the loss is minigrad::cross_entropy (its
// backward written by hand; on the GPU one fused kernel), and the optimizer is AdamW (on the
// GPU one multi-tensor kernel for all four parameters). What the framework does is the
// backward pass and the update; the model and the loop are all here.
//
//   train_mlp [--device cpu|cuda]     default: the GPU when one is present, else the CPU
//
// Exits non-zero if the final training accuracy is below 95%, and on the GPU also if the
// caching allocator called cudaMalloc after the first step: every later step frees and
// allocates tensors of the same sizes, so its memory must come from the cache.
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/minigrad.h>
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>
#endif

#include "samples/device.h"

using namespace minigrad;
using minigrad::samples::choose_device;

namespace {

constexpr double kPi = 3.14159265358979323846;

struct Dataset {
  Tensor inputs;  // [n, 2] float32: the points
  Tensor labels;  // [n] int64: which spiral, 0 or 1
};

// Two spirals of `points_per_class` points each. A point at position t in [0, 1) along its
// spiral sits at radius 0.1 + 0.9 t and angle 1.5 turns * t, the second spiral rotated by
// half a turn, plus Gaussian noise. The randomness comes from minigrad's seeded generator,
// so every run sees the same points.
Dataset two_spirals(int64_t points_per_class, double noise, double scale, Device device) {
  const int64_t n = 2 * points_per_class;
  const std::vector<double> position = rand({n}, dtype(kFloat64)).to_vector<double>();
  const std::vector<double> jitter = randn({n, 2}, dtype(kFloat64)).to_vector<double>();
  const double turns = 1.5;

  std::vector<float> points(static_cast<size_t>(2 * n));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int64_t label = i < points_per_class ? 0 : 1;
    const double t = position[k];
    const double radius = 0.1 + 0.9 * t;
    const double angle = 2.0 * kPi * turns * t + kPi * static_cast<double>(label);
    points[2 * k] = static_cast<float>(scale * (radius * std::cos(angle) + noise * jitter[2 * k]));
    points[2 * k + 1] = static_cast<float>(scale * (radius * std::sin(angle) + noise * jitter[2 * k + 1]));
    labels[k] = label;
  }
  return {from_vector(points, {n, 2}).to(device), from_vector(labels, {n}).to(device)};
}

// fc2(tanh(fc1(x))). The two layers are children of the module: named_parameters() finds
// their weights and biases ("fc1.weight", ...), to() moves them, and the optimizer gets them
// all from parameters(). nn::Linear draws its weights with PyTorch's default, uniform in
// +-1/sqrt(fan_in): each pre-activation has a variance where tanh is neither flat
// (saturated) nor a straight line.
class SpiralNet : public nn::Module {
 public:
  SpiralNet(int64_t inputs, int64_t hidden, int64_t outputs)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(inputs, hidden))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(hidden, outputs))) {}
  Tensor forward(const Tensor& x) override { return fc2->forward(tanh(fc1->forward(x))); }
  std::string name() const override { return "SpiralNet"; }

  std::shared_ptr<nn::Linear> fc1, fc2;
};

double accuracy(SpiralNet& model, const Dataset& data) {
  NoGradGuard no_grad;
  const Tensor predicted = argmax(model.forward(data.inputs), 1);
  return (predicted == data.labels).to(kFloat64).mean().item<double>();
}

// On the GPU: the caching allocator's counters. The first step fills the cache (the
// activations, gradients and temporaries of one step); after it, a step's tensors reuse
// cached blocks, so cudaMalloc (far slower than taking a cached block; and cudaFree
// synchronizes the whole device) is never called again. Returns the number of cudaMalloc
// calls so far; 0 on the CPU.
uint64_t print_allocator_stats(Device device, const char* when) {
#if MINIGRAD_WITH_CUDA
  if (device.is_cuda()) {
    const cuda::AllocatorStats s = cuda::allocator_stats(device.index);
    const double mib = 1024.0 * 1024.0;
    fmt::print("cuda allocator {}: allocated {:.2f} MiB, reserved {:.2f} MiB, peak {:.2f} MiB, "
               "cudaMalloc calls {}, cudaFree calls {}\n",
               when, static_cast<double>(s.allocated_bytes) / mib, static_cast<double>(s.reserved_bytes) / mib,
               static_cast<double>(s.peak_allocated_bytes) / mib, s.cuda_malloc_calls, s.cuda_free_calls);
    return s.cuda_malloc_calls;
  }
#endif
  (void)device;
  (void)when;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = choose_device(argc, argv);
  manual_seed(42);

  // 1000 points, noise 2% of the outer radius. Scaling the points to radius 3 spreads them
  // over the range where unit-variance tanh units change quickly, so 64 of them can follow
  // the spiral arms; at radius 1 the same network needs many more steps.
  const Dataset data = two_spirals(500, 0.02, 3.0, device);
  SpiralNet model(2, 64, 2);
  model.to(device);
  // Full batch, AdamW with lr 0.02 and its default weight decay: converges in well under
  // 1000 steps on this data.
  optim::AdamW optimizer(model.parameters(), optim::AdamWOptions{/*lr=*/0.02});
  const int steps = 1000;
  const int log_every = 100;

  fmt::print("two spirals: {} points; MLP 2 -> 64 -> 2 (tanh), {} parameters; float32 on {}\n", data.inputs.size(0),
             model.num_parameters(), device);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  uint64_t mallocs_after_first_step = 0;
  for (int step = 1; step <= steps; ++step) {
    optimizer.zero_grad();  // backward adds into .grad: each step starts from none
    const Tensor loss = cross_entropy(model.forward(data.inputs), data.labels);
    loss.backward();
    optimizer.step();
    if (step == 1 || step % log_every == 0)
      fmt::print("step {:5d}/{}  loss {:.4f}  accuracy {:5.1f}%  elapsed {:.2f}s\n", step, steps, loss.item<double>(),
                 100.0 * accuracy(model, data), elapsed_s());
    // After the whole first step, its logging (loss.item<double>(), accuracy) included: later
    // steps run the same ops on tensors of the same sizes.
    if (step == 1) mallocs_after_first_step = print_allocator_stats(device, "after step 1");
  }

  const double final_accuracy = accuracy(model, data);
  fmt::print("final training accuracy: {:.1f}% after {} steps in {:.2f}s\n", 100.0 * final_accuracy, steps,
             elapsed_s());
  const uint64_t mallocs_at_end = print_allocator_stats(device, "at the end");
  bool ok = true;
  if (final_accuracy < 0.95) {
    fmt::print("FAILED: accuracy below 95%\n");
    ok = false;
  }
  if (mallocs_at_end > mallocs_after_first_step) {
    fmt::print("FAILED: {} cudaMalloc calls after the first step; the caching allocator should serve them all\n",
               mallocs_at_end - mallocs_after_first_step);
    ok = false;
  } else if (device.is_cuda()) {
    fmt::print("no cudaMalloc after the first step: every later step ran from the allocator's cache\n");
  }
  return ok ? 0 : 1;
}
