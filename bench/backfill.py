"""Benchmark: `errorkb backfill` over every release from 0.3.0 against the `ast.parse` floor.

    python bench/backfill.py [--from 0.3.0] [--to 0.5.23] [--cache-dir DIR] [--jobs N]

The releases must already be downloaded into the cache (`errorkb backfill` does that). Prints the
machine, the releases, the files summed over them against their distinct blobs, the floor (each
distinct blob parsed once with `ast.parse` in this one process, its bytes already in memory), and
the backfill from an empty sites cache into an empty content folder, with the ratio issue #17 sets:
backfill <= 1.5x floor. Wall-clock ratios are only fair on an otherwise idle machine; the CPU time
of both is printed too.
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

from generator.backfill import backfill  # noqa: E402
from generator.commands.backfill import DEFAULT_START  # noqa: E402
from generator.config import Config, load_config  # noqa: E402
from generator.errors import SourceError  # noqa: E402
from generator.upstream import PypiSource, release_versions, version_key  # noqa: E402


def cpu_seconds() -> float:
    """CPU time of this process and its finished workers: the work done, whatever the load."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def floor(config: Config, cache_dir: Path, versions: list[str]) -> tuple[float, float, int, int]:
    """Seconds and CPU seconds of `ast.parse` over each distinct blob of the releases, once, in
    this process, the bytes already read; and the files summed over releases, the distinct blobs."""
    seen: set[str] = set()
    files = 0
    seconds = cpu = 0.0
    for version in versions:
        try:
            source = PypiSource(config.package, version, config, cache_dir)
        except SourceError:
            continue
        fresh = []
        for file in source.files():
            files += 1
            if file.blob_sha not in seen:
                seen.add(file.blob_sha)
                fresh.append(source.read(file))
        start, start_cpu = time.perf_counter(), time.process_time()
        for data in fresh:
            try:
                ast.parse(data)
            except (SyntaxError, ValueError):
                pass
        seconds += time.perf_counter() - start
        cpu += time.process_time() - start_cpu
    return seconds, cpu, files, len(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="start", default=DEFAULT_START)
    parser.add_argument("--to", dest="end", default=Config().source.partition("==")[2])
    parser.add_argument("--cache-dir", type=Path, default=Config().cache_dir, help="where the releases are downloaded")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    config = load_config()

    versions = [v for v in release_versions(config.package, config, args.cache_dir, wanted=args.end)
                if version_key(args.start) <= version_key(v) <= version_key(args.end)]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}")
    print(f"releases: {len(versions)}, {versions[0]} to {versions[-1]}")
    print(f"load average before: {os.getloadavg()[0]:.2f} (the wall-clock ratio is only fair near 0)")
    base, base_cpu, files, blobs = floor(config, args.cache_dir, versions)
    print(f"files summed over releases: {files}, distinct blobs: {blobs} ({files / blobs:.1f} files per blob)")
    print(f"floor     ast.parse of each distinct blob, one process: {base:8.2f} s  (cpu {base_cpu:.2f} s)")
    with tempfile.TemporaryDirectory() as scratch:
        # The downloads, but no sites, no backfill state: every blob is parsed once, here.
        cache = Path(scratch) / "cache"
        cache.mkdir()
        (cache / "pypi").symlink_to((args.cache_dir / "pypi").resolve())
        steps = []
        before, started = cpu_seconds(), time.perf_counter()
        result = backfill(config, Path(scratch) / "content", cache, args.start, args.end, config.package, args.jobs, steps.append)
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - before
    parsed = sum(step.parsed for step in steps)
    print(
        f"backfill  empty sites cache, {len(steps)} releases:      {seconds:8.2f} s  ({seconds / base:.2f}x floor; target <= 1.5x; "
        f"cpu {cpu:.2f} s = {cpu / base_cpu:.2f}x the floor's)"
    )
    print(f"blobs parsed by the backfill: {parsed} (each distinct blob once: {parsed == blobs}); ledger: {len(result.records)} ids")
    print(f"peak memory (largest process): {max(resource.getrusage(r).ru_maxrss for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024:.0f} MB")


if __name__ == "__main__":
    main()
