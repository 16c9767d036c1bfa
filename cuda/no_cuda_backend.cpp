// The CUDA backend of a build without CUDA (MINIGRAD_CUDA=OFF, or no CUDA compiler found):
// every entry point that ops/ calls, defined to raise an error that names the op, and the
// probe core makes at start-up, which finds no GPU (as a CUDA build does on a machine
// without one).
//
// Why a stub and not a dispatch table. An op reaches a backend by one plain call, chosen by
// the device of its tensors:
//   if (x.device().is_cuda()) return cuda::softmax_rows(x, y, log);
//   ... the CPU loop ...
// The cuda/ headers are declared in every build, so that call compiles, and is type-checked,
// with or without a GPU; this file supplies the definitions when there is none. A reader
// follows the call with "go to definition" and finds the kernel's launcher. A table of
// function pointers filled at start-up (PyTorch's DispatchStub) pays for its indirection
// when there are many backends, CPU instruction-set variants and backends registered from
// outside the library; minigrad has two backends, both known when it is built.
//
// In a CPU-only build no tensor normally lives on a GPU (there is no CUDA allocator), so
// these are reached only when something made one anyway: a device registered by a test, or
// a program built against a CUDA build and linked against this one.
#include <minigrad/core/allocator.h>
#include <minigrad/core/error.h>
#include <minigrad/cuda/blaslt.h>
#include <minigrad/cuda/copy.h>
#include <minigrad/cuda/cross_entropy.h>
#include <minigrad/cuda/elementwise_stub.h>
#include <minigrad/cuda/flash_attention.h>
#include <minigrad/cuda/gelu_bias_backward.h>
#include <minigrad/cuda/indexing.h>
#include <minigrad/cuda/matmul.h>
#include <minigrad/cuda/normalization.h>
#include <minigrad/cuda/optim.h>
#include <minigrad/cuda/random.h>
#include <minigrad/cuda/reduce.h>
#include <minigrad/cuda/softmax.h>
#include <minigrad/cuda/softmax_dropout.h>

namespace minigrad {
namespace cuda {

void raise_no_cuda_backend(const char* op) {
  detail::throw_error(fmt::format("{}: this op has no CUDA backend in this build (minigrad was built without "
                                  "CUDA: MINIGRAD_CUDA=OFF, or no CUDA compiler was found)",
                                  op));
}

Backend probe_backend() { return {}; }

void copy_bytes_between(void*, Device, const void*, Device, size_t) { raise_no_cuda_backend("copy"); }
void copy_strided(const Tensor&, const Tensor&) { raise_no_cuda_backend("copy"); }
void fill(const Tensor&, double) { raise_no_cuda_backend("fill_"); }

void sum_reduce(const Tensor&, const std::vector<bool>&, double, const Tensor&) { raise_no_cuda_backend("sum"); }
void extremum_reduce(const Tensor&, const std::vector<bool>&, Extremum kind, const Tensor&, const Tensor&) {
  raise_no_cuda_backend(kind == Extremum::Max ? "max" : "min");
}
void prod_reduce(const Tensor&, const std::vector<bool>&, const Tensor&) { raise_no_cuda_backend("prod"); }
void cumsum(const Tensor&, int64_t, int64_t, int64_t, bool, const Tensor&) { raise_no_cuda_backend("cumsum"); }

void softmax_rows(const Tensor&, const Tensor&, bool log) { raise_no_cuda_backend(log ? "log_softmax" : "softmax"); }
void softmax_backward_rows(const Tensor&, const Tensor&, const Tensor&, bool log) {
  raise_no_cuda_backend(log ? "log_softmax_backward" : "softmax_backward");
}

void normalization_forward(const char* op, const Tensor&, const Tensor&, const Tensor&, int64_t,
                           normalization::NormKind, normalization::Epilogue, double, const Tensor&, const Tensor&,
                           const Tensor&) {
  raise_no_cuda_backend(op);
}
void normalization_backward(const char* op, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, int64_t, normalization::NormKind, normalization::Epilogue,
                            const Tensor&, const Tensor&, const Tensor&) {
  raise_no_cuda_backend(fmt::format("{}_backward", op).c_str());
}

bool gelu_backward_and_bias_grad(const Tensor&, const Tensor&, GeluApproximation, const Tensor&, const Tensor&) {
  raise_no_cuda_backend("linear_gelu");
}

void matmul(const Tensor&, const Tensor&, const Tensor&) { raise_no_cuda_backend("matmul"); }
void set_matmul_allow_tf32(bool) { raise_no_cuda_backend("set_matmul_allow_tf32"); }
bool matmul_allow_tf32() { raise_no_cuda_backend("matmul_allow_tf32"); }
bool gemm_with_epilogue(const Tensor&, const Tensor&, const Tensor&, GemmEpilogue, const Tensor&, const Tensor&) {
  raise_no_cuda_backend("linear");
}
int64_t gemm_with_epilogue_fallbacks() { return 0; }

void fill_uniform(const Tensor&, uint64_t, uint64_t) { raise_no_cuda_backend("rand"); }
void fill_normal(const Tensor&, uint64_t, uint64_t) { raise_no_cuda_backend("randn"); }

void index_min_max(const Tensor&, int64_t&, int64_t&) { raise_no_cuda_backend("index bounds check"); }
void gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { raise_no_cuda_backend("gather"); }
void scatter(const Tensor&, int64_t, const Tensor&, const Tensor&, bool accumulate, const Tensor&) {
  raise_no_cuda_backend(accumulate ? "scatter_add" : "scatter");
}
void topk_indices(const Tensor&, int64_t, bool, const Tensor&) { raise_no_cuda_backend("topk"); }
void multinomial_scan(const Tensor&, const Tensor&, const Tensor&) { raise_no_cuda_backend("multinomial"); }
void multinomial_with_replacement(const Tensor&, uint64_t, uint64_t, const Tensor&) {
  raise_no_cuda_backend("multinomial");
}
void multinomial_race_keys(const Tensor&, uint64_t, uint64_t, const Tensor&) { raise_no_cuda_backend("multinomial"); }

// ---- scaled_dot_product_attention ----
bool flash_attention_supports(DType, int64_t, int64_t) { return false; }
void flash_attention_forward(const Tensor&, const Tensor&, const Tensor&, const AttentionSpec&, const Tensor&,
                             const Tensor&) {
  raise_no_cuda_backend("scaled_dot_product_attention");
}
void flash_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const AttentionSpec&, const Tensor&, const Tensor&, const Tensor&) {
  raise_no_cuda_backend("scaled_dot_product_attention_backward");
}
// ---- end of scaled_dot_product_attention ----

// ---- softmax_dropout ----
void softmax_dropout_rows(const Tensor&, const SoftmaxDropoutRows&, const Tensor&, const Tensor&) {
  raise_no_cuda_backend("softmax_dropout");
}
void softmax_dropout_backward_rows(const Tensor&, const Tensor&, const Tensor&, const SoftmaxDropoutRows&,
                                   const Tensor&) {
  raise_no_cuda_backend("softmax_dropout_backward");
}
// ---- end of softmax_dropout ----

// ---- cross_entropy ----
void cross_entropy_count_targets(const Tensor&, int64_t, int64_t, const Tensor&) {
  raise_no_cuda_backend("cross_entropy");
}
void cross_entropy_rows(const Tensor&, const Tensor&, const CrossEntropyRows&, const Tensor&, const Tensor&) {
  raise_no_cuda_backend("cross_entropy");
}
void cross_entropy_scale_grad(const Tensor&, const Tensor&) { raise_no_cuda_backend("cross_entropy_backward"); }
// ---- end of cross_entropy ----

// ---- optimizers ----
void adamw_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                const std::vector<Tensor>&, const std::vector<Tensor>&, const AdamWStep&) {
  raise_no_cuda_backend("AdamW");
}
void sgd_step(const std::vector<Tensor>&, const std::vector<Tensor>&, const std::vector<Tensor>&,
              const std::vector<Tensor>&, const SGDStep&) {
  raise_no_cuda_backend("SGD");
}
Tensor sum_of_squares(const std::vector<Tensor>&) { raise_no_cuda_backend("clip_grad_norm_"); }
void scale_(const std::vector<Tensor>&, double) { raise_no_cuda_backend("clip_grad_norm_"); }
// ---- end of optimizers ----

// The elementwise engine: the same entries as a CUDA build compiles (kernels/elementwise_list.h).
MG_ELEMENTWISE_KERNELS(MG_STUB_ELEMENTWISE)

}  // namespace cuda
}  // namespace minigrad
