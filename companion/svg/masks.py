"""The two sparse patterns of Sparse VideoGen, as element masks and as block masks.

Both patterns are the *same band* ``|i - j| < w`` over the video tokens, plus every condition
row and column (the text "sink"); they differ in the order the band is drawn in:

* spatial head: the band in frame-major order (a query sees its own frame and its neighbours);
* temporal head: the band in token-major order (a query sees its own spatial position, and its
  neighbours, in every frame), drawn back in frame-major coordinates it is a set of stripes.

Element masks here are always in frame-major coordinates, ``[N, N]`` bool. What the kernel runs
is a *block* mask: a head is computed block by block, so its cost is its block density.
"""

from __future__ import annotations

import torch

from companion.kernels.block_sparse_attention import expand_block_mask
from companion.validation import as_choice, as_instance, as_positive_int, as_real

from .layout import VideoLayout, token_major_perm

__all__ = ["band_mask", "to_blocks", "block_density", "element_density", "block_band",
           "half_blocks_for_density", "svg_masks"]


def band_mask(layout: VideoLayout, width: int, order: str = "frame") -> torch.Tensor:
    """Element mask [N, N] (frame-major coordinates): ``|i - j| < width`` among video tokens counted
    in ``order`` ("frame": spatial pattern, "token": temporal pattern), plus condition rows and columns."""
    width = as_positive_int(width, "width")
    order = as_choice(order, "order", ("frame", "token"))
    n, c = layout.n, layout.c
    idx = torch.arange(n)
    mask = (idx[:, None] - idx[None, :]).abs() < width
    mask[:c, :] = True
    mask[:, :c] = True
    if order == "token":  # the band lives in token-major positions: pull it back to frame-major
        pos = torch.argsort(token_major_perm(layout))  # frame-major token i sits at position pos[i]
        mask = mask[pos][:, pos]
    return mask


def to_blocks(mask: torch.Tensor, block: int) -> torch.Tensor:
    """Block mask [nb, nb]: a block is active when any of its elements is (what a kernel must compute)."""
    block = as_positive_int(block, "block")
    if not isinstance(mask, torch.Tensor) or mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
        raise ValueError(f"mask: expected a square 2-D tensor, got {getattr(mask, 'shape', type(mask))}")
    n = mask.shape[0]
    nb = -(-n // block)
    padded = torch.zeros(nb * block, nb * block, dtype=torch.bool)
    padded[:n, :n] = mask.bool()
    return padded.view(nb, block, nb, block).any(3).any(1)


def _square_bool(mask, name: str) -> None:
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.ndim != 2 or \
            mask.shape[0] != mask.shape[1] or mask.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty square bool tensor [N, N], got "
                         f"{getattr(mask, 'dtype', type(mask).__name__)} {tuple(getattr(mask, 'shape', ()))}")


def block_density(mask: torch.Tensor, block: int) -> float:
    """Fraction of the computed query-key pairs when ``mask`` runs block by block (partial blocks
    at the end count their true size), i.e. the attention FLOPs relative to dense."""
    _square_bool(mask, "mask")
    blocks = to_blocks(mask, block)
    n = mask.shape[0]
    return float(expand_block_mask(blocks, block, n).float().mean())


def element_density(mask: torch.Tensor) -> float:
    """Fraction of query-key pairs the mask keeps."""
    _square_bool(mask, "mask")
    return float(mask.float().mean())


def block_band(layout: VideoLayout, block: int, half_blocks: int) -> torch.Tensor:
    """Block mask [nb, nb]: ``|i_b - j_b| <= half_blocks`` plus the condition blocks (rows and columns).

    The condition tokens must fill whole blocks (``c`` a multiple of ``block``), so that a block
    never mixes text and video and the sink costs exactly its share.
    """
    block = as_positive_int(block, "block")
    as_positive_int(half_blocks, "half_blocks", minimum=0)
    if layout.c % block:
        raise ValueError(f"block: the {layout.c} condition tokens must fill whole blocks; choose a block "
                         f"that divides c = {layout.c}")
    nb = -(-layout.n // block)
    idx = torch.arange(nb)
    bm = (idx[:, None] - idx[None, :]).abs() <= half_blocks
    cb = layout.c // block
    bm[:cb, :] = True
    bm[:, :cb] = True
    return bm


def half_blocks_for_density(layout: VideoLayout, block: int, density: float) -> int:
    """The widest band (in blocks) whose block density does not exceed ``density`` (the paper's knob,
    which its code calls "sparsity" although it is the kept fraction)."""
    as_real(density, "density", low=0, high=1, low_open=True)  # the kept fraction
    nb = -(-layout.n // block)
    best = None
    for k in range(nb):
        d = float(expand_block_mask(block_band(layout, block, k), block, layout.n).float().mean())
        if d <= density + 1e-12:
            best = k
        else:
            break
    if best is None:
        floor = float(expand_block_mask(block_band(layout, block, 0), block, layout.n).float().mean())
        raise ValueError(f"density: {density} is below {floor:.3f}, the density of the diagonal blocks "
                         "plus the condition rows and columns")
    return best


def svg_masks(layout: VideoLayout, block: int, half_blocks: int) -> dict:
    """The executed masks of both head types at one band: ``block`` (the shared block mask, drawn in
    each head's own order), ``spatial`` and ``temporal`` (element masks in frame-major coordinates)."""
    as_instance(layout, "layout", VideoLayout)
    as_positive_int(block, "block"), as_positive_int(half_blocks, "half_blocks", minimum=0)
    bm = block_band(layout, block, half_blocks)
    spatial = expand_block_mask(bm, block, layout.n)
    pos = torch.argsort(token_major_perm(layout))
    return {"block": bm, "spatial": spatial, "temporal": spatial[pos][:, pos],
            "density": float(spatial.float().mean())}
