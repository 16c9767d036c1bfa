// core: bad inputs to creation, metadata and conversion give defined results or clear
// errors naming the op, never a wrapped size, a read through null or undefined behaviour.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include <minigrad/core/generator.h>
#include "tests/test_support.h"

using namespace minigrad;

namespace {
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
}  // namespace

TEST_CASE("checked_numel and checked_nbytes refuse negative sizes and counts that overflow") {
  CHECK(checked_numel({2, 3, 4}, "view") == 24);
  CHECK(checked_numel({}, "view") == 1);
  CHECK(checked_numel({0, int64_t{1} << 62, int64_t{1} << 62}, "view") == 0);  // empty whatever the rest
  CHECK(checked_numel({int64_t{1} << 31, int64_t{1} << 31}, "view") == int64_t{1} << 62);
  CHECK_THROWS_CONTAINING(checked_numel({2, -1}, "view"), "view: negative size -1 in dim 1 of shape [2, -1]");
  CHECK_THROWS_CONTAINING(checked_numel({int64_t{1} << 32, int64_t{1} << 32}, "view"),
                          "view: shape [4294967296, 4294967296] has too many elements");
  // 2^32 * 2^32 * 2 wraps to exactly 0 in 64 bits: the zero must not be taken for an empty shape.
  CHECK_THROWS_CONTAINING(checked_numel({int64_t{1} << 32, int64_t{1} << 32, 2}, "expand"),
                          "expand: shape [4294967296, 4294967296, 2] has too many elements");
  CHECK(checked_nbytes(10, 8, "empty") == 80);
  CHECK(checked_nbytes(0, 8, "empty") == 0);
  CHECK_THROWS_CONTAINING(checked_nbytes(int64_t{1} << 61, 8, "empty"),
                          "empty: 2305843009213693952 elements of 8 bytes do not fit");
}

TEST_CASE("creation refuses shapes whose element or byte count overflows, naming the op") {
  CHECK_THROWS_CONTAINING(empty({int64_t{1} << 32, int64_t{1} << 32}), "empty: shape [4294967296, 4294967296] has too many elements");
  // 2^62 elements fit in int64, their 2^64 bytes do not (they wrapped to a null storage).
  CHECK_THROWS_CONTAINING(empty({int64_t{1} << 62}), "empty: 4611686018427387904 elements of 4 bytes do not fit");
  CHECK_THROWS_CONTAINING(zeros({int64_t{1} << 62}), "zeros: 4611686018427387904 elements of 4 bytes do not fit");
  CHECK_THROWS_CONTAINING(ones({int64_t{1} << 62}, kFloat64), "ones: 4611686018427387904 elements of 8 bytes");
  CHECK_THROWS_CONTAINING(full({int64_t{1} << 62}, 1.0), "full: 4611686018427387904 elements");
  CHECK_THROWS_CONTAINING(rand({int64_t{1} << 32, int64_t{1} << 32}), "rand: shape [4294967296, 4294967296]");
  CHECK_THROWS_CONTAINING(randn({int64_t{1} << 62}), "randn: 4611686018427387904 elements");
  // Sizes whose product wraps to exactly 0 are not an empty tensor either.
  CHECK_THROWS_CONTAINING(zeros({int64_t{1} << 31, int64_t{1} << 31, 4}), "zeros: shape [2147483648, 2147483648, 4] has too many elements");
  CHECK(empty({0, int64_t{1} << 62, int64_t{1} << 62}).numel() == 0);
  CHECK(zeros({int64_t{1} << 62, 0}).sizes() == Shape{int64_t{1} << 62, 0});
}

TEST_CASE("creation errors name the function the user called") {
  CHECK_THROWS_CONTAINING(empty({-1}), "empty: negative size -1 in dim 0 of shape [-1]");
  CHECK_THROWS_CONTAINING(zeros({-1}), "zeros: negative size");
  CHECK_THROWS_CONTAINING(ones({3, -2}), "ones: negative size -2 in dim 1");
  CHECK_THROWS_CONTAINING(full({-1}, 2.0), "full: negative size");
  CHECK_THROWS_CONTAINING(rand({-1}), "rand: negative size");
  CHECK_THROWS_CONTAINING(randn({-1}), "randn: negative size");
  CHECK_THROWS_CONTAINING(from_vector<float>({}, {-1}), "from_vector: negative size");
  CHECK_THROWS_CONTAINING(arange(0.0, 1e300, 1e-300), "arange: ");
  const Tensor undefined;
  CHECK_THROWS_CONTAINING(empty_like(undefined), "empty_like: argument 'self' is an undefined tensor");
  CHECK_THROWS_CONTAINING(zeros_like(undefined), "zeros_like: argument 'self' is an undefined tensor");
  CHECK_THROWS_CONTAINING(ones_like(undefined), "ones_like: argument 'self' is an undefined tensor");
  CHECK_THROWS_CONTAINING(full_like(undefined, 1.0), "full_like: argument 'self' is an undefined tensor");
}

TEST_CASE("size and stride of a 0-d tensor: it has no dimension to index") {
  const Tensor s = scalar_tensor(3.0);
  CHECK_THROWS_CONTAINING(s.size(0), "size: dimension 0 is out of range for a 0-d tensor 'self' (it has no dimensions)");
  CHECK_THROWS_CONTAINING(s.size(-1), "size: dimension -1 is out of range for a 0-d tensor 'self'");
  CHECK_THROWS_CONTAINING(s.stride(0), "stride: dimension 0 is out of range for a 0-d tensor 'self'");
  CHECK_THROWS_CONTAINING(s.stride(-1), "stride: dimension -1 is out of range for a 0-d tensor 'self'");
  // A 1-D tensor still wraps -1 and refuses 1.
  const Tensor v = zeros({4});
  CHECK(v.size(-1) == 4);
  CHECK(v.stride(0) == 1);
  CHECK_THROWS_CONTAINING(v.size(1), "size: dim 1 is out of range for a 1-D tensor");
}

TEST_CASE("an undefined tensor is refused by every accessor with a clear error") {
  const Tensor u;
  const char* const kWhat = "called on an undefined tensor";
  CHECK_THROWS_CONTAINING(u.sizes(), "sizes() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.strides(), "strides() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.dim(), "dim() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.numel(), "numel() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.dtype(), "dtype() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.device(), "device() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.storage_offset(), "storage_offset() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.storage(), "storage() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.raw_data(), "raw_data() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.data_ptr<float>(), kWhat);
  CHECK_THROWS_CONTAINING(u.element_size(), kWhat);
  CHECK_THROWS_CONTAINING(u.size(0), kWhat);
  CHECK_THROWS_CONTAINING(u.stride(0), kWhat);
  CHECK_THROWS_CONTAINING(u.is_contiguous(), "is_contiguous() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.requires_grad(), "requires_grad() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.detach(), "detach: called on an undefined tensor");
  Tensor mutable_u;
  CHECK_THROWS_CONTAINING(mutable_u.requires_grad_(), "requires_grad_: called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.item<double>(), "item: undefined tensor");
  CHECK_THROWS_CONTAINING(u.grad(), "grad() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.is_leaf(), "is_leaf() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.grad_fn(), "grad_fn() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.output_nr(), "output_nr() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.version(), "version() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(mutable_u.mutable_grad(), "mutable_grad() called on an undefined tensor");
  CHECK_THROWS_CONTAINING(u.backward(), "backward: output 0 is undefined");
  CHECK_THROWS_CONTAINING(u.retain_grad(), "retain_grad: undefined tensor");
  CHECK_THROWS_CONTAINING(u.register_hook([](const Tensor& g) { return g; }), "register_hook: undefined tensor");
  CHECK(fmt::format("{}", u) == "tensor(undefined)");
  // The common way to meet one: the .grad of a leaf that no backward has reached yet.
  const Tensor x = zeros({2}).requires_grad_();
  CHECK_FALSE(x.grad().defined());
  CHECK_THROWS_CONTAINING(x.grad().sizes(), "x.grad() before a backward");
}

TEST_CASE("TensorOptions says whether a dtype was named") {
  CHECK_FALSE(TensorOptions().dtype_set_);
  CHECK_FALSE(requires_grad().dtype_set_);
  CHECK_FALSE(device(kCPU).dtype_set_);
  CHECK(TensorOptions(kFloat64).dtype_set_);
  CHECK(dtype(kFloat32).requires_grad().dtype_set_);  // naming the default is still naming it
  CHECK(TensorOptions().dtype_ == kFloat32);           // dtype_ stays valid for its direct readers
  CHECK(requires_grad().dtype_or(kInt64) == kInt64);
  CHECK(dtype(kBool).dtype_or(kInt64) == kBool);
}

TEST_CASE("from_vector keeps T's dtype unless the options name one") {
  const Tensor d = from_vector<double>({1.5, 2.5}, {2}, requires_grad());
  CHECK(d.dtype() == kFloat64);
  CHECK(d.requires_grad());
  CHECK(from_vector<int64_t>({kInt64Max}, {1}, device(kCPU)).to_vector<int64_t>() == std::vector<int64_t>{kInt64Max});
  CHECK(from_vector<bool>({true}, {1}, TensorOptions()).dtype() == kBool);
  CHECK(from_vector<double>({1.5}, {1}, dtype(kFloat32).requires_grad()).dtype() == kFloat32);
  CHECK(from_vector<double>({1.5}, {1}).dtype() == kFloat64);
  // A list of double literals is float32, as a Python list of floats is in PyTorch.
  CHECK(tensor({1.0, 2.0}).dtype() == kFloat32);
  CHECK(tensor({1.0, 2.0}, requires_grad()).dtype() == kFloat32);
  CHECK(tensor({1.0, 2.0}, kFloat64).dtype() == kFloat64);
  // arange is int64 unless a dtype is named, even when the options say something else.
  CHECK(arange(0.0, 3.0, 1.0, device(kCPU)).dtype() == kInt64);
}

TEST_CASE("float to int64 conversion: truncation, NaN to 0, saturation at the ends of the range") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> values{nan, inf, -inf, 1e30, -1e30, 2.9, -2.9, -0.5,
                                   -9223372036854775808.0,  // -2^63: in range, exact
                                   9223372036854775807.0};  // rounds to 2^63 in double: one past the end
  const std::vector<int64_t> expected{0, kInt64Max, kInt64Min, kInt64Max, kInt64Min, 2, -2, 0, kInt64Min, kInt64Max};
  CHECK(from_vector<double>(values, {10}).to(kInt64).to_vector<int64_t>() == expected);
  CHECK(from_vector<double>(values, {10}).to(kFloat32).to(kInt64).to_vector<int64_t>() == expected);
  CHECK(from_vector<double>(values, {10}).to_vector<int64_t>() == expected);
  CHECK(scalar_tensor(nan, kFloat64).item<int64_t>() == 0);
  CHECK(scalar_tensor(-inf).item<int64_t>() == kInt64Min);
  // The half types go through float: their infinities saturate too.
  const std::vector<float> halves{NAN, INFINITY, -INFINITY, 65504.0f, -3.75f};
  const std::vector<int64_t> from_halves{0, kInt64Max, kInt64Min, 65504, -3};
  CHECK(from_vector<float>(halves, {5}, kFloat16).to(kInt64).to_vector<int64_t>() == from_halves);
  CHECK(from_vector<float>(halves, {5}, kBFloat16).to(kInt64).to_vector<int64_t>()[1] == kInt64Max);
  // To bool is unchanged: anything nonzero, NaN included, is true.
  CHECK(from_vector<double>({nan, 0.0, -0.0, 0.25}, {4}).to(kBool).to_vector<bool>() ==
        std::vector<bool>{true, false, false, true});
}

TEST_CASE("full, full_like and scalar_tensor refuse a value an int64 tensor cannot hold, as fill_ does") {
  CHECK_THROWS_CONTAINING(zeros({2}, kInt64).fill_(2.5), "fill_: argument 'value' is 2.5");
  CHECK_THROWS_CONTAINING(full({2}, 2.5, kInt64), "full: argument 'fill_value' is 2.5, which an int64 tensor cannot hold");
  CHECK_THROWS_CONTAINING(full({2}, NAN, kInt64), "full: argument 'fill_value' is nan");
  CHECK_THROWS_CONTAINING(full({2}, 1e19, kInt64), "full: argument 'fill_value'");
  CHECK_THROWS_CONTAINING(full_like(arange(3), 0.5), "full_like: argument 'fill_value' is 0.5");
  CHECK_THROWS_CONTAINING(scalar_tensor(2.5, kInt64), "scalar_tensor: argument 's' is 2.5");
  CHECK(full({2}, -9223372036854775808.0, kInt64).to_vector<int64_t>() == std::vector<int64_t>{kInt64Min, kInt64Min});
  CHECK(full({1}, 2.5, kBool).item<bool>());  // bool takes any value: nonzero is true
  CHECK(full({1}, 2.5, kFloat64).item<double>() == 2.5);
}

TEST_CASE("arange refuses infinite, NaN and zero steps and ranges, and lengths that overflow") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_CONTAINING(arange(0.0, inf), "arange: unsupported range [0, inf): start and end must be finite");
  CHECK_THROWS_CONTAINING(arange(-inf, 0.0), "arange: unsupported range");
  CHECK_THROWS_CONTAINING(arange(nan, 1.0), "arange: unsupported range [nan, 1)");
  CHECK_THROWS_CONTAINING(arange(0.0, nan), "arange: unsupported range");
  CHECK_THROWS_CONTAINING(arange(0.0, 1.0, nan), "arange: step must be finite, got nan");
  CHECK_THROWS_CONTAINING(arange(0.0, 1.0, inf), "arange: step must be finite");
  CHECK_THROWS_CONTAINING(arange(0.0, 1.0, 0.0), "arange: step must be nonzero");
  CHECK_THROWS_CONTAINING(arange(0.0, 1e19), "arange: the range [0, 1e+19) in steps of 1 has too many elements");
  CHECK_THROWS_CONTAINING(arange(-1.5e308, 1.5e308), "has too many elements");  // end - start is inf
  CHECK_THROWS_CONTAINING(arange(0.0, 1e300, 1e-300), "has too many elements");
  // The length fits in int64, the bytes do not.
  CHECK_THROWS_CONTAINING(arange(0.0, 4611686018427387904.0, 1.0, kFloat32), "arange: 4611686018427387904 elements of 4 bytes");
  CHECK(arange(3.0, 0.0, -1.0).to_vector<int64_t>() == std::vector<int64_t>{3, 2, 1});
  CHECK(arange(2.0, 2.0).numel() == 0);
}

TEST_CASE("int64 values print exactly, not through double") {
  const int64_t two_pow_62_plus_1 = (int64_t{1} << 62) + 1;
  CHECK(fmt::format("{}", from_vector<int64_t>({two_pow_62_plus_1, kInt64Min, kInt64Max}, {3})) ==
        "tensor([4611686018427387905, -9223372036854775808, 9223372036854775807])");
  CHECK(fmt::format("{}", scalar_tensor(-7.0, kInt64)) == "tensor(-7)");
}

TEST_CASE("int64 add_ and mul_ wrap around on overflow, as in PyTorch") {
  Tensor x = from_vector<int64_t>({kInt64Max, kInt64Min}, {2});
  x.add_(1.0);
  CHECK(x.to_vector<int64_t>() == std::vector<int64_t>{kInt64Min, kInt64Min + 1});
  Tensor y = from_vector<int64_t>({kInt64Max}, {1});
  y.add_(from_vector<int64_t>({1}, {1}));
  CHECK(y.item<int64_t>() == kInt64Min);
  Tensor z = from_vector<int64_t>({kInt64Max}, {1});
  z.add_(from_vector<int64_t>({kInt64Max}, {1}), 2.0);  // max + 2 * max = 3 * max, mod 2^64
  CHECK(z.item<int64_t>() == kInt64Max - 2);
  Tensor w = from_vector<int64_t>({kInt64Max, int64_t{1} << 62}, {2});
  w.mul_(2.0);
  CHECK(w.to_vector<int64_t>() == std::vector<int64_t>{-2, kInt64Min});
  Tensor v = from_vector<int64_t>({kInt64Min}, {1});
  v.mul_(from_vector<int64_t>({-1}, {1}));
  CHECK(v.item<int64_t>() == kInt64Min);
}

// Run under ThreadSanitizer by `make tsan`: the two threads share the default generator.
TEST_CASE("the default generator gives two threads distinct streams, as a sequential run would") {
  constexpr int kDrawsPerThread = 200;
  auto draw = [](int count) {
    std::vector<std::vector<float>> out;
    for (int i = 0; i < count; ++i) out.push_back(randn({4}).to_vector<float>());
    return out;
  };
  manual_seed(77);
  std::vector<std::vector<float>> sequential = draw(2 * kDrawsPerThread);
  manual_seed(77);
  std::vector<std::vector<float>> first, second;
  std::thread a([&] { first = draw(kDrawsPerThread); });
  std::thread b([&] { second = draw(kDrawsPerThread); });
  a.join();
  b.join();
  // Each draw reserved one stream: together the threads took streams 0 .. 2n-1, each once,
  // so their draws are the sequential ones in some interleaving.
  std::vector<std::vector<float>> threaded = first;
  threaded.insert(threaded.end(), second.begin(), second.end());
  std::sort(sequential.begin(), sequential.end());
  std::sort(threaded.begin(), threaded.end());
  CHECK(threaded == sequential);
  CHECK(default_generator().offset() == 2 * kDrawsPerThread);

  // Reservations directly: no offset twice, none skipped, while a third thread reads the seed.
  manual_seed(5);
  std::vector<uint64_t> offsets_a, offsets_b;
  std::thread c([&] {
    for (int i = 0; i < 1000; ++i) offsets_a.push_back(default_generator().reserve().offset);
  });
  std::thread d([&] {
    for (int i = 0; i < 1000; ++i) offsets_b.push_back(default_generator().reserve().offset);
  });
  std::thread reader([] { (void)default_generator().seed(); });
  c.join();
  d.join();
  reader.join();
  std::vector<uint64_t> all = offsets_a;
  all.insert(all.end(), offsets_b.begin(), offsets_b.end());
  std::sort(all.begin(), all.end());
  std::vector<uint64_t> expected(2000);
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = i;
  CHECK(all == expected);
}
