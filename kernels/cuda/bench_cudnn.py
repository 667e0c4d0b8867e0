# bench_cudnn.py — cuDNN's fused attention (through PyTorch's SDPA with the CUDNN_ATTENTION backend) on the
# same shapes, inputs and FLOP counting as bench_attention.cu, for the comparison table of ci/gpu.sh.
# batch = 16384 / seq, heads = 2048 / d, bf16 N(0, 1) inputs; CUDA events around 10 calls after 2 warm-ups,
# best of 5; forward 4·b·h·n²·d FLOPs (halved when causal), backward 2.5× that.
# Run (on a GPU host with PyTorch): python3 kernels/cuda/bench_cudnn.py > cudnn.txt
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa


def time_ms(fn, reps=10, rounds=5):
    fn(), fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) / reps)
    return best


def main():
    seqs = [int(s) for s in sys.argv[1:]] or [1024, 2048, 4096, 8192, 16384]
    print(f"# cuDNN SDPA via torch {torch.__version__}, cudnn {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    print(f"{'config':28s} {'cudnn TFLOP/s':>14s}")
    for bwd in (False, True):
        for d in (64, 128):
            for causal in (False, True):
                for seq in seqs:
                    b, h = 16384 // seq, 2048 // d
                    name = f"{'bwd' if bwd else 'fwd'} d{d} {'causal' if causal else 'full  '} seq{seq}"
                    try:
                        q, k, v = (torch.randn(b, h, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=bwd)
                                   for _ in range(3))
                        flops = 4.0 * b * h * seq * seq * d * (0.5 if causal else 1.0) * (2.5 if bwd else 1.0)
                        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                            if bwd:
                                out = sdpa(q, k, v, is_causal=causal)
                                g = torch.randn_like(out)
                                ms = time_ms(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
                            else:
                                with torch.no_grad():
                                    ms = time_ms(lambda: sdpa(q, k, v, is_causal=causal))
                        print(f"{name:28s} {flops / ms / 1e9:14.1f}", flush=True)
                    except Exception as e:  # a shape cuDNN refuses: say so, keep going
                        print(f"{name:28s} {'n/a':>14s}  ({type(e).__name__}: {str(e)[:80]})", flush=True)


if __name__ == "__main__":
    main()
