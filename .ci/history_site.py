"""Build a small site from the two-commit history of tests/test_history.py, in which one
message is reworded, so the browser gate can follow the old id's redirect page to the new one.

    .venv/bin/python .ci/history_site.py WORK_DIR      prints "SITE OLD_ID NEW_ID"

It runs `errorkb build` once per commit into the same site and content folders, so the
ledger written by the first build pairs the reworded message in the second.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator import cli  # noqa: E402
from generator.history import load_ledger  # noqa: E402
from tests.conftest import make_repo  # noqa: E402
# V1 -> V2 rewords the tp message (one `moved` id), moves KV4 to another file and drops pp.
from tests.test_history import V1, V2  # noqa: E402


def main(work: Path) -> int:
    shas = make_repo(work / "upstream", [V1, V2])
    site, content, cache = work / "site", work / "content", work / "cache"
    content.mkdir(parents=True, exist_ok=True)
    for sha in shas:
        # Each build folds its revision into the ledger kept in the content folder.
        options = ["--source", f"git:{work / 'upstream'}@{sha}", "--out", str(site), "--content", str(content)]
        code = cli.main(["build", *options, "--cache-dir", str(cache)])
        if code not in (0, 3):
            return code
    moved = [record for record in load_ledger(content).values() if record.status == "moved"]
    if len(moved) != 1:
        print(f"history_site: expected one reworded error, the ledger has {len(moved)}", file=sys.stderr)
        return 1
    print(site, moved[0].id, moved[0].moved_to)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
