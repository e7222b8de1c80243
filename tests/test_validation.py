"""companion.validation: each helper returns the cleaned value or a ValueError naming the argument."""

import math

import numpy as np
import pytest
import torch

from companion import validation as v


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 0.0, True, "1", None])
def test_as_positive_refuses(bad):
    with pytest.raises(ValueError, match="^lr: "):
        v.as_positive(bad, "lr")


def test_as_nonnegative_and_as_real_intervals():
    assert v.as_nonnegative(0, "w") == 0.0 and v.as_positive(np.float32(0.5), "lr") == 0.5
    assert v.as_real(0.0, "r", low=0, high=1, high_open=True) == 0.0
    with pytest.raises(ValueError, match=r"^r: expected a number in \[0, 1\)"):
        v.as_real(1.0, "r", low=0, high=1, high_open=True)
    with pytest.raises(ValueError, match="^w: expected a finite number >= 0"):
        v.as_nonnegative(-1e-9, "w")


def test_as_finite_tensor_shape_and_dtype():
    x = torch.zeros(3, 4)
    assert v.as_finite_tensor(x, "x", shape=(None, 4)) is x
    for bad, kw in [(torch.zeros(3, 5), {"shape": (None, 4)}), (torch.zeros(3), {"shape": (None, 4)}),
                    (torch.zeros(3, 4, dtype=torch.long), {"floating": True}),
                    (torch.tensor([[math.nan] * 4]), {}), (torch.zeros(0, 4), {})]:
        with pytest.raises(ValueError, match="^x: "):
            v.as_finite_tensor(bad, "x", **kw)
    assert v.as_finite_tensor(torch.zeros(0, 4), "x", empty=True).shape == (0, 4)


def test_as_index_tensor():
    y = v.as_index_tensor([0, 2, 1], "y", n=3, high=3)
    assert y.dtype == torch.int64 and y.tolist() == [0, 2, 1]
    for bad, kw in [([0.0, 1.0], {}), ([True, False], {}), ([0, 3], {"high": 3}), ([-1], {}),
                    ([0, 1], {"n": 3}), ([[0, 1]], {}), ([], {})]:
        with pytest.raises(ValueError, match="^y: "):
            v.as_index_tensor(bad, "y", **kw)
    assert v.as_index_tensor(torch.zeros(0, dtype=torch.long), "y", empty=True).numel() == 0
