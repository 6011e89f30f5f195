"""Benchmark: extraction of a real SGLang release against the one-process `ast.parse` floor.

    python bench/extract.py [--source pypi:sglang==0.5.23] [--repeat 1]

Prints the machine, the floor (reading nothing: every file's bytes are already in memory,
parsed with `ast.parse` in this one process), the cold extraction (empty cache, all cores),
the warm one (nothing changed), one after 10 files changed, and the peak memory, with the
ratios issue #2 sets: cold <= 1.5x floor, warm <= 2 s, peak <= 1.5 GB.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.config import Config  # noqa: E402
from generator.model import SourceFile  # noqa: E402
from generator.pipeline import extract_upstream  # noqa: E402
from generator.upstream import Source, blob_sha, open_source  # noqa: E402


class EditedSource(Source):
    """The same tree with a comment appended to `count` files: an upstream commit touching them."""

    def __init__(self, base: Source, count: int) -> None:
        self.upstream = base.upstream
        self._texts = {f.path: base.read(f) for f in base.files()}
        for path in sorted(self._texts)[::max(1, len(self._texts) // count)][:count]:
            self._texts[path] += b"\n# edited\n"
        self._files = tuple(SourceFile(p, blob_sha(t)) for p, t in sorted(self._texts.items()))

    def files(self) -> tuple[SourceFile, ...]:
        return self._files

    def read(self, file: SourceFile) -> bytes:
        return self._texts[file.path]


def timed(function) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def floor(source: Source) -> float:
    texts = [source.read(f) for f in source.files()]

    def parse_all() -> None:
        for text in texts:
            ast.parse(text)

    seconds, _ = timed(parse_all)
    return seconds


def cpu_seconds() -> float:
    """CPU time of this process and its finished workers: the work done, whatever the load."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def peak_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=Config().source)
    parser.add_argument("--cache-dir", type=Path, default=Config().cache_dir, help="where the release is downloaded")
    args = parser.parse_args()

    source = open_source(args.source, Config(), args.cache_dir)
    files = source.files()
    lines = sum(source.read(f).count(b"\n") for f in files)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"source: {args.source}: {len(files)} files, {lines} lines")
    print(f"load average before: {os.getloadavg()[0]:.2f} (the wall-clock ratio is only fair near 0)")
    before = cpu_seconds()
    base = floor(source)
    base_cpu = cpu_seconds() - before
    print(f"floor   ast.parse, one process:        {base:7.2f} s  (cpu {base_cpu:.2f} s)")
    with tempfile.TemporaryDirectory() as cache:
        before = cpu_seconds()
        cold, extraction = timed(lambda: extract_upstream(source, Path(cache)))
        cold_cpu = cpu_seconds() - before
        print(
            f"cold    extract, empty cache:          {cold:7.2f} s  ({cold / base:.2f}x floor; target <= 1.5x; "
            f"cpu {cold_cpu:.2f} s = {cold_cpu / base_cpu:.2f}x the floor's)"
        )
        warm, _ = timed(lambda: extract_upstream(source, Path(cache)))
        print(f"warm    extract, nothing changed:      {warm:7.2f} s  ({warm / base:.3f}x floor; target <= 2 s)")
        edited = EditedSource(source, 10)
        changed, _ = timed(lambda: extract_upstream(edited, Path(cache)))
        print(f"commit  extract, 10 files changed:     {changed:7.2f} s  ({changed / base:.3f}x floor)")
    print(f"sites: {len(extraction.sites)}, skipped files: {len(extraction.problems)}")
    print(f"peak memory (largest process): {peak_mb():.0f} MB (target <= 1536 MB)")


if __name__ == "__main__":
    main()
