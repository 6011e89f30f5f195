"""Build a small site from the two-commit history of tests/test_history.py, in which one message is reworded, so the
browser gate can follow the old id's redirect page to the new one.

    .venv/bin/python .ci/history_site.py WORK_DIR      prints "SITE OLD_ID NEW_ID"

The ledger is folded over both commits with `generator.history.update_ledger` and handed to
`generator.build.build`, as `errorkb build` does once the ledger is wired into it.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.build import build, inputs_of  # noqa: E402
from generator.config import Config  # noqa: E402
from generator.history import update_ledger  # noqa: E402
from generator.model import group_sites  # noqa: E402
from generator.pipeline import extract_upstream  # noqa: E402
from generator.upstream import open_source  # noqa: E402
from tests.conftest import make_repo  # noqa: E402
# V1 -> V2 rewords the tp message (one `moved` id), moves KV4 to another file and drops pp.
from tests.test_history import V1, V2  # noqa: E402



def main(work: Path) -> int:
    shas = make_repo(work / "upstream", [V1, V2])
    config, cache = Config(), work / "cache"
    records: dict = {}
    for sha in shas:
        source = f"git:{work / 'upstream'}@{sha}"
        extraction = extract_upstream(open_source(source, config, cache), cache, jobs=1)
        update = update_ledger(records, group_sites(extraction.sites, extraction.upstream.repo), extraction.upstream)
        records = update.records
    moved = [record for record in records.values() if record.status == "moved"]
    if len(moved) != 1:
        print(f"history_site: expected one reworded error, the ledger has {len(moved)}", file=sys.stderr)
        return 1
    content = work / "content"
    content.mkdir(exist_ok=True)
    inputs = inputs_of(config, source, work / "site", content, cache)
    build(config, inputs, ledger=tuple(sorted(records.values(), key=lambda r: r.id)), changes=update.changes, jobs=1)
    print(work / "site", moved[0].id, moved[0].moved_to)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
