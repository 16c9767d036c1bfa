// Lesson: training a real model with nothing but tensors, the tape and a loop.
//
// The dataset is two interleaved spirals, a classic that no straight line can separate: a
// model has to bend its decision boundary around 1.5 turns. The model is a two-layer MLP
// (2 -> 64 -> 2, tanh), the loss is cross-entropy written from log_softmax, and the
// optimizer is SGD with momentum written out by hand. Everything the framework does for
// us is the backward pass; everything else is visible here.
//
//   train_mlp [--device cpu|cuda]     default: the GPU when one is present, else the CPU
//
// Exits non-zero if the final training accuracy is below 95%, and on the GPU also if the
// caching allocator called cudaMalloc after the first step: every later step frees and
// allocates tensors of the same sizes, so its memory must come from the cache.
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/minigrad.h>
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>
#endif

using namespace minigrad;

namespace {

constexpr double kPi = 3.14159265358979323846;

struct Dataset {
  Tensor inputs;   // [n, 2] float32: the points
  Tensor labels;   // [n] int64: which spiral, 0 or 1
  Tensor one_hot;  // [n, 2] float32: labels as rows of the identity, for the loss
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
  std::vector<float> one_hot(static_cast<size_t>(2 * n), 0.f);
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int64_t label = i < points_per_class ? 0 : 1;
    const double t = position[k];
    const double radius = 0.1 + 0.9 * t;
    const double angle = 2.0 * kPi * turns * t + kPi * static_cast<double>(label);
    points[2 * k] = static_cast<float>(scale * (radius * std::cos(angle) + noise * jitter[2 * k]));
    points[2 * k + 1] = static_cast<float>(scale * (radius * std::sin(angle) + noise * jitter[2 * k + 1]));
    labels[k] = label;
    one_hot[2 * k + static_cast<size_t>(label)] = 1.f;
  }
  return {from_vector(points, {n, 2}).to(device), from_vector(labels, {n}).to(device),
          from_vector(one_hot, {n, 2}).to(device)};
}

// A leaf tensor of the given shape, drawn from N(0, std^2), that records gradients.
Tensor parameter(const Shape& shape, double std, Device device) {
  Tensor values = randn(shape, TensorOptions(kFloat32).device(device)) * std;
  return values.requires_grad_();
}

struct MLP {
  Tensor w1, b1, w2, b2;

  // LeCun/Xavier-style scaling, std = 1 / sqrt(fan_in): each pre-activation then has about
  // unit variance, where tanh is neither flat (saturated) nor a straight line.
  MLP(int64_t inputs, int64_t hidden, int64_t outputs, Device device)
      : w1(parameter({inputs, hidden}, 1.0 / std::sqrt(static_cast<double>(inputs)), device)),
        b1(zeros({hidden}, TensorOptions(kFloat32).device(device).requires_grad())),
        w2(parameter({hidden, outputs}, 1.0 / std::sqrt(static_cast<double>(hidden)), device)),
        b2(zeros({outputs}, TensorOptions(kFloat32).device(device).requires_grad())) {}

  Tensor forward(const Tensor& x) const { return matmul(tanh(matmul(x, w1) + b1), w2) + b2; }
  tensor_list parameters() const { return {w1, b1, w2, b2}; }
};

// Mean negative log-likelihood of the right class: cross-entropy, written out (the library's
// is minigrad::cross_entropy, with its backward by hand). Multiplying by the one-hot rows
// picks each row's log-probability of its label without an indexing op; log_softmax rather
// than log(softmax(...)) because it never takes the log of an underflowed 0.
Tensor mean_negative_log_likelihood(const Tensor& logits, const Tensor& one_hot) {
  return -(log_softmax(logits, 1) * one_hot).sum({1}).mean();
}

double accuracy(const MLP& model, const Dataset& data) {
  NoGradGuard no_grad;
  const Tensor predicted = argmax(model.forward(data.inputs), 1);
  return (predicted == data.labels).to(kFloat64).mean().item<double>();
}

// SGD with momentum: velocity = momentum * velocity + grad; p -= lr * velocity. The update
// is not part of the model, so it runs under NoGradGuard: nothing is recorded, and the
// in-place writes to leaves that require grad are allowed.
class SGDMomentum {
 public:
  SGDMomentum(tensor_list parameters, double lr, double momentum)
      : parameters_(std::move(parameters)), lr_(lr), momentum_(momentum) {
    for (const Tensor& p : parameters_) velocity_.push_back(zeros_like(p));
  }

  void step() {
    NoGradGuard no_grad;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      Tensor& p = parameters_[i];
      velocity_[i].mul_(momentum_).add_(p.grad());
      p.add_(velocity_[i], -lr_);
      // backward adds into .grad; dropping it starts the next step from nothing.
      p.mutable_grad() = Tensor();
    }
  }

 private:
  tensor_list parameters_;
  tensor_list velocity_;
  double lr_;
  double momentum_;
};

// The device to train on: the GPU when one is present (this build has the CUDA backend
// and found a GPU), else the CPU; `--device cpu` or `--device cuda` says which.
Device choose_device(int argc, char** argv) {
  Device device = cuda_is_available() ? Device::cuda() : kCPU;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--device") != 0) continue;
    if (std::strcmp(argv[i + 1], "cpu") == 0) device = kCPU;
    if (std::strcmp(argv[i + 1], "cuda") == 0) device = Device::cuda();
  }
  if (device.is_cuda() && !cuda_is_available()) {
    fmt::print("CUDA was requested but is not usable here (no CUDA backend in this build, or no GPU); "
               "training on the CPU.\n");
    device = kCPU;
  }
  return device;
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
  MLP model(2, 64, 2, device);
  // Full batch, lr 0.1 and momentum 0.9 (an effective step of about 1 once the velocity
  // has built up): converges in ~1000 steps on this data without diverging.
  SGDMomentum optimizer(model.parameters(), 0.1, 0.9);
  const int steps = 1000;
  const int log_every = 100;

  fmt::print("two spirals: {} points; MLP 2 -> 64 -> 2 (tanh); float32 on {}\n", data.inputs.size(0), device);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  uint64_t mallocs_after_first_step = 0;
  for (int step = 1; step <= steps; ++step) {
    Tensor loss = mean_negative_log_likelihood(model.forward(data.inputs), data.one_hot);
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
