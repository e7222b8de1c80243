"""The graph autoencoder baseline (Kipf and Welling, 2016) and the degree baseline.

GAE: a two-layer GCN encoder on one-hot node features, ``Z = A_hat ReLU(A_hat W_0) W_1`` with
``A_hat = D^{-1/2} (A + I) D^{-1/2}``, and the inner-product decoder ``sigma(z_n . z_m)``,
trained by weighted binary cross-entropy over every known dyad (held-out dyads masked, as for
the Clam models). The graphs of the chapter have at most a few hundred nodes, so the GAE is
dense; it is a baseline, and the Clam likelihood itself never forms an N x N matrix.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .core import as_edge_index, check_pairs
from .data import to_dense
from ..validation import as_positive_int

__all__ = ["GAE", "fit_gae", "gae_probs", "gae_anomaly_scores", "degree_scores"]


class GAE(nn.Module):
    def __init__(self, num_nodes: int, hidden: int = 32, out: int = 16):
        super().__init__()
        for name, value in (("num_nodes", num_nodes), ("hidden", hidden), ("out", out)):
            as_positive_int(value, name)
        self.W0 = nn.Linear(num_nodes, hidden, bias=False)
        self.W1 = nn.Linear(hidden, out, bias=False)

    def forward(self, A_hat: torch.Tensor) -> torch.Tensor:
        h = torch.relu(A_hat @ self.W0.weight.T)  # one-hot input: X = I
        return A_hat @ self.W1(h)


def _normalised(A: torch.Tensor) -> torch.Tensor:
    A = A + torch.eye(A.shape[0], dtype=A.dtype)
    d = A.sum(1).rsqrt()
    return d[:, None] * A * d[None, :]


def fit_gae(edge_index, num_nodes: int, masked_pairs=None, epochs: int = 200, hidden: int = 32, out: int = 16,
            lr: float = 0.01, seed: int = 0) -> torch.Tensor:
    """Train a GAE and return the embeddings ``Z`` (N x out). ``masked_pairs`` (2 x Q) are left out of the loss."""
    ei = as_edge_index(edge_index, num_nodes, allow_empty=False)
    torch.manual_seed(seed)
    A = to_dense(ei, num_nodes).float()
    A_hat = _normalised(A)
    known = ~torch.eye(num_nodes, dtype=torch.bool)
    if masked_pairs is not None and masked_pairs.shape[1]:
        known[masked_pairs[0], masked_pairs[1]] = known[masked_pairs[1], masked_pairs[0]] = False
    pos = A[known].sum()
    pos_weight = (known.sum() - pos) / pos
    weight = known.float() / known.sum()  # the mean over the known dyads, without a gather per epoch
    model = GAE(num_nodes, hidden, out)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        Z = model(A_hat)
        loss = nn.functional.binary_cross_entropy_with_logits(Z @ Z.T, A, weight=weight, pos_weight=pos_weight,
                                                              reduction="sum")
        loss.backward()
        opt.step()
    with torch.no_grad():
        return model(A_hat).double()


def gae_probs(Z: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """``sigma(z_n . z_m)`` for each column of ``pairs``."""
    if not torch.is_tensor(Z) or Z.ndim != 2 or not bool(torch.isfinite(Z).all()):
        raise ValueError(f"Z: expected finite embeddings of shape (N, d), got {getattr(Z, 'shape', type(Z).__name__)}")
    check_pairs(pairs, Z.shape[0])
    return torch.sigmoid((Z[pairs[0]] * Z[pairs[1]]).sum(-1))


def gae_anomaly_scores(Z: torch.Tensor, edge_index, num_nodes: int) -> np.ndarray:
    """Minus the reconstruction error of each node's row, ``-||A_n - A_hat_n||_2`` (low = anomalous)."""
    if not torch.is_tensor(Z) or Z.ndim != 2 or Z.shape[0] != num_nodes or not bool(torch.isfinite(Z).all()):
        raise ValueError(f"Z: expected finite embeddings of shape ({num_nodes}, d), got "
                         f"{getattr(Z, 'shape', type(Z).__name__)}")
    A = to_dense(as_edge_index(edge_index, num_nodes), num_nodes)
    P = torch.sigmoid(Z @ Z.T)
    P.fill_diagonal_(0)
    return -(A - P).norm(dim=1).numpy()


def degree_scores(edge_index, num_nodes: int) -> np.ndarray:
    """The degree, as an anomaly score (low degree = anomalous)."""
    ei = as_edge_index(edge_index, num_nodes)
    return np.bincount(ei[0].numpy(), minlength=num_nodes).astype(float)
