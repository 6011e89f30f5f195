"""Progress on a terminal, nothing when output is piped or in CI."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A single status line, redrawn at most ten times a second, only on a terminal."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None) -> None:
        self._label, self._total = label, total
        self._stream = stream or sys.stderr
        self._live = hasattr(self._stream, "isatty") and self._stream.isatty()
        self._last = 0.0

    def update(self, done: int, detail: str = "") -> None:
        if not self._live:
            return
        now = time.monotonic()
        if now - self._last < 0.1 and done < self._total:
            return
        self._last = now
        self._stream.write(f"\r{self._label}: {done}/{self._total} {detail}\x1b[K")
        self._stream.flush()

    def close(self) -> None:
        if self._live:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
