"""The synthetic long-context task of the chapter: key-value recall mixed with a passkey.

Every answer needs two things from far back in the prompt:

* the value ``v`` written just before the queried key ``k`` (records are ``v k``) (a different place for every query: an
  *adaptive* head is needed to find it), and
* the passkey digit ``p`` written once at a random depth (the same place for every query: a
  *sequentially consistent* head can keep looking at it).

The answer is ``a = (v + p) mod N_VALUES``. One prompt is::

    BOS  body (fillers, n_pairs "v k" records, one "[PK] p" span)  [Q] k a  ...  [Q] k a   (n_demos demos)

and the decode stream that follows it is ``[Q] k_1 a_1 [Q] k_2 a_2 ...`` with keys not used by
the demos. The answer positions (the ``k`` tokens, whose next token is ``a``) are scored. With the
default five demos, the last 16 prompt tokens (CateKV's observation window) are questions of the
same kind as the decode stream, as at the end of a long-context benchmark prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from companion.validation import as_positive_int

__all__ = ["VOCAB", "Vocab", "RecallBatch", "hybrid_recall"]


@dataclass(frozen=True)
class Vocab:
    """Token ids: PAD 0, BOS 1, [Q] 2, [PK] 3, then keys, values, passkey digits, fillers."""

    n_keys: int = 32
    n_values: int = 16
    n_digits: int = 4
    n_fillers: int = 32
    pad: int = 0
    bos: int = 1
    query: int = 2
    passkey: int = 3

    def __post_init__(self):
        for name in ("n_keys", "n_values", "n_digits", "n_fillers"):
            as_positive_int(getattr(self, name), name)
        if (self.pad, self.bos, self.query, self.passkey) != (0, 1, 2, 3):
            raise ValueError("pad, bos, query, passkey: the special tokens are fixed at ids 0, 1, 2, 3")

    @property
    def key0(self) -> int:
        return 4

    @property
    def value0(self) -> int:
        return self.key0 + self.n_keys

    @property
    def digit0(self) -> int:
        return self.value0 + self.n_values

    @property
    def filler0(self) -> int:
        return self.digit0 + self.n_digits

    @property
    def size(self) -> int:
        return self.filler0 + self.n_fillers


VOCAB = Vocab()


@dataclass
class RecallBatch:
    """``prompt`` [N, P]; ``stream`` [N, 3T] (fed token by token after the prompt);
    ``answer_pos`` [N, T] (index into ``stream`` of each queried key, whose next token is the answer);
    ``answers`` [N, T] (value-token ids); ``passkey_pos`` [N] (position of the digit in the prompt);
    ``demo_pos`` [N, n_demos] (prompt positions of the demo keys, also scored in training)."""

    prompt: torch.Tensor
    stream: torch.Tensor
    answer_pos: torch.Tensor
    answers: torch.Tensor
    passkey_pos: torch.Tensor
    demo_pos: torch.Tensor

    def full_sequence(self) -> torch.Tensor:
        return torch.cat([self.prompt, self.stream], dim=1)

    def to(self, device) -> "RecallBatch":
        """The same batch with every tensor on ``device``."""
        return RecallBatch(*(getattr(self, f).to(device) for f in
                             ("prompt", "stream", "answer_pos", "answers", "passkey_pos", "demo_pos")))

    def __getitem__(self, rows) -> "RecallBatch":
        """The examples ``rows`` (a slice or index tensor) of the batch."""
        return RecallBatch(*(getattr(self, f)[rows] for f in
                             ("prompt", "stream", "answer_pos", "answers", "passkey_pos", "demo_pos")))


def hybrid_recall(n: int, prompt_len: int = 256, n_pairs: int = 16, n_queries: int = 8, n_demos: int = 5,
                  seed: int = 0, passkey_range: tuple[float, float] = (0.05, 0.75)) -> RecallBatch:
    """``n`` seeded examples of the task (see the module docstring).

    The passkey span sits uniformly in ``passkey_range`` (fractions of the body), so it is never in
    the attention sink nor in the recent window of the prompt.
    """
    n = as_positive_int(n, "n")
    prompt_len = as_positive_int(prompt_len, "prompt_len", minimum=32)
    n_pairs = as_positive_int(n_pairs, "n_pairs")
    n_queries = as_positive_int(n_queries, "n_queries")
    n_demos = as_positive_int(n_demos, "n_demos", minimum=0)
    if n_demos + n_queries > min(n_pairs, VOCAB.n_keys):
        raise ValueError(f"n_queries: n_demos + n_queries ({n_demos + n_queries}) must be <= n_pairs ({n_pairs})")
    body = prompt_len - 1 - 3 * n_demos
    if body < 2 * n_pairs + 2 + 8:
        raise ValueError(f"prompt_len: {prompt_len} is too short for {n_pairs} pairs and {n_demos} demos")
    g = torch.Generator().manual_seed(int(seed))
    V = VOCAB
    T = n_queries
    prompt = torch.empty(n, prompt_len, dtype=torch.long)
    stream = torch.empty(n, 3 * T, dtype=torch.long)
    answers = torch.empty(n, T, dtype=torch.long)
    passkey_pos = torch.empty(n, dtype=torch.long)
    demo_pos = torch.empty(n, n_demos, dtype=torch.long)
    lo, hi = int(passkey_range[0] * body), int(passkey_range[1] * body)
    for i in range(n):
        seq = V.filler0 + torch.randint(V.n_fillers, (body,), generator=g)
        pk = int(torch.randint(lo, hi - 1, (1,), generator=g))
        digit = int(torch.randint(V.n_digits, (1,), generator=g))
        seq[pk], seq[pk + 1] = V.passkey, V.digit0 + digit
        # pairs in the free slots: choose pair starts among positions that leave the passkey untouched
        slots = [s for s in range(0, body - 1, 2) if s + 1 < pk or s > pk + 1]
        chosen = torch.randperm(len(slots), generator=g)[:n_pairs]
        keys = torch.randperm(V.n_keys, generator=g)[:n_pairs]
        vals = torch.randint(V.n_values, (n_pairs,), generator=g)
        for j, s in enumerate(chosen.tolist()):
            seq[slots[s]], seq[slots[s] + 1] = V.value0 + vals[j], V.key0 + keys[j]  # value first, then key
        order = torch.randperm(n_pairs, generator=g)
        ans = (vals + digit) % V.n_values
        demos = []
        for j in order[:n_demos].tolist():
            demos += [V.query, V.key0 + int(keys[j]), V.value0 + int(ans[j])]
        prompt[i] = torch.cat([torch.tensor([V.bos]), seq, torch.tensor(demos, dtype=torch.long)])
        passkey_pos[i] = 1 + pk + 1
        demo_pos[i] = torch.tensor([1 + body + 3 * d + 1 for d in range(n_demos)])
        qs = order[n_demos:n_demos + T]
        toks = []
        for j in qs.tolist():
            toks += [V.query, V.key0 + int(keys[j]), V.value0 + int(ans[j])]
        stream[i] = torch.tensor(toks)
        answers[i] = V.value0 + ans[qs]
    answer_pos = torch.arange(T).mul(3).add(1).expand(n, T).clone()
    return RecallBatch(prompt, stream, answer_pos, answers, passkey_pos, demo_pos)
