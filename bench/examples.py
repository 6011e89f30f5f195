"""Benchmark: running the curated example fixes against the pinned SGLang (`check --run-examples`).

    python bench/examples.py [--cold] [--content DIR]

Prints the venv's size and, with `--cold`, the time to make it in an empty cache folder (it is
made once per machine otherwise); then the time of one child that imports SGLang and resolves one
command, of one that resolves every example's two commands, and the time a command takes beyond
the import.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generator import examples  # noqa: E402
from generator.config import Config  # noqa: E402
from generator.content import load_curated  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="make the venv in an empty cache folder and time it")
    parser.add_argument("--content", type=Path, default=ROOT / "content")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch) if args.cold else Config().cache_dir
        start = time.perf_counter()
        python = examples.sglang_venv(cache, log=print)
        made = time.perf_counter() - start
        size = subprocess.run(["du", "-sm", str(python.parent.parent)], capture_output=True, text=True).stdout.split()[0]
        print(f"venv: {size} MB at {python.parent.parent}" + (f", made in {made:.0f} s" if args.cold else ""))
        commands = []
        for curated in load_curated(args.content).values():
            found = examples.example_commands(curated.example_fix, ROOT / "tests" / "data" / "model_configs") if curated.example_fix else ""
            if not isinstance(found, str):
                commands += [found.before, found.after]
        start = time.perf_counter()
        examples.resolve_all(python, commands[:1])
        one = time.perf_counter() - start
        start = time.perf_counter()
        examples.resolve_all(python, commands)
        every = time.perf_counter() - start
        print(f"one child, import and 1 command: {one:.1f} s")
        print(f"one child, import and {len(commands)} commands: {every:.1f} s; {1000 * (every - one) / max(1, len(commands) - 1):.0f} ms a command")


if __name__ == "__main__":
    main()
