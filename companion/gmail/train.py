"""Training: f_r (pre-trained on real images, then frozen), naive fine-tuning, GMAIL's alignment
stage (Algorithm 1, lines 1-9), the caption head (lines 10-13), and the chapter's experiment."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ._checks import as_batch, as_ids, as_images
from ..validation import as_nonnegative, as_positive, as_positive_int
from .data import Split
from .losses import _alignment, _caption_ce
from .models import CaptionHead, DualEncoder, ImageEncoder

__all__ = ["pretrain_real_encoder", "finetune_naive", "train_gmail", "train_head", "pair_partners",
           "METHODS", "ALIGN_MODES"]

METHODS = ("real", "mix-frozen", "mix-ft", "gmail", "gmail+txt", "oracle")
ALIGN_MODES = ("multi", "eq1", "eq1-repeats")


def _fit(params: list, loss_fn: Callable[[int], torch.Tensor], steps: int, lr: float,
         callback: Callable[[int], None] | None = None) -> None:
    """AdamW (weight decay 0.01) with gradient clipping at norm 1 for ``steps`` steps."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    for step in range(steps):
        if callback is not None:
            callback(step)
        opt.zero_grad(set_to_none=True)
        loss_fn(step).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    if callback is not None:
        callback(steps)


def _shift(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Each 8x8 image shifted by -1, 0 or +1 pixel in each direction (zeros enter at the edge)."""
    n = len(x)
    pad = torch.nn.functional.pad(x.reshape(n, 8, 8), (1, 1, 1, 1))
    dy, dx = (torch.randint(0, 3, (2, n), generator=gen).to(x.device))
    r = torch.arange(8, device=x.device)
    rows, cols = (dy[:, None] + r)[:, :, None], (dx[:, None] + r)[:, None, :]
    return pad[torch.arange(n, device=x.device)[:, None, None], rows, cols].reshape(n, 64)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(as_positive_int(seed, "seed", minimum=0))


def pretrain_real_encoder(P: Split, text_bank: torch.Tensor, epochs: int = 150, batch: int = 64,
                          lr: float = 1e-3, seed: int = 0) -> ImageEncoder:
    """f_r: the image encoder trained on real images P against the locked caption bank (LiT-style
    CLIP, image -> text cross-entropy, learnable logit scale), with +-1-pixel shifts; returned frozen,
    its logit scale kept as the buffer ``log_scale``."""
    x, cap = as_images(P.x, "P.x"), as_ids(P.cap, "P.cap", len(P.x))
    text_bank = as_batch(text_bank, "text_bank")
    torch.manual_seed(as_positive_int(seed, "seed", minimum=0))
    f_r = ImageEncoder(dim=text_bank.shape[1]).to(x.device)
    log_scale = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07), device=x.device))
    gen = _generator(seed)
    batch = as_positive_int(batch, "batch")
    per_epoch = math.ceil(len(x) / batch)
    order = []

    def loss(step):
        if step % per_epoch == 0:
            order[:] = [torch.randperm(len(x), generator=gen).to(x.device)]
        i = order[0][(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        return _caption_ce(f_r(_shift(x[i], gen)), text_bank, cap[i], log_scale)

    _fit(list(f_r.parameters()) + [log_scale], loss, as_positive_int(epochs, "epochs") * per_epoch, lr)
    f_r.register_buffer("log_scale", log_scale.detach().clone())
    return f_r.requires_grad_(False).eval()


def pair_partners(cap_gen: torch.Tensor, cap_pool: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """For every generated item, the index of a random real item of ``cap_pool`` with the same caption
    (the pairing of Algorithm 1 is by shared caption)."""
    order = torch.argsort(cap_pool, stable=True)
    n_cap = int(max(cap_gen.max(), cap_pool.max())) + 1
    count = torch.bincount(cap_pool, minlength=n_cap)
    missing = cap_gen[count[cap_gen] == 0]
    if len(missing):
        raise ValueError(f"cap_pool: no real image has caption {int(missing[0])}, which a generated image has")
    start = torch.cumsum(count, 0) - count
    u = torch.rand(len(cap_gen), generator=gen).to(cap_gen.device)
    return order[start[cap_gen] + (u * count[cap_gen]).long().clamp(max=count[cap_gen] - 1)]


def finetune_naive(f_r: ImageEncoder, x: torch.Tensor, cap: torch.Tensor, text_bank: torch.Tensor,
                   steps: int = 400, batch: int = 128, lr: float = 1e-3, rank: int = 4,
                   seed: int = 0) -> DualEncoder:
    """Naive mixing, fine-tuned: a LoRA copy of f_r trained with the caption loss on ``x`` (real and
    generated images pooled, generated treated as real). Use its ``embed_gen`` for *every* image."""
    text_bank = as_batch(text_bank, "text_bank")
    x, cap = as_images(x, "x"), as_ids(cap, "cap", len(x), n_captions=len(text_bank))
    torch.manual_seed(as_positive_int(seed, "seed", minimum=0))
    enc = DualEncoder(f_r, rank=rank)
    gen = _generator(seed)

    def loss(step):
        i = torch.randint(0, len(x), (batch,), generator=gen).to(x.device)
        return _caption_ce(enc._gen(x[i]), text_bank, cap[i], f_r.log_scale)

    _fit(enc.trainable(), loss, as_positive_int(steps, "steps"), as_positive(lr, "lr"))
    return enc.eval()


def train_gmail(f_r: ImageEncoder, x_gen: torch.Tensor, cap_gen: torch.Tensor, x_pool: torch.Tensor,
                cap_pool: torch.Tensor, *, text_bank: torch.Tensor | None = None, lam_txt: float = 0.0,
                mode: str = "multi", steps: int = 400, batch: int = 128, lr: float = 1e-3, rank: int = 4,
                tau: float = 0.07, seed: int = 0, own_projection: bool = True,
                partners: torch.Tensor | None = None, learn_tau: bool = False,
                monitor: Callable[[int, DualEncoder], None] | None = None) -> DualEncoder:
    """GMAIL's alignment stage: f_g (LoRA copy + generated projection) trained so that f_g(x_g) finds
    f_r(x_r) of a real image with the same caption; f_r never changes.

    ``mode="multi"`` (default): random batches, every same-caption real item a positive,
    eq. (gmail-multi). ``"eq1"``: exactly eq. (gmail-align) on caption-unique batches (at most one
    pair per caption). ``"eq1-repeats"``: eq. (gmail-align) on random batches, where same-caption
    pairs are wrongly treated as negatives. ``lam_txt > 0`` adds the caption loss on f_g(x_g)
    (needs ``text_bank``). ``own_projection=False`` keeps P_g equal to P_r (frozen), so that only
    the LoRA factors move. ``partners`` fixes each generated image's real partner once, as an
    index into ``x_pool`` (the paper's pairing: the real image whose caption made it); without it
    a random real image with the same caption is drawn afresh at every step. ``learn_tau=True``
    trains log(1/tau) with the encoder, as CLIP does, starting from ``tau`` (the trained value is
    kept as ``dual.tau``). ``monitor(step, dual)`` is called before step 0 and after every step.
    """
    x_gen, x_pool = as_images(x_gen, "x_gen"), as_images(x_pool, "x_pool")
    cap_gen, cap_pool = as_ids(cap_gen, "cap_gen", len(x_gen)), as_ids(cap_pool, "cap_pool", len(x_pool))
    if mode not in ALIGN_MODES:
        raise ValueError(f"mode: expected one of {ALIGN_MODES}, got {mode!r}")
    lam_txt, tau = as_nonnegative(lam_txt, "lam_txt"), as_positive(tau, "tau")
    if lam_txt > 0 and text_bank is None:
        raise ValueError("text_bank: needed when lam_txt > 0")
    if text_bank is not None:
        text_bank = as_batch(text_bank, "text_bank")
    batch, steps = as_positive_int(batch, "batch", minimum=2), as_positive_int(steps, "steps", minimum=0)
    if partners is not None:
        partners = as_ids(partners, "partners", len(x_gen), n_captions=len(x_pool))
        if not bool((cap_pool[partners] == cap_gen).all()):
            bad = int(torch.nonzero(cap_pool[partners] != cap_gen)[0])
            raise ValueError(f"partners: generated image {bad} is paired with a real image of another caption")
    if not isinstance(learn_tau, bool):
        raise ValueError(f"learn_tau: expected a bool, got {learn_tau!r}")
    torch.manual_seed(as_positive_int(seed, "seed", minimum=0))
    dual = DualEncoder(f_r, rank=rank)
    log_inv_tau = torch.nn.Parameter(torch.tensor(math.log(1 / tau), device=x_gen.device))
    dual.proj_g.requires_grad_(bool(own_projection))
    gen = _generator(seed)
    z_pool = dual.embed_real(x_pool)  # f_r is frozen: its embeddings are computed once
    by_cap = [torch.nonzero(cap_gen == c).reshape(-1) for c in range(int(cap_gen.max()) + 1)]
    present = [c for c, idx in enumerate(by_cap) if len(idx)]

    def draw() -> torch.Tensor:
        if mode != "eq1":
            return torch.randint(0, len(x_gen), (batch,), generator=gen).to(x_gen.device)
        caps = torch.tensor(present)[torch.randperm(len(present), generator=gen)[:batch]]
        return torch.stack([by_cap[c][torch.randint(0, len(by_cap[c]), (1,), generator=gen)] for c in caps.tolist()]
                           ).reshape(-1)

    def loss(step):
        i = draw()
        j = pair_partners(cap_gen[i], cap_pool, gen) if partners is None else partners[i]
        z_g = dual._gen(x_gen[i])
        t = 1 / log_inv_tau.clamp(max=math.log(100)).exp() if learn_tau else tau  # CLIP's clamp at 100
        out = _alignment(z_g, z_pool[j], cap_gen[i] if mode == "multi" else None, t)
        if lam_txt > 0:
            out = out + lam_txt * _caption_ce(z_g, text_bank, cap_gen[i], f_r.log_scale)
        return out

    callback = None if monitor is None else (lambda step: monitor(step, dual))
    params = dual.trainable() + ([log_inv_tau] if learn_tau else [])
    _fit(params, loss, steps, as_positive(lr, "lr"), callback)
    dual.tau = float(1 / log_inv_tau.detach().clamp(max=math.log(100)).exp()) if learn_tau else tau
    return dual.eval()


def train_head(z: torch.Tensor, cap: torch.Tensor, text_bank: torch.Tensor, steps: int = 300, batch: int = 128,
               lr: float = 1e-3, seed: int = 0) -> CaptionHead:
    """The downstream head on fixed embeddings ``z`` (real and generated pooled: batches drawn
    uniformly, so the two keep their natural proportions), caption cross-entropy."""
    text_bank = as_batch(text_bank, "text_bank")
    z = as_batch(z, "z", dim=text_bank.shape[1]).detach()
    cap = as_ids(cap, "cap", len(z), n_captions=len(text_bank))
    torch.manual_seed(as_positive_int(seed, "seed", minimum=0))
    head = CaptionHead(dim=z.shape[1]).to(z.device)
    gen = _generator(seed)

    def loss(step):
        i = torch.randint(0, len(z), (batch,), generator=gen).to(z.device)
        return _caption_ce(head(z[i]), text_bank, cap[i], head.log_scale)

    _fit(list(head.parameters()), loss, as_positive_int(steps, "steps"), as_positive(lr, "lr"))
    return head.eval()
