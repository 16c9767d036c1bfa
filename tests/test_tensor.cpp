// core: storage, views, dtypes, creation, random numbers, copies, printing, devices.
#include <cmath>
#include <cstring>
#include <sstream>

#include <minigrad/config.h>  // MINIGRAD_WITH_CUDA
#include <minigrad/kernels/philox.h>
#include "tests/test_support.h"

using namespace minigrad;

TEST_CASE("creation functions fill the right values, dtype and contiguous strides") {
  Tensor z = zeros({2, 3}, kFloat64);
  CHECK(z.sizes() == Shape{2, 3});
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.dtype() == kFloat64);
  CHECK(z.is_contiguous());
  for (double v : z.to_vector<double>()) CHECK(v == 0.0);
  for (float v : full({4}, 2.5f).to_vector<float>()) CHECK(v == 2.5f);
  CHECK(ones({2}, kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, kFloat32).to_vector<float>() == std::vector<float>{1.0f, 1.25f, 1.5f, 1.75f});
  CHECK(scalar_tensor(3.0).dim() == 0);
  CHECK(scalar_tensor(3.0).item<double>() == 3.0);
  CHECK(empty({0, 4}).numel() == 0);
  CHECK_THROWS_CONTAINING(empty({2, -1}), "empty: negative size");
  CHECK_THROWS_CONTAINING(arange(0.0, 1.0, 0.0), "arange: step must be nonzero");
}

TEST_CASE("the CPU allocator keeps freed buffers of 4 MiB and more for reuse") {
  cpu_empty_cache();
  CHECK(cpu_cached_bytes() == 0);
  const size_t big_bytes = size_t(12) << 20;  // 3 Mi floats: a whole number of 2 MiB pages
  const void* first = nullptr;
  {
    Tensor big = empty({3 << 20}, kFloat32);
    first = big.raw_data();
    Tensor small = empty({1000}, kFloat32);  // below 4 MiB: freed at once, never kept
  }
#if defined(__SANITIZE_ADDRESS__)
  CHECK(cpu_cached_bytes() == 0);  // AddressSanitizer builds keep nothing, so use after free is caught
  (void)first;
  (void)big_bytes;
#else
  CHECK(cpu_cached_bytes() == big_bytes);
  {
    Tensor other_size = empty({5 << 20}, kFloat32);  // 20 MiB: a size the cache does not hold
    CHECK(other_size.raw_data() != first);
    Tensor again = empty({3 << 20}, kFloat32);  // the same pages: the buffer comes back
    CHECK(again.raw_data() == first);
    CHECK(cpu_cached_bytes() == 0);
  }
  CHECK(cpu_cached_bytes() == big_bytes + (size_t(20) << 20));
#endif
  cpu_empty_cache();
  CHECK(cpu_cached_bytes() == 0);
}

TEST_CASE("from_vector, item and to_vector round-trip, with clear errors") {
  Tensor t = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.dtype() == kFloat64);
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(from_vector<double>({1.5}, {1}, kFloat32).dtype() == kFloat32);
  CHECK(from_vector<bool>({true, false}, {2}).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK_THROWS_CONTAINING(from_vector<float>({1, 2, 3}, {2, 2}), "from_vector: 3 values do not fill shape [2, 2]");
  CHECK_THROWS_CONTAINING(t.item<double>(), "item: only a one-element tensor");
  CHECK(tensor({7.0f}).item<float>() == 7.0f);
}

TEST_CASE("float16 and bfloat16 conversions round to nearest even and keep specials") {
  CHECK(Half(1.0f).bits == 0x3c00);
  CHECK(Half(-2.0f).bits == 0xc000);
  CHECK(Half(65504.0f).bits == 0x7bff);         // largest finite half
  CHECK(Half(65520.0f).bits == 0x7c00);         // rounds up to infinity
  CHECK(Half(5.960464477539063e-08f).bits == 0x0001);  // smallest subnormal
  CHECK(Half(1.0f + 1.0f / 2048).bits == 0x3c00);      // a tie rounds to even (down)
  CHECK(Half(1.0f + 3.0f / 2048).bits == 0x3c02);      // a tie rounds to even (up)
  CHECK(std::isnan(static_cast<float>(Half(NAN))));
  CHECK(static_cast<float>(Half(0.333251953125f)) == 0.333251953125f);  // exactly representable
  CHECK(static_cast<float>(Half(Half::half_bits_to_float(0x0001))) == 5.960464477539063e-08f);
  CHECK(BFloat16(1.0f).bits == 0x3f80);
  CHECK(BFloat16(1.0f + 1.0f / 256).bits == 0x3f80);  // tie to even
  CHECK(BFloat16(1.0f + 3.0f / 256).bits == 0x3f82);
  CHECK(std::isnan(static_cast<float>(BFloat16(NAN))));
  Tensor h = from_vector<float>({0.1f, -3.5f, 1000.0f}, {3}, kFloat16);
  std::vector<float> back = h.to_vector<float>();
  CHECK(back[0] == doctest::Approx(0.1f).epsilon(1e-3));
  CHECK(back[1] == -3.5f);
  CHECK(back[2] == 1000.0f);
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors") {
  using philox::Uint4;
  auto same = [](Uint4 a, Uint4 b) { return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w; };
  CHECK(same(philox::philox4x32_10({0, 0, 0, 0}, 0, 0), {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  CHECK(same(philox::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu, 0xffffffffu),
             {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  CHECK(same(philox::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u),
             {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST_CASE("rand and randn: seeded, reproducible, fresh per call, with the right moments") {
  for (DType dt : {kFloat32, kFloat64}) {
    manual_seed(123);
    Tensor a = rand({100000}, dt);
    Tensor n = randn({100000}, dt);
    manual_seed(123);
    CHECK(rand({100000}, dt).to_vector<double>() == a.to_vector<double>());
    CHECK(randn({100000}, dt).to_vector<double>() == n.to_vector<double>());
    CHECK(rand({100000}, dt).to_vector<double>() != a.to_vector<double>());  // the next call draws anew
    double sum = 0, lo = 1, hi = 0;
    for (double v : a.to_vector<double>()) sum += v, lo = std::min(lo, v), hi = std::max(hi, v);
    CHECK(lo >= 0.0);
    CHECK(hi < 1.0);
    CHECK(sum / 1e5 == doctest::Approx(0.5).epsilon(0.01));
    double m = 0, m2 = 0;
    for (double v : n.to_vector<double>()) m += v, m2 += v * v;
    m /= 1e5;
    CHECK(std::fabs(m) < 0.02);
    CHECK(std::sqrt(m2 / 1e5 - m * m) == doctest::Approx(1.0).epsilon(0.02));
  }
  CHECK_THROWS_CONTAINING(randn({2}, kInt64), "randn: needs a floating-point dtype");
}

TEST_CASE("as_strided views share storage and the version counter; copy_into broadcasts and converts") {
  Tensor base = from_vector<double>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor col = as_strided(base, {2}, {3}, 1);  // column 1
  CHECK(col.to_vector<double>() == std::vector<double>{1, 4});
  CHECK(col.storage() == base.storage());
  CHECK(!as_strided(base, {3, 2}, {1, 3}, 0).is_contiguous());
  copy_into(col, from_vector<float>({9}, {1}));  // broadcast, float32 -> float64
  CHECK(base.to_vector<double>() == std::vector<double>{0, 9, 2, 3, 9, 5});
  CHECK(base.version() == 1);  // the write through the view is seen by the base
  Tensor transposed = as_strided(base, {3, 2}, {1, 3}, 0);
  Tensor packed = copy_as(transposed, kInt64, kCPU);
  CHECK(packed.is_contiguous());
  CHECK(packed.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 9, 9, 2, 5});
  CHECK(packed.version() == 0);
}

TEST_CASE("shape helpers: broadcasting rules and dim wrapping") {
  CHECK(broadcast_shapes({3, 1, 5}, {4, 1}, "add") == Shape{3, 4, 5});
  CHECK(broadcast_shapes({}, {2, 2}, "add") == Shape{2, 2});
  CHECK(broadcast_shapes({0, 1}, {1, 3}, "add") == Shape{0, 3});
  CHECK_THROWS_CONTAINING(broadcast_shapes({3, 2}, {3}, "mul"), "mul: shapes [3, 2] and [3] do not broadcast");
  // broadcasts_to: into exactly the second shape, never growing it.
  CHECK(broadcasts_to({4, 1}, {3, 4, 5}));
  CHECK(broadcasts_to({}, {2}));
  CHECK(broadcasts_to({2, 3}, {2, 3}));
  CHECK(!broadcasts_to({3, 4, 5}, {4, 5}));  // more dims than the target
  CHECK(!broadcasts_to({2, 5}, {3, 5}));     // a size neither equal nor 1
  CHECK(!broadcasts_to({5}, {5, 1}));        // would need the target's 1 to grow
  CHECK(wrap_dim(-1, 3, "sum") == 2);
  CHECK_THROWS_CONTAINING(wrap_dim(3, 3, "sum"), "sum: dim 3 is out of range for a 3-D tensor");
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
}

TEST_CASE("printing with fmt, summarized when large") {
  CHECK(fmt::format("{}", tensor({1.0f, -2.0f, 3.0f})) == "tensor([1.0000, -2.0000, 3.0000])");
  CHECK(fmt::format("{}", from_vector<double>({1, 2, 3, 4}, {2, 2})) ==
        "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], dtype=float64)");
  CHECK(fmt::format("{}", arange(3)) == "tensor([0, 1, 2])");
  CHECK(fmt::format("{}", zeros({2}).requires_grad_()) == "tensor([0.0000, 0.0000], requires_grad=true)");
  const std::string big = fmt::format("{}", arange(5000));
  CHECK(big == "tensor([0, 1, 2, ..., 4997, 4998, 4999])");
  CHECK(fmt::format("{}", empty({0, 3})) == "tensor([], size=[0, 3])");
  std::ostringstream os;
  os << tensor({1e-6f});
  CHECK(os.str() == "tensor([1.0000e-06])");
}

TEST_CASE("requires_grad_ is for floating-point leaves") {
  CHECK_THROWS_CONTAINING(arange(3).requires_grad_(), "requires_grad_: only floating-point tensors");
  Tensor x = randn({2}).requires_grad_();
  CHECK(x.requires_grad());
  CHECK(x.is_leaf());
  CHECK(!x.detach().requires_grad());
}

// A stand-in for a second device: host memory registered as "cuda" in this test binary
// (only where no real CUDA backend is registered), so the device checks run without a GPU.
namespace {
struct HostBackedAllocator final : Allocator {
  void* allocate(size_t n, Device) override { return n ? std::malloc(n) : nullptr; }
  void deallocate(void* p, size_t, Device) override { std::free(p); }
};
void host_memcpy(void* dst, Device, const void* src, Device, size_t n) {
  if (n) std::memcpy(dst, src, n);
}
}  // namespace

TEST_CASE("device checks: no backend is a clear error; a mismatch names the op and both devices") {
  if (has_allocator(DeviceType::CUDA)) return;  // a real backend is linked: covered by the CUDA tests
  CHECK_THROWS_CONTAINING(zeros({2}, Device::cuda()), "no CUDA backend");
  static HostBackedAllocator fake;
  register_allocator(DeviceType::CUDA, &fake);
  register_device_copy(DeviceType::CUDA, &host_memcpy);
  Tensor on_cpu = from_vector<float>({1, 2}, {2});
  Tensor on_gpu = on_cpu.to(Device::cuda(1));
  CHECK(on_gpu.device() == Device::cuda(1));
  CHECK(fmt::format("{}", on_gpu.device()) == "cuda:1");
  CHECK(on_gpu.cpu().to_vector<float>() == std::vector<float>{1, 2});
  CHECK_THROWS_CONTAINING(add(on_cpu, on_gpu), "add: expected all tensors on one device");
  CHECK_THROWS_CONTAINING(add(on_cpu, on_gpu), "cuda:1");
  CHECK_THROWS_CONTAINING(matmul(on_cpu, on_gpu), "matmul");
#if !MINIGRAD_WITH_CUDA
  // A build without CUDA links the stub backend (cuda/no_cuda_backend.cpp): an op on a GPU
  // tensor reaches it through the same call a CUDA build makes, and the error names the op.
  const char* no_backend = "this op has no CUDA backend in this build";
  CHECK_THROWS_CONTAINING(exp(on_gpu), fmt::format("exp: {}", no_backend));
  CHECK_THROWS_CONTAINING(add(on_gpu, on_gpu), fmt::format("add: {}", no_backend));
  CHECK_THROWS_CONTAINING(where(gt(on_gpu, 1.0), on_gpu, on_gpu), no_backend);
  CHECK_THROWS_CONTAINING(sum(on_gpu), fmt::format("sum: {}", no_backend));
  CHECK_THROWS_CONTAINING(softmax(on_gpu, 0), fmt::format("softmax: {}", no_backend));
  CHECK_THROWS_CONTAINING(matmul(on_gpu, on_gpu), fmt::format("matmul: {}", no_backend));
#endif
  register_allocator(DeviceType::CUDA, nullptr);
  register_device_copy(DeviceType::CUDA, nullptr);
}

// ---- more creation: linspace, eye, randint, rand_like, randn_like, from_blob ----

TEST_CASE("linspace: steps values from start to end, both ends exact") {
  for (int64_t steps : {0, 1, 2, 5, 7, 100}) {
    CAPTURE(steps);
    const double start = -1.25, end = 3.5;
    const std::vector<double> v = linspace(start, end, steps, kFloat64).to_vector<double>();
    REQUIRE(static_cast<int64_t>(v.size()) == steps);
    for (int64_t i = 0; i < steps; ++i) {
      const double expected = steps == 1 ? start : start + (end - start) * static_cast<double>(i) / (steps - 1);
      CHECK(v[static_cast<size_t>(i)] == doctest::Approx(expected).epsilon(1e-15));
    }
    if (steps >= 1) CHECK(v.front() == start);
    if (steps >= 2) CHECK(v.back() == end);
  }
  const Tensor f = linspace(0.0, 1.0, 5);
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f});
  CHECK(linspace(2.0, -2.0, 3, kFloat64).to_vector<double>() == std::vector<double>{2.0, 0.0, -2.0});
  CHECK(linspace(0.0, 10.0, 4, kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6, 10});  // truncated
  CHECK(linspace(0.0, 1.0, 3, TensorOptions(kFloat64).requires_grad()).requires_grad());
  CHECK_THROWS_CONTAINING(linspace(0.0, 1.0, -1), "linspace: number of steps must be non-negative, got -1");
  CHECK_THROWS_CONTAINING(linspace(0.0, INFINITY, 3), "linspace: start and end must be finite");
}

TEST_CASE("eye: ones on the main diagonal, square or not") {
  for (auto [n, m] : std::vector<std::pair<int64_t, int64_t>>{{3, 3}, {2, 4}, {4, 2}, {0, 3}, {3, 0}, {1, 1}}) {
    CAPTURE(n);
    CAPTURE(m);
    const Tensor e = eye(n, m, kFloat64);
    CHECK(e.sizes() == Shape{n, m});
    const std::vector<double> v = e.to_vector<double>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) CHECK(v[static_cast<size_t>(i * m + j)] == (i == j ? 1.0 : 0.0));
  }
  CHECK(eye(3).dtype() == kFloat32);
  CHECK(eye(3).sizes() == Shape{3, 3});
  CHECK(eye(2, kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 0, 1});
  CHECK(eye(2, 3, kBool).to_vector<bool>() == std::vector<bool>{true, false, false, false, true, false});
  CHECK_THROWS_CONTAINING(eye(-1), "eye: n must be non-negative, got -1");
  CHECK_THROWS_CONTAINING(eye(2, -3), "eye: m must be non-negative, got -3");
}

TEST_CASE("randint: uniform integers in [low, high), seeded like rand") {
  manual_seed(77);
  const Tensor r = randint(-3, 4, {20000});
  CHECK(r.dtype() == kInt64);
  std::vector<int64_t> counts(7, 0);
  for (int64_t v : r.to_vector<int64_t>()) {
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++counts[static_cast<size_t>(v + 3)];
  }
  for (int64_t c : counts) CHECK(std::abs(static_cast<double>(c) - 20000.0 / 7) < 200.0);  // ~7 sigma
  // The same seed draws the same integers; the next call draws anew.
  manual_seed(77);
  CHECK(randint(-3, 4, {20000}).to_vector<int64_t>() == r.to_vector<int64_t>());
  CHECK(randint(-3, 4, {20000}).to_vector<int64_t>() != r.to_vector<int64_t>());
  // It takes one stream of the default generator, as rand does: floor(u * range) + low of
  // the float64 uniform drawn from the same state.
  manual_seed(78);
  const std::vector<int64_t> drawn = randint(10, 1000, {500}).to_vector<int64_t>();
  manual_seed(78);
  const std::vector<double> u = rand({500}, kFloat64).to_vector<double>();
  for (size_t i = 0; i < u.size(); ++i) CHECK(drawn[i] == 10 + static_cast<int64_t>(std::floor(u[i] * 990.0)));
  // The one-bound form, other dtypes, the ends of the allowed range.
  for (int64_t v : randint(3, {1000}).to_vector<int64_t>()) CHECK((v >= 0 && v < 3));
  const Tensor f = randint(0, 5, {100}, kFloat32);
  CHECK(f.dtype() == kFloat32);
  for (float v : f.to_vector<float>()) CHECK((v == std::floor(v) && v >= 0.0f && v < 5.0f));
  const int64_t big = int64_t(1) << 53;
  for (int64_t v : randint(-big, 0, {1000}).to_vector<int64_t>()) CHECK((v >= -big && v < 0));
  CHECK(randint(5, 6, {10}).to_vector<int64_t>() == std::vector<int64_t>(10, 5));
  CHECK(randint(0, 2, {0, 3}).sizes() == Shape{0, 3});
  CHECK_THROWS_CONTAINING(randint(4, 4, {2}), "randint: expects low < high, got low = 4 and high = 4");
  CHECK_THROWS_CONTAINING(randint(0, {2}), "randint: expects low < high, got low = 0 and high = 0");
  CHECK_THROWS_CONTAINING(randint(0, big + 1, {2}), "randint: low = 0 and high = 9007199254740993 must lie within");
  CHECK_THROWS_CONTAINING(randint(0, 2, {2}, kBool), "randint: needs an int64 or floating-point dtype, got bool");
  CHECK_THROWS_CONTAINING(randint(0, 2, {-2}), "randint: negative size");
}

TEST_CASE("rand_like and randn_like take the argument's sizes, dtype and device") {
  const Tensor x = zeros({3, 4}, kFloat64).t();
  manual_seed(79);
  const Tensor u = rand_like(x);
  const Tensor n = randn_like(x);
  CHECK(u.sizes() == Shape{4, 3});
  CHECK(u.dtype() == kFloat64);
  CHECK(u.is_contiguous());
  CHECK(n.sizes() == Shape{4, 3});
  manual_seed(79);
  CHECK(rand({4, 3}, kFloat64).to_vector<double>() == u.to_vector<double>());
  CHECK(randn({4, 3}, kFloat64).to_vector<double>() == n.to_vector<double>());
  CHECK(rand_like(zeros({2}, kFloat16)).dtype() == kFloat16);
  CHECK(!rand_like(zeros({2}).requires_grad_()).requires_grad());
  CHECK_THROWS_CONTAINING(rand_like(arange(3)), "rand_like: needs a floating-point dtype, got int64");
  CHECK_THROWS_CONTAINING(randn_like(Tensor()), "randn_like: argument 'self' is an undefined tensor");
}

TEST_CASE("from_blob views the caller's memory; the deleter runs once, after the last view") {
  std::vector<double> buffer = {1, 2, 3, 4, 5, 6};
  {
    Tensor t = from_blob(buffer.data(), {2, 3}, kFloat64);
    CHECK(t.raw_data() == buffer.data());
    CHECK(t.to_vector<double>() == buffer);
    t.mul_(2.0);  // a write through the tensor reaches the buffer
    CHECK(buffer == std::vector<double>{2, 4, 6, 8, 10, 12});
    buffer[4] = -1.0;  // and a write to the buffer is seen by the tensor
    CHECK(t.select(1, 1).to_vector<double>() == std::vector<double>{4, -1});
  }
  CHECK(buffer[0] == 2.0);  // no deleter: the memory is left alone

  // Strides: a [2, 3] view of a 12-element buffer, column-major with a gap of one.
  std::vector<float> wide(12);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = 0.5f + static_cast<float>(i);
  const Tensor strided = from_blob(wide.data(), {2, 3}, {1, 4}, kFloat32);
  CHECK(strided.strides() == Shape{1, 4});
  CHECK(strided.to_vector<float>() == std::vector<float>{wide[0], wide[4], wide[8], wide[1], wide[5], wide[9]});

  // The deleter: called exactly once, with the pointer, when the last tensor over the
  // memory (a view outliving the original) is destroyed.
  int calls = 0;
  void* deleted = nullptr;
  auto* owned = new int64_t[6]{1, 2, 3, 4, 5, 6};
  {
    Tensor view;
    {
      const Tensor t = from_blob(
          owned, {6},
          [&](void* p) {
            ++calls;
            deleted = p;
            delete[] static_cast<int64_t*>(p);
          },
          kInt64);
      view = t.slice(0, 2, 5);
      const Tensor copy = t;
    }
    CHECK(calls == 0);  // the view still reads the memory
    CHECK(view.to_vector<int64_t>() == std::vector<int64_t>{3, 4, 5});
  }
  CHECK(calls == 1);
  CHECK(deleted == owned);

  // requires_grad, and the errors (which never call the deleter).
  std::vector<double> leaf_memory = {0.5, 1.5};
  const Tensor leaf = from_blob(leaf_memory.data(), {2}, TensorOptions(kFloat64).requires_grad());
  CHECK(leaf.requires_grad());
  (leaf * leaf).sum().backward();
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{1.0, 3.0});
  int error_calls = 0;
  auto count = [&](void*) { ++error_calls; };
  CHECK_THROWS_CONTAINING(from_blob(buffer.data(), {2, 3}, {3}, count, kFloat64),
                          "from_blob: 1 strides [3] for 2 sizes [2, 3]");
  CHECK_THROWS_CONTAINING(from_blob(buffer.data(), {2, 3}, {-3, 1}, count, kFloat64),
                          "from_blob: negative stride -3 at dimension 0");
  CHECK_THROWS_CONTAINING(from_blob(nullptr, {2}, count),
                          "from_blob: argument 'data' is a null pointer for 2 elements");
  CHECK_THROWS_CONTAINING(from_blob(buffer.data(), {2, -1}), "from_blob: negative size");
  CHECK(error_calls == 0);
  CHECK(from_blob(nullptr, {0, 4}).numel() == 0);
#if !MINIGRAD_WITH_CUDA
  CHECK_THROWS_CONTAINING(from_blob(buffer.data(), {2}, TensorOptions(kFloat64).device(Device::cuda(0))),
                          "from_blob: a tensor on cuda:0 needs the CUDA backend");
#endif
}

TEST_CASE("options(): a tensor's dtype and device, without requires_grad, to make another like it") {
  const Tensor t = randn({2, 3}, kFloat64).requires_grad_();
  const TensorOptions o = t.options();
  CHECK(o.dtype_ == kFloat64);
  CHECK(o.device_ == kCPU);
  CHECK(!o.requires_grad_);
  const Tensor u = empty({4}, t.options());
  CHECK(u.dtype() == kFloat64);
  CHECK(u.device() == t.device());
  CHECK(!u.requires_grad());
  CHECK(zeros({1}, TensorOptions(kInt64)).options().dtype_ == kInt64);
}
