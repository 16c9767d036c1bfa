// Experiment: flash attention at bench_gpu's shapes, forward then backward, a few times each and
// nothing else, for a profiler to look at; attention_profile_torch.py does the same with
// PyTorch's SDPA flash backend (FlashAttention-2), so that Nsight Compute can set the two side
// by side kernel by kernel (instructions, shared-memory wavefronts, stall reasons). Not part of
// the build. On the GPU machine, after a CUDA build in build-gpu:
//
//   g++ -std=c++17 -O2 -Ibuild-gpu/include -I.deps/root/usr/include bench/experiments/attention_profile.cpp \
//     build-gpu/libminigrad.a -L.deps/root/usr/lib/x86_64-linux-gnu -lfmt -L/usr/local/cuda/lib64 \
//     -lcublasLt -lcublas -lcudart -lpthread -o build-gpu/attention_profile
//   ncu --clock-control none --set full -k regex:'attention_(forward|grad_kvq)' --launch-skip 2 \
//     --launch-count 2 build-gpu/attention_profile 2 0
// (the forward and the backward's main kernel of the second pass at (4,16,4096,128)).
//
// Each shape runs `repeats` times (argument 1, default 3): the first runs warm the caching
// allocator, so a later launch is profiled as the benchmark times it. Argument 2 picks a shape
// (0: (4,16,4096,128), 1: the same causal, 2: (16,16,1024,64), 3: GPT-2's (8,12,1024,64)
// causal); without it, all four in turn.
#include <cstdlib>

#include <fmt/core.h>
#include <minigrad/cuda/runtime.h>
#include <minigrad/minigrad.h>

using namespace minigrad;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 3;
  const int only = argc > 2 ? std::atoi(argv[2]) : -1;
  const TensorOptions bf16 = TensorOptions(kBFloat16).device(Device::cuda());
  manual_seed(7);
  struct Shape {
    int64_t batch, heads, len, dim;
    bool is_causal;
  };
  const Shape shapes[] = {{4, 16, 4096, 128, false}, {4, 16, 4096, 128, true}, {16, 16, 1024, 64, false},
                          {8, 12, 1024, 64, true}};
  for (int s = 0; s < 4; ++s) {
    if (only >= 0 && s != only) continue;
    const Shape& c = shapes[s];
    const Tensor q = randn({c.batch, c.heads, c.len, c.dim}, bf16).requires_grad_();
    const Tensor k = randn({c.batch, c.heads, c.len, c.dim}, bf16).requires_grad_();
    const Tensor v = randn({c.batch, c.heads, c.len, c.dim}, bf16).requires_grad_();
    const Tensor grad = randn({c.batch, c.heads, c.len, c.dim}, bf16);
    for (int i = 0; i < repeats; ++i)
      scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, c.is_causal).backward(grad);
    cuda::synchronize();
    fmt::print("({},{},{},{}){}: {} forward and backward passes\n", c.batch, c.heads, c.len, c.dim,
               c.is_causal ? " causal" : "", repeats);
  }
  return 0;
}
