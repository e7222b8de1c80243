"""Sparse VideoGen (Xi et al., ICML 2025) at book scale: spatial and temporal heads, online
profiling, the layout transformation, and a block-sparse attention kernel
(:mod:`companion.kernels.block_sparse_attention`).

Modules, in reading order: :mod:`.data` (bouncing shapes), :mod:`.model` (a tiny video DiT),
:mod:`.train` (rectified flow, the shipped checkpoint), :mod:`.layout` (frame-major and
token-major orders), :mod:`.masks` (the two sparse patterns, block density), :mod:`.profiling`
(classifying heads from a few rows), :mod:`.sparse` (SVG attention and its baselines),
:mod:`.metrics` (PSNR, SSIM, FLOPs).
"""
