"""Sampling in Python, from one position's logits as the model service sends them.

The order of operations is the C++ sampler's (sampler/sampler.h,
docs/sampler.md), without penalties and logit_bias:

  1. temperature == 0: greedy, the largest logit (ties: the lowest id); the
     random generator is not used.
  2. Divide by the temperature and softmax.
  3. top_k: keep the k most probable tokens (ties: lower ids first).
  4. top_p: keep the smallest set of the most probable tokens whose
     probability, renormalized over what top_k kept, sums to >= top_p.
  5. min_p: keep the tokens with p >= min_p * p_max.
  6. Draw one token from what is left with one random.Random(seed).random().

A seeded run repeats exactly in Python (on any machine), but it does not draw
the tokens the C++ sampler (`llm generate --seed`) draws: the two random
generators differ. Greedy runs agree token for token.

Pure Python: with full logits (sampling without top_k) one token costs about
20-40 ms for a 49,152-token vocabulary (a sort); with top_k the model sends
only the k best logits (logits_options) and a token costs microseconds.
"""

from __future__ import annotations

import heapq
import math
import random
import struct
import sys
from array import array
from dataclasses import dataclass
from typing import Sequence

from .errors import InvalidArgument


@dataclass(frozen=True)
class SamplingParams:
    """temperature: 0 = greedy, else > 0 (at most 100); top_k: 0 = off;
    top_p: in (0, 1], 1 = off; min_p: in [0, 1], 0 = off; seed: None = a
    random one (os.urandom)."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def validate(self) -> None:
        """Raises InvalidArgument naming the first bad field."""

        def bad(param: str, why: str) -> InvalidArgument:
            return InvalidArgument(f"{param} {why}, got {getattr(self, param)!r}", param=param)

        if not _is_number(self.temperature) or not 0 <= self.temperature <= 100:
            raise bad("temperature", "must be a number in [0, 100]")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise bad("top_k", "must be an integer >= 0")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise bad("top_p", "must be a number in (0, 1]")
        if not _is_number(self.min_p) or not 0 <= self.min_p <= 1:
            raise bad("min_p", "must be a number in [0, 1]")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise bad("seed", "must be an integer or None")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def top_n_for(params: SamplingParams, vocab_size: int) -> int:
    """How many logits the model must send for exact sampling: 1 for greedy,
    top_k with top_k (when 2 * top_k < vocab_size: a top-N entry costs 8 bytes,
    a full logit 4), else 0 (every logit, as float32)."""
    if params.greedy:
        return 1
    if 0 < params.top_k and 2 * params.top_k < vocab_size:
        return params.top_k
    return 0


def decode_logits(logits, vocab_size: int) -> tuple[Sequence[int] | None, Sequence[float]]:
    """(ids, values) of an llm.v1.Logits message: ids None for full logits
    (values[i] is id i's), else the top-N ids with their values. Raises
    InvalidArgument when the message does not hold what its encoding says."""
    encoding = logits.encoding
    if encoding == 2:  # LOGITS_TOP_N
        ids, values = list(logits.top_ids), list(logits.top_logits)
        if len(ids) != len(values) or not ids:
            raise InvalidArgument(f"top-N logits with {len(ids)} ids and {len(values)} values")
        return ids, values
    if encoding == 0:  # LOGITS_FLOAT32
        data = logits.float32
        if len(data) != 4 * vocab_size:
            raise InvalidArgument(f"float32 logits of {len(data)} bytes for {vocab_size} tokens")
        values = array("f")
        values.frombytes(data)
        if sys.byteorder != "little":
            values.byteswap()
        return None, values
    if encoding == 1:  # LOGITS_FLOAT16
        data = logits.float16
        if len(data) != 2 * vocab_size:
            raise InvalidArgument(f"float16 logits of {len(data)} bytes for {vocab_size} tokens")
        return None, struct.unpack(f"<{vocab_size}e", data)
    raise InvalidArgument(f"unknown logits encoding {encoding}")


class Sampler:
    """Draws tokens for one generation (its random generator is seeded once)."""

    def __init__(self, params: SamplingParams, seed: int):
        params.validate()
        self.params = params
        self._rng = random.Random(seed)

    def sample(self, ids: Sequence[int] | None, logits: Sequence[float]) -> int:
        """The next token from full logits (ids None) or the top-N ids with
        their logits (the rest of the vocabulary is treated as absent: exact
        when top_k <= N, as top_n_for asks)."""
        p = self.params
        n = len(logits)
        if n == 0:
            raise InvalidArgument("no logits to sample from")
        id_of = (lambda i: i) if ids is None else ids.__getitem__
        if p.greedy:
            best = max(range(n), key=lambda i: (logits[i], -id_of(i)))
            return id_of(best)
        inv_t = 1.0 / p.temperature
        m = max(logits) * inv_t
        probs = [math.exp(x * inv_t - m) for x in logits]
        # Candidates by descending probability, ties to the lower id.
        order_key = lambda i: (-probs[i], id_of(i))  # noqa: E731
        if 0 < p.top_k < n:
            order = sorted(heapq.nsmallest(p.top_k, range(n), key=order_key), key=order_key)
        elif p.top_p < 1:
            order = sorted(range(n), key=order_key)
        else:
            order = None  # every token, in id order: no sort needed
        if order is not None and p.top_p < 1:
            total = math.fsum(probs[i] for i in order)
            want = p.top_p * total
            acc = 0.0
            for cut, i in enumerate(order):
                acc += probs[i]
                if acc >= want:
                    order = order[:cut + 1]
                    break
        if order is None:
            order = range(n)
        if p.min_p > 0:
            floor = p.min_p * max(probs[i] for i in order)
            order = [i for i in order if probs[i] >= floor]
        order = [i for i in order if probs[i] > 0]
        total = math.fsum(probs[i] for i in order)
        u = self._rng.random() * total
        acc = 0.0
        for i in order:
            acc += probs[i]
            if u < acc:
                return id_of(i)
        return id_of(order[-1])
