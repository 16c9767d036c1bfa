// The CUDA runtime: the caching allocator, copies between and on devices, fills, streams,
// device indices and error checks. The GPU cases are skipped where no GPU is present.
#include <cstring>
#include <vector>

#include "tests/cuda_test_support.h"
#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#if MINIGRAD_WITH_CUDA
#include <minigrad/cuda/runtime.h>
#endif

using namespace minigrad;
using test::kGpu;

TEST_CASE("without a GPU, cuda_is_available() is false and the runtime says why" *
          doctest::skip(cuda_is_available())) {
  CHECK(!cuda_is_available());
#if MINIGRAD_WITH_CUDA
  CHECK(cuda::device_count() == 0);
  CHECK_THROWS_CONTAINING(cuda::allocator_stats(0), "allocator_stats: device cuda:0 is not available: no GPU");
  CHECK_THROWS_CONTAINING(cuda::current_stream(0), "current_stream: device cuda:0 is not available");
#endif
}

#if MINIGRAD_WITH_CUDA
namespace {

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kBool};
constexpr size_t kMiB = size_t{1} << 20;

TensorOptions on_gpu(DType dtype) { return TensorOptions(dtype).device(kGpu); }

// Values every dtype holds exactly (bool aside), fractions and negatives included.
Tensor sample_values(DType dtype) {
  return from_vector<double>({-2.5, -1.0, 0.0, 0.5, 1.0, 3.75}, {2, 3}).to(dtype);
}

void host_function_not_a_kernel() {}

}  // namespace

TEST_CASE("caching allocator: freed blocks are reused, the stats follow, empty_cache returns the cache" *
          doctest::skip(!cuda_is_available())) {
  cuda::empty_cache();
  const cuda::AllocatorStats start = cuda::allocator_stats(0);
  CHECK(start.reserved_bytes == start.allocated_bytes);
  const int64_t four_mib_floats = 1 << 20;  // 4 MiB: a multiple of the 2 MiB granule, so the stats move by it exactly
  {
    Tensor a = empty({four_mib_floats}, on_gpu(kFloat32));
    const cuda::AllocatorStats s = cuda::allocator_stats(0);
    CHECK(s.allocated_bytes == start.allocated_bytes + 4 * kMiB);
    CHECK(s.reserved_bytes == start.reserved_bytes + 4 * kMiB);
    CHECK(s.cuda_malloc_calls == start.cuda_malloc_calls + 1);
    CHECK(s.peak_allocated_bytes >= s.allocated_bytes);
  }
  cuda::AllocatorStats s = cuda::allocator_stats(0);
  CHECK(s.allocated_bytes == start.allocated_bytes);
  CHECK(s.reserved_bytes == start.reserved_bytes + 4 * kMiB);  // cached, not given back
  {
    Tensor same = empty({four_mib_floats}, on_gpu(kFloat32));
    Tensor a_bit_smaller = empty({four_mib_floats - 1000}, on_gpu(kFloat32));  // rounds up to 4 MiB too: a new block
    Tensor other_dtype = empty({four_mib_floats / 2}, on_gpu(kFloat64));
    CHECK(cuda::allocator_stats(0).cuda_malloc_calls == start.cuda_malloc_calls + 3);
  }
  {
    Tensor again = empty({four_mib_floats}, on_gpu(kFloat32));
    Tensor a_bit_smaller = empty({four_mib_floats - 1000}, on_gpu(kFloat32));
    Tensor other_dtype = empty({four_mib_floats / 2}, on_gpu(kFloat64));
    CHECK(cuda::allocator_stats(0).cuda_malloc_calls == start.cuda_malloc_calls + 3);  // all three from the cache
  }
  {
    Tensor small = empty({25}, on_gpu(kFloat32));  // 100 bytes: one 512-byte class
    CHECK(cuda::allocator_stats(0).allocated_bytes == start.allocated_bytes + 512);
  }
  {
    cuda::Workspace scratch(kMiB, 0);  // from the same cache: 1 MiB rounds to the 2 MiB granule
    CHECK(scratch.data() != nullptr);
    CHECK(cuda::allocator_stats(0).allocated_bytes == start.allocated_bytes + 2 * kMiB);
  }

  cuda::reset_peak_stats(0);
  CHECK(cuda::allocator_stats(0).peak_allocated_bytes == start.allocated_bytes);
  { Tensor big = empty({2 * four_mib_floats}, on_gpu(kFloat32)); }
  s = cuda::allocator_stats(0);
  CHECK(s.peak_allocated_bytes == start.allocated_bytes + 8 * kMiB);
  CHECK(s.allocated_bytes == start.allocated_bytes);

  const uint64_t frees_before = s.cuda_free_calls;
  cuda::empty_cache();
  s = cuda::allocator_stats(0);
  CHECK(s.reserved_bytes == s.allocated_bytes);
  CHECK(s.cuda_free_calls > frees_before);
}

TEST_CASE("caching allocator: a block freed on one stream is reused only on that stream" *
          doctest::skip(!cuda_is_available())) {
  cudaStream_t side = nullptr;
  REQUIRE(cudaStreamCreate(&side) == cudaSuccess);
  const int64_t n = 3 << 20;  // 12 MiB of float32
  { Tensor on_default = empty({n}, on_gpu(kFloat32)); }
  const uint64_t calls = cuda::allocator_stats(0).cuda_malloc_calls;
  {
    cuda::StreamGuard guard(side);
    CHECK(cuda::current_stream() == side);
    Tensor on_side = empty({n}, on_gpu(kFloat32));  // the default stream's cached block is not taken
    CHECK(cuda::allocator_stats(0).cuda_malloc_calls == calls + 1);
  }
  CHECK(cuda::current_stream() == nullptr);
  { Tensor on_default = empty({n}, on_gpu(kFloat32)); }
  {
    cuda::StreamGuard guard(side, 0);
    Tensor on_side = empty({n}, on_gpu(kFloat32));
  }
  CHECK(cuda::allocator_stats(0).cuda_malloc_calls == calls + 1);  // each stream took its own block back
  cuda::empty_cache();  // before the stream goes: its cached blocks are keyed by its handle
  CHECK(cudaStreamDestroy(side) == cudaSuccess);
}

TEST_CASE("a stream guard sets the current stream for kernels, copies and cuBLAS, and restores it" *
          doctest::skip(!cuda_is_available())) {
  cudaStream_t side = nullptr;
  REQUIRE(cudaStreamCreate(&side) == cudaSuccess);
  CHECK(cuda::current_stream() == nullptr);
  const Tensor x = randn({33, 65}, kFloat64);
  {
    cuda::StreamGuard guard(side);
    CHECK(cuda::current_stream() == side);
    CHECK(cuda::current_stream(0) == side);
    cudaStream_t cublas_stream = nullptr;
    CHECK(cublasGetStream(cuda::cublas_handle(), &cublas_stream) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublas_stream == side);
    Tensor transposed = x.cuda().t().contiguous().to(kFloat32);  // upload, kernel, kernel: all on `side`
    CHECK(transposed.cpu().to_vector<float>() == x.t().to(kFloat32).contiguous().to_vector<float>());
  }
  CHECK(cuda::current_stream() == nullptr);
  cudaStream_t cublas_stream = side;
  CHECK(cublasGetStream(cuda::cublas_handle(), &cublas_stream) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublas_stream == nullptr);
  cuda::empty_cache();
  CHECK(cudaStreamDestroy(side) == cudaSuccess);
}

TEST_CASE("to(cuda) and back keeps every dtype's values" * doctest::skip(!cuda_is_available())) {
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype);
    const Tensor host = sample_values(dtype);
    const Tensor dev = host.to(kGpu);
    CHECK(dev.device() == kGpu);
    CHECK(dev.dtype() == dtype);
    CHECK(dev.sizes() == host.sizes());
    const Tensor back = dev.cpu();
    CHECK(back.device() == kCPU);
    CHECK(back.to_vector<double>() == host.to_vector<double>());
    CHECK(std::memcmp(back.raw_data(), host.raw_data(), static_cast<size_t>(host.numel()) * host.element_size()) == 0);
  }
}

TEST_CASE("dtype conversions on the GPU give the CPU's values, for all 36 pairs" *
          doctest::skip(!cuda_is_available())) {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      CAPTURE(from);
      CAPTURE(to);
      const Tensor host = sample_values(from);
      const Tensor on_device = host.to(kGpu).to(to);  // the conversion kernel
      CHECK(on_device.device() == kGpu);
      CHECK(on_device.dtype() == to);
      CHECK(on_device.to_vector<double>() == host.to(to).to_vector<double>());
      // Across the bus with a conversion, both ways.
      CHECK(copy_as(host, to, kGpu).to_vector<double>() == host.to(to).to_vector<double>());
      CHECK(copy_as(host.to(kGpu), to, kCPU).to_vector<double>() == host.to(to).to_vector<double>());
    }
  }
  // Contiguous conversions move 16-byte vectors: a slice one element in is misaligned (the
  // strided kernel takes it), and 1001 elements leave a tail after the last whole vector.
  const Tensor many = randn({1001}, kFloat64) * 50.0;
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      for (int64_t start : {0, 1}) {
        CAPTURE(from);
        CAPTURE(to);
        CAPTURE(start);
        const Tensor host = many.to(from).slice(0, start, 1001);
        CHECK(host.to(kGpu).to(to).to_vector<double>() == host.to(to).to_vector<double>());
        CHECK(many.to(from).to(kGpu).slice(0, start, 1001).to(to).to_vector<double>() ==
              host.to(to).to_vector<double>());
      }
    }
  }
  // Rounding to nearest even, as on the host: 1 + 2^-11 is halfway between two float16s.
  const Tensor halfway = from_vector<float>({1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 65520.0f}, {3});
  CHECK(halfway.to(kGpu).to(kFloat16).to_vector<float>() == halfway.to(kFloat16).to_vector<float>());
  CHECK(halfway.to(kGpu).to(kBFloat16).to_vector<float>() == halfway.to(kBFloat16).to_vector<float>());
}

TEST_CASE("copies with non-contiguous sources and destinations, on and across devices" *
          doctest::skip(!cuda_is_available())) {
  const Tensor x = randn({5, 7}, kFloat64);
  const Tensor x_t = x.t().contiguous();  // the reference: x transposed, on the CPU
  const Tensor dev = x.to(kGpu);

  // Strided sources.
  CHECK(dev.t().contiguous().cpu().to_vector<double>() == x_t.to_vector<double>());  // on the GPU
  CHECK(x.t().to(kGpu).to_vector<double>() == x_t.to_vector<double>());             // CPU -> GPU
  CHECK(dev.t().cpu().to_vector<double>() == x_t.to_vector<double>());              // GPU -> CPU
  CHECK(dev.slice(1, 1, 7, 2).contiguous().to_vector<double>() ==
        x.slice(1, 1, 7, 2).contiguous().to_vector<double>());
  CHECK(dev.t().to(kFloat32).to_vector<float>() == x.t().to(kFloat32).to_vector<float>());
  CHECK(dev.select(1, 3).to_vector<double>() == x.select(1, 3).to_vector<double>());

  // Strided destinations.
  Tensor on_gpu_dst = zeros({7, 5}, on_gpu(kFloat64));
  on_gpu_dst.t().copy_(dev);  // GPU -> GPU
  CHECK(on_gpu_dst.to_vector<double>() == x_t.to_vector<double>());
  Tensor from_cpu_dst = zeros({7, 5}, on_gpu(kFloat32));
  from_cpu_dst.t().copy_(x);  // CPU -> GPU, with a conversion
  CHECK(from_cpu_dst.to_vector<float>() == x_t.to(kFloat32).to_vector<float>());
  Tensor to_cpu_dst = zeros({7, 5}, kFloat64);
  to_cpu_dst.t().copy_(dev);  // GPU -> CPU
  CHECK(to_cpu_dst.to_vector<double>() == x_t.to_vector<double>());
  Tensor every_other = zeros({5, 14}, on_gpu(kBFloat16));
  every_other.slice(1, 0, 14, 2).copy_(dev);
  const std::vector<double> got = every_other.to_vector<double>();
  const std::vector<double> expected = x.to(kBFloat16).to_vector<double>();
  for (size_t i = 0; i < 5; ++i) {
    for (size_t j = 0; j < 7; ++j) {
      CHECK(got[i * 14 + 2 * j] == expected[i * 7 + j]);
      CHECK(got[i * 14 + 2 * j + 1] == 0.0);
    }
  }

  // Empty tensors, strided or not, go anywhere.
  const Tensor none = zeros({0, 3}, on_gpu(kFloat32));
  CHECK(none.t().contiguous().numel() == 0);
  CHECK(none.cpu().sizes() == Shape{0, 3});
  CHECK(empty({3, 0}).t().to(kGpu).to(kFloat16).sizes() == Shape{0, 3});
}

TEST_CASE("copy_into broadcasts on the GPU and across devices" * doctest::skip(!cuda_is_available())) {
  Tensor dst = empty({3, 4}, on_gpu(kFloat32));
  copy_into(dst, from_vector<float>({1, 2, 3, 4}, {4}).to(kGpu));
  CHECK(dst.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  copy_into(dst, from_vector<double>({10, 20, 30}, {3, 1}).to(kGpu));  // and converts
  CHECK(dst.to_vector<float>() == std::vector<float>{10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30});
  copy_into(dst, scalar_tensor(5.0, kInt64));  // from the CPU: one element crosses, then broadcasts
  CHECK(dst.to_vector<float>() == std::vector<float>(12, 5.0f));
  Tensor host_dst = zeros({2, 3}, kFloat64);
  copy_into(host_dst, from_vector<float>({7, 8, 9}, {3}).to(kGpu));  // to the CPU
  CHECK(host_dst.to_vector<double>() == std::vector<double>{7, 8, 9, 7, 8, 9});
  CHECK_THROWS_CONTAINING(copy_into(dst, zeros({5}, on_gpu(kFloat32))), "does not broadcast");
}

TEST_CASE("zeros, ones and full on the GPU, in every dtype" * doctest::skip(!cuda_is_available())) {
  for (DType dtype : kAllDTypes) {
    CAPTURE(dtype);
    const Tensor z = zeros({2, 3}, on_gpu(dtype));
    CHECK(z.device() == kGpu);
    CHECK(z.dtype() == dtype);
    CHECK(z.to_vector<double>() == std::vector<double>(6, 0.0));
    CHECK(ones({4}, on_gpu(dtype)).to_vector<double>() == std::vector<double>(4, 1.0));
    CHECK(zeros_like(z).device() == kGpu);
  }
  CHECK(full({3}, 2.5, on_gpu(kFloat16)).to_vector<double>() == std::vector<double>(3, 2.5));
  CHECK(full({3}, 2.5, on_gpu(kBFloat16)).to_vector<double>() == std::vector<double>(3, 2.5));
  CHECK(full({2}, 7.0, on_gpu(kInt64)).to_vector<int64_t>() == std::vector<int64_t>{7, 7});
  CHECK(full({2}, 0.25, on_gpu(kBool)).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(full({1}, 1.0 / 3.0, on_gpu(kFloat16)).item<float>() == full({1}, 1.0 / 3.0, kFloat16).item<float>());
  CHECK(zeros({0, 5}, on_gpu(kFloat32)).numel() == 0);
  CHECK(full({2}, 1.0, on_gpu(kFloat32).requires_grad()).requires_grad());
  // Large enough for the grid-stride loop to wrap: 3 x 2^23 elements > 65535 blocks x 256 threads.
  const std::vector<float> big = full({3, 1 << 23}, -1.5, on_gpu(kFloat32)).to_vector<float>();
  CHECK(big.size() == size_t{3} << 23);
  bool all_equal = true;
  for (float v : big) all_equal = all_equal && v == -1.5f;
  CHECK(all_equal);
}

TEST_CASE("item() reads one element of a GPU tensor, views included" * doctest::skip(!cuda_is_available())) {
  CHECK(scalar_tensor(3.5, on_gpu(kFloat64)).item<double>() == 3.5);
  CHECK(full({1}, 1.5, on_gpu(kFloat16)).item<float>() == 1.5f);
  const Tensor grid = arange(12).reshape({3, 4}).to(kGpu);
  CHECK(grid.select(0, 2).select(0, 1).item<int64_t>() == 9);
  CHECK(grid.t().select(0, 3).select(0, 1).item<int64_t>() == 7);
  CHECK_THROWS_CONTAINING(grid.item<double>(), "item: only a one-element tensor");
}

TEST_CASE("shapes of more dims than the kernels index: merged when they can be, a clear error otherwise" *
          doctest::skip(!cuda_is_available())) {
  const Shape nine_dims = {2, 2, 2, 2, 2, 2, 2, 2, 2};
  const Tensor x = arange(512).reshape(nine_dims).to(kGpu);
  CHECK(x.to(kFloat32).to_vector<float>() == arange(512).to(kFloat32).to_vector<float>());  // merges to one dim
  CHECK(ones(nine_dims, on_gpu(kFloat16)).to_vector<double>() == std::vector<double>(512, 1.0));
  CHECK_THROWS_CONTAINING(x.permute({8, 7, 6, 5, 4, 3, 2, 1, 0}).contiguous(), "copy_: the CUDA kernels index at most 8 dims");
}

TEST_CASE("a device index that does not exist is a clear error; two GPUs copy to each other" *
          doctest::skip(!cuda_is_available())) {
  const Tensor x = randn({17, 9}, kFloat64);
  if (cuda::device_count() == 1) {
    CHECK_THROWS_CONTAINING(zeros({2}, Device::cuda(1)), "device cuda:1 is not available: this machine has 1 GPU (cuda:0)");
    CHECK_THROWS_CONTAINING(x.to(Device::cuda(1)), "cuda:1 is not available");
    CHECK_THROWS_CONTAINING(cuda::DeviceGuard(1), "DeviceGuard: device cuda:1 is not available");
    CHECK_THROWS_CONTAINING(cuda::current_stream(1), "current_stream: device cuda:1");
  } else {
    const Tensor on_1 = x.to(Device::cuda(1));
    CHECK(on_1.device() == Device::cuda(1));
    CHECK(on_1.to_vector<double>() == x.to_vector<double>());
    CHECK(on_1.t().to(kGpu).to(kFloat32).to_vector<float>() == x.t().to(kFloat32).to_vector<float>());
    Tensor dst = zeros({9, 17}, on_gpu(kFloat64));
    dst.t().copy_(on_1);
    CHECK(dst.to_vector<double>() == x.t().contiguous().to_vector<double>());
  }
  CHECK_THROWS_CONTAINING(zeros({2}, Device::cuda(-1)), "cuda:-1 is not available");
}

TEST_CASE("a failing CUDA or cuBLAS call is a minigrad::Error naming the op" * doctest::skip(!cuda_is_available())) {
  const Tensor dev = zeros({4}, on_gpu(kFloat32));
  float host[4] = {};
  CHECK_THROWS_CONTAINING(
      [&] { MG_CUDA_CHECK(cudaMemcpy(host, dev.raw_data(), 16, static_cast<cudaMemcpyKind>(42)), "my_copy"); }(),
      "my_copy: CUDA error cudaErrorInvalidMemcpyDirection");

  // A launch of something that is no kernel: cudaLaunchKernel refuses it and records the error,
  // which the launch check after it reports.
  (void)cudaLaunchKernel(reinterpret_cast<const void*>(&host_function_not_a_kernel), dim3(1), dim3(1), nullptr, 0,
                         nullptr);
  CHECK_THROWS_CONTAINING([] { MG_CUDA_CHECK_LAUNCH("my_kernel"); }(), "my_kernel: CUDA error cudaError");
  CHECK(cudaGetLastError() == cudaSuccess);  // reported once, then cleared

  CHECK_THROWS_CONTAINING(
      [] {
        const float one = 1.0f;
        MG_CUBLAS_CHECK(cublasSgemm(cuda::cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, -1, 1, 1, &one, nullptr, 1,
                                    nullptr, 1, &one, nullptr, 1),
                        "my_gemm");
      }(),
      "my_gemm: cuBLAS error CUBLAS_STATUS_INVALID_VALUE");

  CHECK_THROWS_CONTAINING(empty({int64_t{1} << 42}, on_gpu(kFloat32)), "empty: CUDA out of memory allocating");
  CHECK(full({2}, 3.0, on_gpu(kFloat32)).to_vector<float>() == std::vector<float>{3, 3});  // and the GPU still works
}
#endif
