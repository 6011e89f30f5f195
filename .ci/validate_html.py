"""HTML gate: the Nu Html Checker (vnu.jar from npm's vnu-jar, run by Debian's Java) over every
page that is not an error page, plus a seeded random sample of error pages: zero errors.

    .venv/bin/python .ci/validate_html.py SITE [--sample N] [--seed S] [--vnu JAR]

Error pages all come from one template, so a sample finds what every page would; the seed and
the sample are printed so a failure can be run again. Prints one line per error
(`errors/<id>/index.html:LINE.COL: error: MESSAGE`) and a closing "N passed, N failed" line;
exits 1 when any page has an error.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

JAR = Path(__file__).resolve().parent / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"


def pages_to_check(site: Path, sample: int, seed: int) -> list[Path]:
    """Every non-error page, then `sample` error pages chosen with `seed` (all of them if fewer)."""
    pages = sorted(site.rglob("*.html"))
    errors = [page for page in pages if page.relative_to(site).parts[0] == "errors"]
    others = [page for page in pages if page.relative_to(site).parts[0] != "errors"]
    chosen = sorted(random.Random(seed).sample(errors, min(sample, len(errors))))
    return others + chosen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--sample", type=int, default=2500)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--vnu", type=Path, default=JAR)
    args = parser.parse_args(argv)
    site = args.site.resolve()
    pages = pages_to_check(site, args.sample, args.seed)
    error_pages = sum(1 for page in pages if page.relative_to(site).parts[0] == "errors")
    print(f"html: {len(pages) - error_pages} other pages and {error_pages} error pages (seed {args.seed}) of {site}")
    done = subprocess.run(
        ["java", "-Xss4m", "-jar", str(args.vnu), "--errors-only", "--format", "json", *map(str, pages)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        messages = json.loads(done.stderr or done.stdout)["messages"]
    except (ValueError, KeyError):
        print(f"html: vnu.jar did not report (exit {done.returncode}): {(done.stderr or done.stdout)[-2000:]}")
        return 1
    bad: set[str] = set()
    for message in messages:
        if message.get("type") not in ("error", "non-document-error"):
            continue
        where = message.get("url", "").removeprefix("file:")
        where = Path(where).relative_to(site).as_posix() if where.startswith(str(site)) else where
        bad.add(where)
        print(f"html: {where}:{message.get('lastLine', '?')}.{message.get('firstColumn', message.get('lastColumn', '?'))}: "
              f"{message['type']}: {message.get('message', '')}")
    print(f"{len(pages) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
