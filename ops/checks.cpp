// The argument checks every op runs first. Each message names the op and the argument.
#include <minigrad/ops/cpu_loops.h>

namespace minigrad {

void check_defined(const char* op, const char* arg, const Tensor& t) {
  MG_CHECK(t.defined(), "{}: argument '{}' is an undefined tensor", op, arg);
}

void check_floating(const char* op, const char* arg, const Tensor& t) {
  MG_CHECK(is_floating(t.dtype()), "{}: expected a floating-point tensor for argument '{}', got {}", op, arg,
           t.dtype());
}

void check_same_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  MG_CHECK(a.dtype() == b.dtype(),
           "{}: expected one dtype, but argument '{}' is {} and argument '{}' is {} (convert one with .to())", op,
           a_name, a.dtype(), b_name, b.dtype());
}

void check_same_device(const char* op, const char* a_name, const Tensor& a, const char* b_name, const Tensor& b) {
  MG_CHECK(a.device() == b.device(),
           "{}: expected all tensors on one device, but argument '{}' is on {} and argument '{}' is on {} (move "
           "one with .to())",
           op, a_name, a.device(), b_name, b.device());
}

void check_cpu(const char* op, const char* arg, const Tensor& t) {
  MG_CHECK(t.device().is_cpu(), "{}: argument '{}' is on {}, and this build has no {} kernel for {}", op, arg,
           t.device(), t.device().is_cuda() ? "CUDA" : "device", op);
}

}  // namespace minigrad
