"""The chapter's experiment: one seed's data, f_r and generator, and every method at any gamma,
with the same LoRA rank, steps, batch and head recipe for all of them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._checks import N_CAPTIONS, as_batch
from ..validation import as_nonnegative, as_positive, as_positive_int
from .data import Split, load_digits_splits
from .generator import PCAGaussGenerator
from .metrics import caption_accuracy, caption_retrieval, concentration, domain_classifier_accuracy, paired_cosine
from .models import checksum
from .train import METHODS, finetune_naive, pair_partners, pretrain_real_encoder, train_gmail, train_head

__all__ = ["Budget", "Experiment", "PAIRINGS"]

PAIRINGS = ("source", "random-pool")


@dataclass(frozen=True)
class Budget:
    """Sizes and steps shared by every method (quick scale by default)."""

    gen_per_real: int = 1  # generated images per real downstream image (the paper: equal sizes)
    max_ratio: int = 60  # the largest ratio drawn (the earlier recipe's 60:1, an ablation)
    n_heldout: int = 10  # held-out generated images per caption, to measure the gap
    fr_epochs: int = 60
    lora_steps: int = 150
    head_steps: int = 100
    batch: int = 64
    lr: float = 1e-3  # naive fine-tuning and the heads
    align_lr: float = 1e-4  # GMAIL's alignment stage (the paper's App. A)
    rank: int = 4
    n_down: int = 3

    def __post_init__(self):
        for name in ("gen_per_real", "max_ratio", "n_heldout", "fr_epochs", "lora_steps", "head_steps", "batch",
                     "rank", "n_down"):
            as_positive_int(getattr(self, name), name)
        as_positive(self.lr, "lr")
        as_positive(self.align_lr, "align_lr")


def _distinct(cap_want: torch.Tensor, cap_pool: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """For each caption of ``cap_want``, as many distinct indices of ``cap_pool`` with that caption
    (drawn without replacement; a caption with too few real images reuses them only then)."""
    out = torch.empty(len(cap_want), dtype=torch.long, device=cap_want.device)
    for c in torch.unique(cap_want).tolist():
        want = torch.nonzero(cap_want == c).reshape(-1)
        have = torch.nonzero(cap_pool == c).reshape(-1)
        if len(have) == 0:
            raise ValueError(f"cap_pool: no real image has caption {c}")
        order = have[torch.randperm(len(have), generator=gen).to(have.device)]
        out[want] = order[torch.arange(len(want), device=have.device) % len(have)]
    return out


class Experiment:
    """One seed: splits, f_r pre-trained on P, the generator fitted on G, generated images for
    every caption (the same draws at every gamma; only the fingerprint changes), and held-out
    generated/real test pairs for the gap."""

    def __init__(self, seed: int, text_bank: torch.Tensor, budget: Budget = Budget(), device="cpu"):
        self.seed, self.budget = as_positive_int(seed, "seed", minimum=0), budget
        self.text_bank = as_batch(text_bank, "text_bank").to(device)
        if len(self.text_bank) != N_CAPTIONS:
            raise ValueError(f"text_bank: expected {N_CAPTIONS} caption embeddings, got {len(self.text_bank)}")
        self.splits = load_digits_splits(self.seed, n_down=budget.n_down).to(device)
        P, G = self.splits.P, self.splits.G
        self.f_r = pretrain_real_encoder(P, self.text_bank, epochs=budget.fr_epochs, seed=self.seed)
        self.f_r_checksum = checksum(self.f_r)
        self.generator = PCAGaussGenerator().fit(G.x, G.y, G.cap, self.splits.thresholds)
        caps = torch.arange(N_CAPTIONS, device=device)
        D = self.splits.D
        as_positive_int(budget.gen_per_real, "budget.gen_per_real")
        as_positive_int(budget.max_ratio, "budget.max_ratio", minimum=budget.gen_per_real)
        # one generated image per real downstream caption, repeated: the first k * len(D) rows are
        # the k:1 set, each paired with the real image of D whose caption made it
        self.src_gen = torch.arange(len(D.x), device=device).repeat(budget.max_ratio)
        self.cap_gen = D.cap[self.src_gen]
        self.x_clean = self.generator.sample_clean(self.cap_gen, seed=self.seed)
        self.cap_held = caps.repeat_interleave(budget.n_heldout)
        self.x_held_clean = self.generator.sample_clean(self.cap_held, seed=10_000 + self.seed)
        gen = torch.Generator().manual_seed(self.seed)
        self.held_partner = self.splits.T.x[pair_partners(self.cap_held, self.splits.T.cap, gen)]
        # the domain probe's real side: distinct real test images (no image twice, so that no copy
        # of a test-fold image sits in a training fold), as many of each caption as held-out ones
        self.held_real = self.splits.T.x[_distinct(self.cap_held, self.splits.T.cap, gen)]
        self.pool = Split(torch.cat([P.x, self.splits.D.x]), torch.cat([P.y, self.splits.D.y]),
                          torch.cat([P.cap, self.splits.D.cap]))
        self._duals: dict = {}
        self._before: dict = {}

    def _n(self, ratio: int | None) -> int:
        ratio = self.budget.gen_per_real if ratio is None else as_positive_int(ratio, "ratio", minimum=1)
        if ratio > self.budget.max_ratio:
            raise ValueError(f"ratio: expected an integer in [1, {self.budget.max_ratio}] (budget.max_ratio), "
                             f"got {ratio}")
        return len(self.splits.D.x) * ratio

    def gen_caps(self, ratio: int | None = None) -> torch.Tensor:
        """The captions of the generated training images at ``ratio`` generated per real image."""
        return self.cap_gen[: self._n(ratio)]

    def generated(self, gamma: float, ratio: int | None = None) -> torch.Tensor:
        """The generated training images at fingerprint strength ``gamma``, ``ratio`` per real image
        of D (default: the budget's ``gen_per_real``)."""
        n = self._n(ratio)
        return self.generator.stamp(self.x_clean[:n], self.cap_gen[:n], as_nonnegative(gamma, "gamma"))

    def heldout(self, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out generated images and, for each, a real test image with the same caption."""
        return self.generator.stamp(self.x_held_clean, self.cap_held, as_nonnegative(gamma, "gamma")), self.held_partner

    def encoder(self, method: str, gamma: float, ratio: int | None = None, pairing: str = "source",
                **gmail_kwargs):
        """The trained (cached) LoRA encoder of ``method``: ``mix-ft``, ``gmail`` or ``gmail+txt``.
        ``pairing="source"`` pairs each generated image with the real image of D whose caption made
        it, fixed (the paper); ``"random-pool"`` draws a real image of the same caption from P and D
        afresh at every step (the earlier recipe). ``gmail_kwargs`` (e.g. ``monitor``, ``mode``,
        ``learn_tau``, ``lr``, ``steps``, ``batch``) reach :func:`train_gmail`."""
        if pairing not in PAIRINGS:
            raise ValueError(f"pairing: expected one of {PAIRINGS}, got {pairing!r}")
        n = self._n(ratio)
        key = (method, float(gamma), n, pairing,
               tuple(sorted((k, v) for k, v in gmail_kwargs.items() if k != "monitor")))
        if key in self._duals and "monitor" not in gmail_kwargs:
            return self._duals[key]
        b, D, x_g, cap_g = self.budget, self.splits.D, self.generated(gamma, ratio), self.cap_gen[:n]
        common = dict(steps=b.lora_steps, batch=b.batch, lr=b.lr, rank=b.rank, seed=self.seed)
        if method == "mix-ft":
            enc = finetune_naive(self.f_r, torch.cat([D.x, x_g]), torch.cat([D.cap, cap_g]),
                                 self.text_bank, **common)
        elif method in ("gmail", "gmail+txt"):
            if pairing == "source":
                pool = dict(x_pool=D.x, cap_pool=D.cap, partners=self.src_gen[:n])
            else:
                pool = dict(x_pool=self.pool.x, cap_pool=self.pool.cap)
            common["lr"] = b.align_lr
            enc = train_gmail(self.f_r, x_g, cap_g, **pool, text_bank=self.text_bank,
                              lam_txt=1.0 if method == "gmail+txt" else 0.0, **(common | gmail_kwargs))
        else:
            raise ValueError(f"method: expected 'mix-ft', 'gmail' or 'gmail+txt', got {method!r}")
        self._duals[key] = enc
        return enc

    def head_data(self, method: str, gamma: float, ratio: int | None = None, **gmail_kwargs
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        """The embeddings and caption ids the head of ``method`` is trained on (Algorithm 1, line 11)."""
        D, f_r = self.splits.D, self.f_r
        if method == "oracle":
            return f_r(self.pool.x), self.pool.cap
        if method != "mix-ft" and len(D.x) == 0:
            raise ValueError("n_down: no real downstream data (n_down=0); the head of a method needs f_r(D)")
        if method == "real":
            return f_r(D.x), D.cap
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        x_g, cap_g = self.generated(gamma, ratio), self.gen_caps(ratio)
        enc = None if method == "mix-frozen" else self.encoder(method, gamma, ratio, **gmail_kwargs)
        with torch.no_grad():
            if method == "mix-frozen":
                z_g, z_d = f_r(x_g), f_r(D.x)
            elif method == "mix-ft":
                z_g = enc.embed_gen(x_g)
                z_d = enc.embed_gen(D.x) if len(D.x) else z_g[:0]
            else:  # GMAIL: generated through f_g, real through f_r
                z_g, z_d = enc.embed_gen(x_g), f_r(D.x)
        return torch.cat([z_d, z_g]), torch.cat([D.cap, cap_g])

    def test_embeddings(self, method: str, gamma: float, ratio: int | None = None) -> torch.Tensor:
        """Real test images through the real path: f_r (Reading A), or E' for naive fine-tuning."""
        with torch.no_grad():
            if method == "mix-ft":
                return self.encoder(method, gamma, ratio).embed_gen(self.splits.T.x)
            return self.f_r(self.splits.T.x)

    def run(self, method: str, gamma: float, ratio: int | None = None, head_seed: int | None = None,
            **gmail_kwargs) -> float:
        """Real-test caption accuracy of ``method`` at fingerprint strength ``gamma`` with ``ratio``
        generated images per real one; ``head_seed`` (default: the experiment's seed) seeds the head."""
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        z, cap = self.head_data(method, gamma, ratio, **gmail_kwargs)
        head = train_head(z, cap, self.text_bank, steps=self.budget.head_steps, batch=self.budget.batch,
                          lr=self.budget.lr, seed=self.seed if head_seed is None else head_seed)
        return caption_accuracy(head, self.test_embeddings(method, gamma, ratio), self.splits.T.cap,
                                self.text_bank)

    def zero_shot(self) -> float:
        """f_r's own nearest caption on the real test images, with no head."""
        with torch.no_grad():
            return caption_accuracy(None, self.f_r(self.splits.T.x), self.splits.T.cap, self.text_bank)

    def train_test_domain(self) -> float:
        """Domain-classifier accuracy of f_r(P), its own pre-training images, against f_r(T), the
        real test images (as many of each): whether the alignment targets P already sit apart."""
        P, T = self.splits.P, self.splits.T
        n = min(len(P.x), len(T.x))
        with torch.no_grad():
            return domain_classifier_accuracy(self.f_r(T.x[:n]), self.f_r(P.x[:n]), seed=self.seed)

    def gap(self, gamma: float, encoder=None) -> dict:
        """The gap on held-out pairs: paired cosine, domain-classifier accuracy, caption retrieval
        among the real test captions' centroids, and concentration, with f_r on both sides
        (the domain probe's real side is :attr:`held_real`, distinct real test images)
        (``_before``) and, if ``encoder`` is given, f_g on the generated side (``_after``); the
        ``_real`` entries compare two real test images of the same caption."""
        x_g, x_r = self.heldout(gamma)
        T = self.splits.T
        with torch.no_grad():
            z_r, z_t, z_dom = self.f_r(x_r), self.f_r(T.x), self.f_r(self.held_real)

            def measures(z_g, tag):
                return {f"cos_{tag}": paired_cosine(z_g, z_r),
                        f"domain_{tag}": domain_classifier_accuracy(z_dom, z_g, seed=self.seed),
                        f"retrieval_{tag}": caption_retrieval(z_g, self.cap_held, z_t, T.cap),
                        f"concentration_{tag}": concentration(z_g)}

            if float(gamma) not in self._before:
                partner = pair_partners(T.cap, T.cap, torch.Generator().manual_seed(self.seed))
                self._before[float(gamma)] = measures(self.f_r(x_g), "before") | {
                    "cos_real": paired_cosine(z_t, z_t[partner]), "concentration_real": concentration(z_t)}
            out = dict(self._before[float(gamma)])
            if encoder is not None:
                out |= measures(encoder.embed_gen(x_g), "after")
        return out

    def f_r_unchanged(self) -> bool:
        """Whether every parameter and buffer of f_r is bit-identical to what pre-training left."""
        return checksum(self.f_r) == self.f_r_checksum
