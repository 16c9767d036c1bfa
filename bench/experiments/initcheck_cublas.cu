// Does compute-sanitizer's initcheck see cuBLAS's writes of C? The product of
// tests/test_cuda_matmul.cpp that initcheck flagged ([192, 200] x [200, 48] in float16 and
// bfloat16), with nothing of minigrad around it: C from cudaMalloc, written only by
// cublasGemmEx, then copied to the host. Run under `compute-sanitizer --tool initcheck`;
// with an argument, C is cleared by cudaMemset first (the control).
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

int main(int argc, char**) {
  const int m = 192, k = 200, n = 48;
  std::vector<__half> ha(m * k), hb(k * n), hc(m * n);
  for (int i = 0; i < m * k; ++i) ha[i] = __float2half(0.01f * (i % 97));
  for (int i = 0; i < k * n; ++i) hb[i] = __float2half(0.02f * (i % 89));
  __half *a, *b, *c;
  cudaMalloc(&a, m * k * 2);
  cudaMalloc(&b, k * n * 2);
  cudaMalloc(&c, m * n * 2);
  cudaMemcpy(a, ha.data(), m * k * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), k * n * 2, cudaMemcpyHostToDevice);
  if (argc > 1) cudaMemset(c, 0, m * n * 2);
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1.f, zero = 0.f;
  // row-major C = A B as column-major C^T = B^T A^T
  const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, CUDA_R_16F, n, a, CUDA_R_16F,
                                         k, &zero, c, CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cudaMemcpy(hc.data(), c, m * n * 2, cudaMemcpyDeviceToHost);
  double sum = 0;
  for (int i = 0; i < m * n; ++i) sum += __half2float(hc[i]);
  std::printf("cublas status %d, C sum %.3f (%s)\n", static_cast<int>(st), sum, argc > 1 ? "C cleared first" : "C fresh");
  return st == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
