"""Faults during `errorkb build`: a build killed at any moment, corrupt cache entries, a
read-only output folder, a full disk and two builds at once. In each case the output folder
holds one whole site (the previous one, or the new one), never a mix, and a fault the user can
fix is one line on stderr, not a traceback.

Builds run as real subprocesses (`python -m generator build`) over a throwaway git repo of a
few hundred errors, so a kill lands while the build is extracting or writing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.publish import build_lock, spare_of
from generator.cli import main
from tests.conftest import make_repo

ROOT = Path(__file__).resolve().parent.parent
FILES = 120


def module(number: int, word: str) -> str:
    """A module with five sites: raises in branches, an assert, a loop and a `with`."""
    return f"""\
        import warnings


        class Settings{number}:
            def check(self, size, mode):
                if size < 1:
                    raise ValueError(f"{word} size {{size}} must be at least 1 in module {number}")
                elif mode not in ("a", "b"):
                    raise RuntimeError("{word} mode %r is not supported in module {number}" % mode)
                assert size % 2 == 0, "{word} size must be even in module {number}"
                for item in range(size):
                    if item > 100:
                        warnings.warn("{word} more than 100 items in module {number}")
                with open(mode) as handle:
                    raise NotImplementedError("{word} reading {{}} in module {number}".format(handle))
        """


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> tuple[Path, list[str]]:
    """A repo with two commits: the second rewords every message, so every page changes."""
    root = tmp_path_factory.mktemp("faults") / "upstream"
    commits = [
        {f"python/sglang/srt/m{n}.py": module(n, word) for n in range(FILES)}
        for word in ("first", "second")
    ]
    return root, make_repo(root, commits)


def command(upstream, revision: int, out: Path, cache: Path) -> list[str]:
    repo, shas = upstream
    content = out.parent / "content"
    content.mkdir(exist_ok=True)
    return [sys.executable, "-m", "generator", "build", "--source", f"git:{repo}@{shas[revision]}",
            "--out", str(out), "--cache-dir", str(cache), "--content", str(content)]


def build(upstream, revision: int, out: Path, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command(upstream, revision, out, cache), capture_output=True, text=True, cwd=out.parent, timeout=600, check=False)


def tree(folder: Path) -> dict[str, str]:
    """Every file of a site by path, as a digest of its bytes."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def one_line_error(stderr: str, says: str) -> None:
    lines = [line for line in stderr.splitlines() if line.startswith("errorkb: ") and "curated" not in line]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and says in lines[0], stderr


@pytest.fixture(scope="module")
def sites(upstream, tmp_path_factory) -> dict[str, dict[str, str]]:
    """The sites that fault-free builds write, to compare the faulty runs against: each
    revision alone ("0", "1"), and "0>1", revision 1 built after 0 into the same folders (its
    ledger then knows the old ids: aliases, redirect pages, changes)."""
    trees = {}
    for name, revisions in (("0", (0,)), ("1", (1,)), ("0>1", (0, 1))):
        out = tmp_path_factory.mktemp("clean") / "site"
        for revision in revisions:
            done = build(upstream, revision, out, out.parent / "cache")
            assert done.returncode == 0, done.stderr
        trees[name] = tree(out)
    assert len({str(sorted(t.items())) for t in trees.values()}) == 3
    return trees


def folder_times(root: Path) -> dict[str, int]:
    """The modification time of every folder under `root`, which changes when a file in it is
    added, replaced or removed."""
    return {folder: os.stat(folder).st_mtime_ns for folder, _, _ in os.walk(root)}


def processes_naming(out: Path) -> list[int]:
    """The processes whose command line names `out`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(out).encode() in line:
                found.append(int(entry.name))
    return found


def staging_of(out: Path) -> list[Path]:
    return list(out.parent.glob(f".{out.name}.tmp-*"))


@pytest.mark.parametrize("moment", ["extracting", "writing a new tree", "writing the spare tree"])
def test_a_killed_build_leaves_the_previous_site_whole(upstream, sites, tmp_path, moment) -> None:
    out, cache = tmp_path / "site", tmp_path / "cache"
    # Revisions built before the killed one, and the one it builds.
    before, target = ((0,), 1) if moment != "writing the spare tree" else ((0, 1), 0)
    for revision in before:
        assert build(upstream, revision, out, cache).returncode == 0
    # After one build there is no spare tree yet, so the build killed while "writing a new
    # tree" makes one; after two, the first site is the spare, brought up to date.
    previous = tree(out)
    process = subprocess.Popen(command(upstream, target, out, cache), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120

    def wait_for(happened) -> None:
        while not happened():
            if process.poll() is not None:
                # Say why: a build that failed (exit 1) is not one that was too quick.
                pytest.fail(f"the build finished (exit {process.returncode}) before it could be killed {moment}: {process.stderr.read().decode(errors='replace')[-800:]}")
            assert time.monotonic() < deadline
            time.sleep(0.002)

    if moment == "extracting":
        time.sleep(0.3)
    elif moment == "writing a new tree":
        # Once the new tree beside the old one has files.
        wait_for(lambda: any(any(folder.iterdir()) for folder in staging_of(out)))
    else:
        # The second build kept the first site as the spare: kill when a folder of it changes.
        assert spare_of(out).is_dir()
        times = folder_times(spare_of(out))
        wait_for(lambda: folder_times(spare_of(out)) != times)
    process.kill()
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert tree(out) == previous
    # Its workers end with it (each one's command line is the build's: forked).
    wait_until = time.monotonic() + 10
    while (left := processes_naming(out)) and time.monotonic() < wait_until:
        time.sleep(0.05)
    assert not left, f"workers of the killed build still run: {left}"
    # The next build cleans up what the killed one left and writes the new site whole, as
    # the same builds give in a folder of their own.
    done = build(upstream, target, out, cache)
    assert done.returncode == 0, done.stderr
    reference = tmp_path / "reference" / "site"
    reference.parent.mkdir()
    for revision in (*before, target):
        assert build(upstream, revision, reference, reference.parent / "cache").returncode == 0
    assert tree(out) == tree(reference)
    assert not staging_of(out)


def test_corrupt_cache_entries_are_rebuilt(upstream, sites, tmp_path) -> None:
    out, cache = tmp_path / "site", tmp_path / "cache"
    assert build(upstream, 0, out, cache).returncode == 0
    corrupted = 0
    for path in sorted(cache.rglob("*")):
        if path.is_file() and "upstream" not in path.parts:
            data = path.read_bytes()
            # Half the entries cut short, half replaced with bytes no reader accepts.
            path.write_bytes(data[: len(data) // 2] if corrupted % 2 else b"\x80\x04corrupt\xff")
            corrupted += 1
    assert corrupted > 3, sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*"))
    done = build(upstream, 0, out, cache)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert tree(out) == sites["0"]
    fresh = tmp_path / "again" / "site"
    fresh.parent.mkdir()
    assert build(upstream, 1, fresh, cache).returncode == 0
    assert tree(fresh) == sites["1"]


def immutable(path: Path, on: bool) -> bool:
    """Set or clear the immutable attribute, which stops even root from writing; False when
    the file system or the sandbox does not allow it."""
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True, check=False)
    return done.returncode == 0


def build_while_immutable(folder: Path, upstream, revision: int, out: Path, cache: Path) -> subprocess.CompletedProcess:
    """A build run while `folder` is immutable, which fails; the folder is writable after."""
    if not immutable(folder, True):
        pytest.skip("the immutable attribute cannot be set here")
    try:
        done = build(upstream, revision, out, cache)
    finally:
        immutable(folder, False)
    assert done.returncode == 1
    return done


@pytest.mark.skipif(shutil.which("chattr") is None, reason="chattr is not installed")
def test_a_read_only_output_folder_is_one_line(upstream, sites, tmp_path) -> None:
    out, cache = tmp_path / "site", tmp_path / "cache"
    assert build(upstream, 0, out, cache).returncode == 0
    assert not spare_of(out).exists()
    # The folder holding the site: no lock, no new tree (nor a spare) can be made there.
    done = build_while_immutable(tmp_path, upstream, 1, out, cache)
    one_line_error(done.stderr, f"errorkb: {out}: cannot write in {tmp_path} (Operation not permitted)")
    assert tree(out) == sites["0"]
    # The site's own folder: a tree is written beside it but cannot be swapped in.
    done = build_while_immutable(out, upstream, 1, out, cache)
    one_line_error(done.stderr, f"errorkb: {out}: cannot write the site (Operation not permitted")
    assert "the previous site is unchanged" in done.stderr
    assert tree(out) == sites["0"]
    assert not staging_of(out)
    # With a spare tree the last build described: brought up to date, but neither swapped in
    # nor moved aside, and the next build does not trust it.
    # (The failed builds cleared the manifest: the first build after them describes a site,
    # the second a spare.)
    assert build(upstream, 1, out, cache).returncode == 0
    assert build(upstream, 0, out, cache).returncode == 0
    assert spare_of(out).is_dir()
    before = tree(out)
    done = build_while_immutable(tmp_path, upstream, 1, out, cache)
    one_line_error(done.stderr, f"errorkb: {out}: cannot write the site (Operation not permitted")
    assert tree(out) == before
    assert build(upstream, 1, out, cache).returncode == 0
    assert not staging_of(out)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare is not installed")
def test_a_full_disk_keeps_the_previous_site(upstream, sites, tmp_path) -> None:
    """On a small tmpfs mounted in a private mount namespace: build, fill the disk, rebuild."""
    disk, cache = tmp_path / "disk", tmp_path / "cache"
    disk.mkdir()
    out = disk / "site"
    (disk / "content").mkdir()
    first = " ".join(command(upstream, 0, out, cache))
    second = " ".join(command(upstream, 1, out, cache))
    script = f"""
        set -u
        mount -t tmpfs -o size=64m tmpfs {disk} || exit 77
        mkdir {disk}/content
        {first} || exit 78
        cp -r {out} {tmp_path}/before
        head -c 200m /dev/zero > {disk}/filler 2>/dev/null
        {second}
        echo "exit=$?"
        cp -r {out} {tmp_path}/after
        ls -a {disk}
    """
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=600, check=False)
    if done.returncode in (77, 1) and "exit=" not in done.stdout:
        pytest.skip(f"cannot mount a tmpfs in a private namespace here: {done.stderr[-300:]}")
    assert done.returncode != 78, "the first build did not fit in 64 MB: " + done.stderr
    assert "exit=1" in done.stdout, done.stdout + done.stderr
    one_line_error(done.stderr, f"errorkb: {out}: cannot write the site (No space left on device")
    assert tree(tmp_path / "before") == tree(tmp_path / "after") == sites["0"]
    assert ".site.tmp-" not in done.stdout


def test_a_second_build_refuses_while_the_lock_is_held(upstream, tmp_path, capsys) -> None:
    out, cache = tmp_path / "site", tmp_path / "cache"
    repo, shas = upstream
    with build_lock(out.absolute()):
        code = main(["build", "--source", f"git:{repo}@{shas[0]}", "--out", str(out), "--cache-dir", str(cache)])
    assert code == 1
    lock = tmp_path / ".site.lock"
    assert capsys.readouterr().err == f"errorkb: {out}: another build is writing this folder (lock {lock})\n"
    assert not out.exists()


def held(lock: Path) -> bool:
    """Whether some process holds a lock on `lock` (read from /proc/locks, taking nothing)."""
    try:
        inode = lock.stat().st_ino
    except FileNotFoundError:
        return False
    return any(line.split()[5].endswith(f":{inode}") for line in Path("/proc/locks").read_text().splitlines())


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="no /proc/locks to see the first build's lock")
def test_two_builds_at_once_never_mix(upstream, sites, tmp_path) -> None:
    out, cache = tmp_path / "site", tmp_path / "cache"
    first = subprocess.Popen(command(upstream, 0, out, cache), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # The first build takes its lock before anything else; with a cold cache it then extracts
    # for seconds, while the second one starts.
    deadline = time.monotonic() + 120
    while not held(tmp_path / ".site.lock"):
        assert first.poll() is None, "the first build finished before the second started"
        assert time.monotonic() < deadline
        time.sleep(0.002)
    second = build(upstream, 1, out, cache)
    assert first.wait(timeout=600) == 0, first.stderr.read()
    assert second.returncode == 1, "the second build was not refused: " + second.stderr
    one_line_error(second.stderr, f"errorkb: {out}: another build is writing this folder")
    assert tree(out) == sites["0"]


def test_a_process_forked_during_a_build_does_not_keep_its_lock(tmp_path):
    """A worker still at its task when its build is killed must not keep the folder locked:
    the next build would fail, saying another build is writing it."""
    script = f"""
import os, time
from pathlib import Path
from generator.publish import build_lock
with build_lock(Path({str(tmp_path / "site")!r})):
    worker = os.fork()
    if worker == 0:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, 1), os.dup2(nowhere, 2)  # the test reads the build's output to its end
        time.sleep(60)
        os._exit(0)
    print(worker, flush=True)
    os._exit(0)  # as a killed build ends: the lock's file closed by the system, nothing released
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    worker = int(done.stdout)
    try:
        os.kill(worker, 0)  # still at its task
        with build_lock(tmp_path / "site"):
            pass
    finally:
        os.kill(worker, signal.SIGKILL)


def test_the_command_ends_with_the_exit_code_and_all_of_its_output(tmp_path):
    """`errorkb` ends its process at once after the command (`cli.run`): what it printed to
    a pipe, buffered, arrives whole, and the exit code is the command's."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    upstream = tmp_path / "up"
    before = {f"python/sglang/m{i}.py": f"def f(x):\n    raise ValueError('check {i} failed')\n" for i in range(20)}
    first, second = make_repo(upstream, [{**before, "python/sglang/kept.py": ""}, {name: None for name in before}])
    command = [sys.executable, "-m", "generator", "diff", f"git:{upstream}@{first}", f"git:{upstream}@{second}", "--cache-dir", str(tmp_path / "cache")]
    diff = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    assert diff.returncode == 0, diff.stderr
    assert all(f"check {i} failed" in diff.stdout for i in range(20))
    bad = subprocess.run([sys.executable, "-m", "generator", "build", "--source", "pypi:nope"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1
