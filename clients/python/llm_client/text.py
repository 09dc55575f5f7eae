"""Streamed text: token bytes to UTF-8 text pieces, and stop strings.

TokenText turns each token's bytes into the complete characters they finish
(a token may end inside a multi-byte character: its bytes wait for the next
token's). StopMatcher holds back the text that may begin a stop string, so
that a stop string never reaches the output even when split across tokens
(as client/generate/stop_strings.h does).
"""

from __future__ import annotations

import codecs
from typing import Iterable

from .errors import InvalidArgument


class TokenText:
    """Incremental UTF-8 decoding of token bytes (invalid bytes become U+FFFD)."""

    def __init__(self):
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        """The text completed by `data` (possibly "")."""
        return self._decoder.decode(data)

    def finish(self) -> str:
        """Bytes of a character still incomplete at the end, as U+FFFD."""
        return self._decoder.decode(b"", final=True)


class StopMatcher:
    """Stop strings over streamed text, with hold-back.

        m = StopMatcher(["\\n\\n"])
        for delta in deltas:
            released, stopped = m.feed(delta)
            emit(released)
            if stopped: break
        emit(m.finish())   # at the end of the stream (nothing after a stop)

    The held text is the longest suffix of the output that is a proper prefix
    of some stop string; the released text is the output cut before the first
    stop string.
    """

    def __init__(self, stop: Iterable[str] = ()):
        stop = [stop] if isinstance(stop, str) else list(stop)
        for s in stop:
            if not isinstance(s, str) or not s:
                raise InvalidArgument(f"stop strings must be non-empty strings, got {s!r}",
                                      param="stop")
        self._stop = stop
        self._held = ""
        self.stopped = False

    def feed(self, delta: str) -> tuple[str, bool]:
        """Appends `delta`; returns (text now safe to emit, whether a stop
        string was found)."""
        if self.stopped:
            return "", True
        text = self._held + delta
        if not self._stop:
            self._held = ""
            return text, False
        first = min((at for at in (text.find(s) for s in self._stop) if at >= 0), default=-1)
        if first >= 0:
            self.stopped = True
            self._held = ""
            return text[:first], True
        keep = 0
        for s in self._stop:
            for k in range(min(len(s) - 1, len(text)), keep, -1):
                if text.endswith(s[:k]):
                    keep = k
                    break
        self._held = text[len(text) - keep:] if keep else ""
        return text[:len(text) - keep], False

    def finish(self) -> str:
        """The held text, at the end of the stream ("" after a stop)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
