// Experiment: the fused row ops (and cross_entropy) at bench_gpu's reference shapes, forward
// then backward, a few times each and nothing else, for a profiler to look at (Nsight Compute
// picks the kernels by name). Not part of the build: docs/perf-notes.md's profiles of the normalization and
// softmax_dropout kernels came from it. On the GPU machine, after a CUDA build in build-gpu:
//
//   g++ -std=c++17 -O2 -Ibuild-gpu/include -I.deps/root/usr/include bench/experiments/fused_profile.cpp \
//     build-gpu/libminigrad.a -L.deps/root/usr/lib/x86_64-linux-gnu -lfmt -L/usr/local/cuda/lib64 \
//     -lcublasLt -lcublas -lcudart -lpthread -o build-gpu/fused_profile
//   ncu -k regex:'normalization|softmax_dropout|cross_entropy' --launch-skip 6 --launch-count 6 \
//     --section SpeedOfLight --section Occupancy --section WarpStateStats build-gpu/fused_profile
//   (the long rows' backward: -k regex:'normalization_backward|affine_gradient|sum_partials')
//
// Each op runs `repeats` times (argument 1, default 3): the first runs warm the caching
// allocator, so a later launch is profiled as the benchmark times it.
#include <cstdlib>

#include <fmt/core.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

using namespace minigrad;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  const TensorOptions bf16 = TensorOptions(kBFloat16).device(Device::cuda());
  manual_seed(7);
  {
    const int64_t rows = 16384, hidden = 4096;
    const Tensor x = randn({rows, hidden}, bf16).requires_grad_();
    const Tensor weight = randn({hidden}, bf16).requires_grad_();
    const Tensor bias = randn({hidden}, bf16).requires_grad_();
    const Tensor grad = randn({rows, hidden}, bf16);
    for (int i = 0; i < repeats; ++i) layer_norm_gelu(x, {hidden}, weight, bias).backward(grad);
    // layer_norm alone: the same kernels without the GELU epilogue, for the difference.
    for (int i = 0; i < repeats; ++i) layer_norm(x, {hidden}, weight, bias).backward(grad);
  }
  // The sweep's long rows (64 Mi elements), past the backward's register path: its loop kernel
  // for dx, the partials by columns and their column sums.
  for (const int64_t hidden : {int64_t{16384}, int64_t{32768}}) {
    const int64_t rows = (int64_t{1} << 26) / hidden;
    const Tensor x = randn({rows, hidden}, bf16).requires_grad_();
    const Tensor weight = randn({hidden}, bf16).requires_grad_();
    const Tensor bias = randn({hidden}, bf16).requires_grad_();
    const Tensor grad = randn({rows, hidden}, bf16);
    for (int i = 0; i < repeats; ++i) layer_norm_gelu(x, {hidden}, weight, bias).backward(grad);
  }
  {
    // cross_entropy over a GPT-2 vocabulary: forward alone, then forward (which writes the
    // gradient) + backward.
    const int64_t tokens = 8192, vocab = 50304;
    const Tensor logits = randn({tokens, vocab}, bf16);
    const Tensor targets = randint(vocab, {tokens}, TensorOptions(kInt64).device(Device::cuda()));
    for (int i = 0; i < repeats; ++i) (void)cross_entropy(logits, targets);
    Tensor leaf = logits.detach().requires_grad_();
    for (int i = 0; i < repeats; ++i) {
      leaf.mutable_grad() = Tensor();
      cross_entropy(leaf, targets).backward();
    }
  }
  {
    const Tensor scores = randn({4, 16, 1024, 1024}, bf16).requires_grad_();
    const Tensor grad = randn(scores.sizes(), bf16);
    for (int i = 0; i < repeats; ++i) softmax_dropout(scores, -1, 0.1).backward(grad);
    // bench_gpu's two variants: causal, and a [4, 1, 1, 1024] padding mask.
    for (int i = 0; i < repeats; ++i)
      softmax_dropout(scores, -1, 0.1, true, std::nullopt, true).backward(grad);
    const TensorOptions on_gpu = TensorOptions(kInt64).device(Device::cuda());
    const Tensor lengths = from_vector<int64_t>({1024, 896, 768, 640}, {4, 1, 1, 1}, on_gpu);
    const Tensor padding = lt(arange(1024, on_gpu).view({1, 1, 1, -1}), lengths);
    for (int i = 0; i < repeats; ++i) softmax_dropout(scores, -1, 0.1, true, padding).backward(grad);
  }
  cuda::synchronize();
  fmt::print("fused_profile: {} runs of each op\n", repeats);
  return 0;
}
