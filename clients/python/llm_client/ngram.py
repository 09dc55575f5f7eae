"""Prompt lookup for speculative decoding (as client/generate/ngram_proposer.h):
the tokens that followed the latest earlier occurrence of the conversation's
last n tokens, n = 3 down to 2 (a longer match first: it predicts better),
going on past the end of the history by copying the proposal itself."""

from __future__ import annotations

from typing import Sequence

MAX_NGRAM = 3
# The most tokens one decode step may propose (the model service's limit).
MAX_PROPOSED_TOKENS = 16


def propose_by_ngram(history: Sequence[int], max_tokens: int, min_ngram: int = 2) -> list[int]:
    """At most max_tokens tokens proposed after `history`; [] when no suffix of
    MAX_NGRAM..min_ngram tokens occurred before. O(len(history) * MAX_NGRAM)."""
    if max_tokens <= 0:
        return []
    size = len(history)
    for n in range(MAX_NGRAM, max(1, min(min_ngram, MAX_NGRAM)) - 1, -1):
        if size < n + 1:
            continue
        suffix = list(history[size - n:])
        for i in range(size - n - 1, -1, -1):
            if list(history[i:i + n]) == suffix:
                # Copied as LZ77 copies: past the end, the proposal repeats itself.
                out: list[int] = []
                for j in range(i + n, i + n + max_tokens):
                    out.append(history[j] if j < size else out[j - size])
                return out
    return []
