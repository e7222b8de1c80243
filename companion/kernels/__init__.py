"""Triton kernels of the book, one module per kernel, each beside its pure-torch reference.

Every module holds the ``@triton.jit`` kernel, a launcher that checks its inputs and raises
``ValueError`` naming the bad argument, the torch reference, and a public op that runs the
kernel on CUDA tensors and the reference on CPU tensors unless told otherwise
(``backend="triton" | "torch" | "auto"``). On a machine without a GPU the kernels run under
Triton's interpreter: set ``TRITON_INTERPRET=1`` *before* importing a kernel module.
Benchmarks live apart, in ``benchmarks/``.
"""
