"""Pruning the cache: what recent builds used stays, what they did not goes, and what a user
asked for (downloads, clones, the examples' venv) is never touched."""

from __future__ import annotations

import os
import time

from generator.cache import SPARE_ENTRIES, UNPRUNED, prune
from generator.files import read_cache, write_cache


def touch(path, text="x", age=0.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        path.mkdir(exist_ok=True)
    else:
        path.write_text(text)
    when = time.time() - age
    os.utime(path, (when, when))
    return path


def test_pruning_keeps_what_this_build_used_and_the_most_recent_others(tmp_path):
    started = time.time() - 10
    old = [touch(tmp_path / f"history/{n:032x}-{n}.pickle", age=1000 + 100 * n) for n in range(6)]
    used = touch(tmp_path / "history/ffff-now.pickle", age=0)
    removed = prune(tmp_path, started)
    left = sorted(p.name for p in (tmp_path / "history").iterdir())
    assert used.name in left
    # The most recently used of the others stay, the oldest go.
    assert left == sorted([used.name, *(p.name for p in old[:SPARE_ENTRIES])])
    assert sorted(removed) == sorted(old[SPARE_ENTRIES:])


def test_a_store_and_its_journal_files_go_together_and_leftovers_of_old_formats_too(tmp_path):
    started = time.time() - 10
    for n in range(SPARE_ENTRIES + 1):
        touch(tmp_path / f"sites/{n:016x}.sqlite", age=500 - n)
    oldest = tmp_path / f"sites/{0:016x}"
    touch(tmp_path / f"sites/{0:016x}.sqlite-wal", age=600)
    touch(tmp_path / f"sites/{0:016x}.sqlite-shm", age=600)
    touch(oldest / "00" / "entry.json", age=700)
    touch(oldest, text=None, age=700)
    removed = prune(tmp_path, started)
    names = {p.name for p in removed}
    assert names == {f"{0:016x}.sqlite", f"{0:016x}.sqlite-wal", f"{0:016x}.sqlite-shm", f"{0:016x}"}
    assert not oldest.exists()
    assert len(list((tmp_path / "sites").iterdir())) == SPARE_ENTRIES


def test_downloads_clones_and_the_venv_are_never_pruned(tmp_path):
    kept = [touch(tmp_path / f"{name}/{n}.tar.gz", age=10**6) for name in sorted(UNPRUNED) for n in range(SPARE_ENTRIES + 3)]
    prune(tmp_path, time.time())
    assert all(path.exists() for path in kept)


def test_a_temp_file_of_a_write_in_progress_stays_and_one_left_by_a_killed_build_goes(tmp_path):
    fresh = touch(tmp_path / "search/.abc-state.pickle.x1y2", age=5)
    abandoned = touch(tmp_path / "search/.abc-state.pickle.z3w4", age=10 * 3600)
    assert prune(tmp_path, time.time()) == [abandoned]
    assert fresh.exists()


def test_reading_a_kept_value_marks_it_used(tmp_path):
    path = tmp_path / "arguments/x.pickle"
    write_cache(path, b"\x80\x05}\x94.")  # an empty dict, pickled
    os.utime(path, (1, 1))
    assert read_cache(path, dict) == {}
    assert path.stat().st_mtime > time.time() - 60
