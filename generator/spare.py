"""The spare tree: the site before the current one, kept beside the output folder at
`.<out>.spare` so that the next build brings it up to date instead of making 27,000 new folders
(`build.write_site`).

A build that finds no spare (the first one into a folder, say) leaves one behind all the same:
once its site is in place it starts a detached process (`make_later`) that links a copy of the
new site into the spare's place and describes it in the page manifest. Its 27,000 folders cost
seconds of system time (the 58,000 links far less), which the build that needed no spare should
not wait for. That
process holds `.<out>.spare.lock` until it is done; a build reads the spare's description only
after taking that lock (`wait`), so it never sees half a spare. A spare process killed halfway
leaves no description, and its half-made tree is cleared by the next build.

Run by `make_later` as `python -m generator.spare OUT MANIFEST FD`: no build state is shared
with it but the lock's open file, and it imports nothing of the build.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def spare_of(out: Path) -> Path:
    """The site before the current one, kept beside `out` to be brought up to date by the next
    build instead of making a new tree: `.<out>.spare`."""
    return out.parent / f".{out.name}.spare"


def _lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.spare.lock"


def wait(out: Path) -> None:
    """Return once no spare process for `out` is at work (at once when none is)."""
    try:
        with open(_lock_path(out.absolute()), "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
    except OSError:
        pass


def make_later(out: Path, manifest: Path) -> None:
    """Start a detached process that links a spare tree of the site in `out` as the page
    manifest at `manifest` lists its files, then records it there. The lock is taken here and
    handed over with its open file, so a build that starts before the process does still waits
    for it. Where no process can be started, there is simply no spare."""
    out = out.absolute()
    try:
        handle = open(_lock_path(out), "wb")
    except OSError:
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            package = str(Path(__file__).resolve().parent.parent)
            path = os.pathsep.join(filter(None, [package, os.environ.get("PYTHONPATH")]))
            subprocess.Popen(
                [sys.executable, "-m", "generator.spare", str(out), str(manifest.absolute()), str(handle.fileno())],
                pass_fds=(handle.fileno(),),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path},
            )
        except OSError:
            pass


def link_spare(out: Path, manifest: Path) -> bool:
    """Link every file the manifest lists from `out` into a new tree, put it at `spare_of(out)`
    and describe it in the manifest as equal to the site; False (and nothing left behind but
    possibly a `.<out>.tmp-*` folder, which builds clear) when anything is not as expected."""
    try:
        record = json.loads(manifest.read_bytes())
        files = sorted(record["files"])
        if record.get("spare") is not None or os.path.lexists(spare_of(out)):
            return False
    except (OSError, ValueError, KeyError, TypeError):
        return False
    tree = tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent)
    try:
        made = {tree}
        for relative in files:
            target = f"{tree}/{relative}"
            folder = target.rpartition("/")[0]
            if folder not in made:
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            os.link(f"{out}/{relative}", target)
        os.chmod(tree, 0o755)
        os.rename(tree, spare_of(out))
    except OSError:
        shutil.rmtree(tree, ignore_errors=True)
        return False
    folder = os.stat(spare_of(out))
    record["spare"] = {"folder": [folder.st_dev, folder.st_ino], "differs": {}, "absent": []}
    from generator.files import write_atomic

    try:
        write_atomic(manifest, json.dumps(record, sort_keys=True).encode())
    except OSError:
        return False
    return True


if __name__ == "__main__":
    out_arg, manifest_arg, descriptor = sys.argv[1:4]
    try:
        # Upkeep for a later build: any build running now comes first.
        os.nice(19)
        link_spare(Path(out_arg), Path(manifest_arg))
    finally:
        os.close(int(descriptor))
