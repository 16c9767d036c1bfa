r"""PyTorch's SDPA flash backend (FlashAttention-2) at the shapes of attention_profile.cpp, forward
then backward, a few times each and nothing else, for Nsight Compute to set beside minigrad's
kernels. Not part of the build or the tests. On the GPU machine:

  ncu --clock-control none --set full -k regex:'flash_(fwd_kernel|bwd_dq_dk_dv)' --launch-skip 2 \
    --launch-count 2 python3 bench/experiments/attention_profile_torch.py 2 0

Arguments as attention_profile.cpp's: repeats (default 3), then the shape (0..3; default all).
"""
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

SHAPES = [((4, 16, 4096, 128), False), ((4, 16, 4096, 128), True), ((16, 16, 1024, 64), False),
          ((8, 12, 1024, 64), True)]


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    only = int(sys.argv[2]) if len(sys.argv) > 2 else -1
    torch.manual_seed(7)
    for s, (shape, is_causal) in enumerate(SHAPES):
        if only >= 0 and s != only:
            continue
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            for _ in range(repeats):
                torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=is_causal).backward(grad)
        torch.cuda.synchronize()
        print(f"{shape}{' causal' if is_causal else ''}: {repeats} forward and backward passes")


if __name__ == "__main__":
    main()
