"""Benchmark: a full `errorkb build` of a real SGLang release against the one-process
`ast.parse` floor, measured in the same run.

    python bench/build.py [--source pypi:sglang==0.5.23] [--content content]

Prints the machine, the floor (every file's bytes in memory, parsed with `ast.parse` in this
one process, measured before, between and after two cold builds), the cold builds (each with an
empty cache but for the downloaded release, and an empty output), the ratio of the fastest cold
build to the fastest floor (this machine's speed drifts by half from one minute to the next, and
drift only ever adds time), the
rebuild with nothing changed, a rebuild after a template changed (every page rendered again,
extraction and highlighting from the cache), each build's peak memory, the page count, and the
ratios issue #4 sets: cold <= 4x floor, nothing-changed rebuild < 5 s, peak < 2 GB. Each build
runs as its own `errorkb build` process so its peak memory is its own.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import describe, file_system_probe  # noqa: E402
from generator.config import Config  # noqa: E402
from generator.upstream import open_source  # noqa: E402


def floor(source) -> float:
    texts = [source.read(f) for f in source.files()]
    start = time.perf_counter()
    for text in texts:
        ast.parse(text)
    return time.perf_counter() - start


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def run_build(args: list[str], before: list[str] = ()) -> tuple[float, float, float]:
    """Wall seconds, peak resident MB and CPU seconds (user and system, its workers' included)
    of one `errorkb build` process."""
    command = ["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-m", "generator", *before, "build", *args]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 3):
        raise SystemExit(f"build failed:\n{done.stderr}")
    lines = done.stderr.strip().splitlines()
    print("   ", next(line for line in lines if line.startswith("build:")))
    user, system, peak = lines[-1].split()
    # System time is mostly creating files and folders, and page faults: it moves with the
    # machine far more than user time does (bench/README.md).
    print(f"    CPU: user {float(user):.1f} s, system {float(system):.1f} s")
    return seconds, int(peak) / 1024, float(user) + float(system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=Config().source)
    parser.add_argument("--content", type=Path, default=ROOT / "content")
    parser.add_argument("--cache-dir", type=Path, default=Config().cache_dir, help="where the release is downloaded")
    options = parser.parse_args()

    print(describe())
    source = open_source(options.source, Config(), options.cache_dir)
    print(f"source: {options.source}, {len(source.files())} files")
    floor_before = floor(source)
    print(f"ast.parse floor (one process), before the cold build: {floor_before:.2f} s")

    with tempfile.TemporaryDirectory(prefix="errorkb-bench-") as scratch:
        scratch = Path(scratch)

        def cold_build(number: int) -> tuple[Path, list[str], float, float, float]:
            """A build from an empty cache into an empty folder; nothing is deleted before the
            benchmark ends, since creating files right after deleting many is slower
            (bench/README.md)."""
            root = scratch / f"cold-{number}"
            cache = root / "cache"
            if (options.cache_dir / "pypi").is_dir():
                # Hard links: the downloads of every release are gigabytes, and a build only
                # reads them.
                shutil.copytree(options.cache_dir / "pypi", cache / "pypi", copy_function=_link_or_copy)
            # A copy: a build writes the ledger into its content folder.
            shutil.copytree(options.content, root / "content")
            args = ["--source", options.source, "--content", str(root / "content"), "--cache-dir", str(cache), "--out", str(root / "site")]
            return root / "site", args, *run_build(args)

        print(file_system_probe(scratch))
        out, common, cold, cold_peak, cold_cpu = cold_build(1)
        floor_between = floor(source)
        _, _, cold_again, peak_again, cpu_again = cold_build(2)
        floor_after = floor(source)
        print(file_system_probe(scratch), "(after the cold builds)")
        floors = (floor_before, floor_between, floor_after)
        pages = sum(1 for _ in (out / "errors").iterdir())
        files = sum(1 for p in out.rglob("*") if p.is_file())
        print(f"ast.parse floor: {floor_before:.2f} s before, {floor_between:.2f} s between, {floor_after:.2f} s after the cold builds")
        print(f"cold builds: {cold:.2f} s and {cold_again:.2f} s (CPU {cold_cpu:.1f} s and {cpu_again:.1f} s), "
              f"peak {max(cold_peak, peak_again):.0f} MB, {pages} error pages, {files} files")
        print(f"cold build: {min(cold, cold_again):.2f} s = {min(cold, cold_again) / min(floors):.2f}x the fastest floor "
              f"(target <= 4x; each build against the floors beside it: "
              f"{cold / max(floor_before, floor_between):.2f}x-{cold / min(floor_before, floor_between):.2f}x, "
              f"{cold_again / max(floor_between, floor_after):.2f}x-{cold_again / min(floor_between, floor_after):.2f}x)")
        cold_peak = max(cold_peak, peak_again)

        warm, warm_peak, _ = run_build(common)
        print(f"rebuild, nothing changed: {warm:.2f} s (target < 5 s), peak {warm_peak:.0f} MB")

        # Another base URL changes every page's canonical link: every page is rendered
        # again, nothing is extracted or highlighted again.
        settings = scratch / "errorkb.toml"
        settings.write_text('[errorkb]\nbase_url = "https://bench.example.org/"\n')
        render_all, render_peak, _ = run_build(common, ["--config", str(settings)])
        print(f"rebuild after a settings change (all pages rendered): {render_all:.2f} s, peak {render_peak:.0f} MB")
        print(f"peak memory of any build: {max(cold_peak, warm_peak, render_peak):.0f} MB (target < 2048 MB)")


if __name__ == "__main__":
    main()
