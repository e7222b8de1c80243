"""The kernels compile for real GPUs without one: Triton's whole pipeline (AST -> TTIR -> TTGIR -> LLVM
-> PTX -> cubin, with the bundled ptxas) for Hopper (sm_90: H100/H200) and Ampere (sm_80: A100).

The interpreter runs the kernels' Python; it does not type-check them as the compiler does
(constexpr specialisation, int64 casts, tile shapes), so this is the check that the CUDA path
builds at all. It runs in a fresh process, because the tests' process has TRITON_INTERPRET=1.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (kernel, dtype of the attention tensors, constexprs, num_warps, num_stages, target capability)
CASES = [
    ("block_sparse", "bf16", dict(MASK_BLOCK=128, HEAD_DIM=128, PRECISION="tf32", BLOCK_M=128, BLOCK_N=64), 4, 3, 90),
    ("block_sparse", "bf16", dict(MASK_BLOCK=128, HEAD_DIM=128, PRECISION="tf32", BLOCK_M=128, BLOCK_N=128), 8, 3, 90),
    ("block_sparse", "fp16", dict(MASK_BLOCK=16, HEAD_DIM=64, PRECISION="tf32", BLOCK_M=16, BLOCK_N=16), 4, 2, 80),
    ("decode", "bf16", dict(G=4, BLOCK_G=16, BLOCK_D=128, IEEE=False, BLOCK_N=64), 4, 2, 90),
    ("decode", "fp32", dict(G=8, BLOCK_G=16, BLOCK_D=64, IEEE=True, BLOCK_N=32), 4, 2, 80),
    ("merge", "bf16", dict(BLOCK_S=2, BLOCK_D=128), 4, 1, 90),
    ("merge", "fp16", dict(BLOCK_S=64, BLOCK_D=64), 4, 1, 80),
]


def compile_case(kernel, dtype, constexprs, num_warps, num_stages, capability):
    """Compile one kernel for ``capability``; return the bytes of shared memory it needs."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from companion.kernels import block_sparse_attention as bsa
    from companion.kernels import sparse_decode_attention as sda

    fn, pointers = {
        "block_sparse": (bsa._block_sparse_fwd, dict(Q=dtype, K=dtype, V=dtype, O=dtype, LSE="fp32", KV_IDX="i32",
                                                     KV_CNT="i32")),
        "decode": (sda._sparse_decode_kernel, dict(Q=dtype, K=dtype, V=dtype, Offsets="i64", Lengths="i32",
                                                   Acc="fp32", M="fp32", L="fp32")),
        "merge": (sda._merge_splits, dict(Acc="fp32", M="fp32", L="fp32", Out=dtype, Lse="fp32")),
    }[kernel]
    signature = {name: ("constexpr" if name in constexprs else f"*{pointers[name]}" if name in pointers
                        else "fp32" if name == "qk_scale" else "i32") for name in fn.arg_names}
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", capability, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    return compiled.metadata.shared


@pytest.mark.skipif(sys.platform != "linux", reason="Triton's CUDA compiler ships on Linux")
def test_the_kernels_compile_for_hopper_and_ampere():
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    run = subprocess.run([sys.executable, __file__], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("compiled") == len(CASES), run.stdout


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for case in CASES:
        shared = compile_case(*case)
        print(f"compiled {case[0]} {case[1]} sm_{case[5]} {case[2]}: {shared} bytes of shared memory", flush=True)
