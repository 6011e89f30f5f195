"""Publishing: the output folder goes from one whole site to the next.

A build's files are written into a tree beside the output folder, which is then swapped in, so
an interrupted or concurrent build never leaves a half-written site. A file whose bytes did not
change is a hard link to the current site's (same bytes, same mtime), so `rsync` and static
hosts upload only the difference. The site swapped out is kept beside the output folder as the
spare tree (`spare_of`): the next build brings it up to date, replacing only the files that
differ, instead of making 27,000 folders anew. Everything here is done when `publish` returns:
nothing keeps writing beside the output folder after the build.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from generator.errors import BuildError
from generator.model import record

# The lock files this process holds (`build_lock`): POSIX locks never conflict within one
# process, so a second build in this process is refused here.
_HELD: set[str] = set()


@contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold `.<out>.lock` beside the output folder for the whole build; a second build fails
    at once with a one-line error instead of mixing its files with the first one's.

    A POSIX record lock (`fcntl.lockf`) belongs to this process alone: a worker forked during
    the build does not hold it, so a worker still at its task when the build is killed cannot
    keep the folder locked. The file is opened close-on-exec and only once, since closing any
    descriptor of it would release the lock."""
    lock_path = out.parent / f".{out.name}.lock"
    key = str(lock_path.absolute())
    if key in _HELD:
        raise BuildError(f"{out}: another build is writing this folder (lock {lock_path})")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(lock_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise BuildError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    try:
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise BuildError(f"{out}: another build is writing this folder (lock {lock_path})") from None
            raise
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
    finally:
        os.close(descriptor)


def spare_of(out: Path) -> Path:
    """The site before the current one, kept beside `out` to be brought up to date by the next
    build instead of making a new tree: `.<out>.spare`."""
    return out.parent / f".{out.name}.spare"


@record
class Written:
    """What `publish` did: the files of the new site, how many of them changed bytes, the
    digest of each by path, and the digests of the tree it kept as the spare (None: none kept)."""

    total: int
    written: int
    hashes: dict[str, str]
    spare: dict[str, str] | None


def publish(
    files: Iterable[tuple[str, bytes | None]],
    out: Path,
    previous: Mapping[str, str] | None = None,
    spare: Mapping[str, str] | None = None,
) -> Written:
    """Write every file into a tree beside `out`, then swap it in.

    `previous` holds the digests of the files of the site now in `out`, by path; `spare` those
    of the tree the last build kept beside it (`spare_of`). With both, that tree is brought up
    to date, replacing only the files that differ, and swapped in: a rebuild then costs what
    changed, not 27,000 new folders. Otherwise a new tree is made. Either way the site that was
    in `out` is kept as the next spare when `previous` describes it.

    A file whose bytes equal the current site's is a hard link to it (same bytes, same mtime),
    and so is a file given as None; a file whose bytes changed is a new file. Without
    `previous`, telling an unchanged file costs a read of the old one.
    """
    out = out.absolute()
    # Leftovers of a build that was killed: never part of any site.
    for stale in [*out.parent.glob(f".{out.name}.tmp-*"), *out.parent.glob(f".{out.name}.old-*")]:
        shutil.rmtree(stale, ignore_errors=True)
    kept = spare_of(out)
    reuse = reuses_spare(out, previous, spare)
    try:
        if reuse:
            tree = kept
        else:
            if os.path.lexists(kept):
                _discard(kept, out)
            tree = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as error:
        raise BuildError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    writer = _TreeWriter(str(tree), str(out), previous or {}, spare if reuse else {})

    def abandon() -> None:
        if not reuse:
            shutil.rmtree(tree, ignore_errors=True)
            return
        try:
            _discard(tree, out)
        except OSError:
            # A folder nothing can be renamed in: the half-updated spare stays where it is,
            # and no manifest describes it, so the next build does not trust it.
            pass

    try:
        for relative, data in files:
            writer.put(relative, data)
        writer.remove_the_rest()
        os.chmod(tree, 0o755)
        old = _swap(tree, out)
    except OSError as error:
        # A full disk, a read-only folder: the previous site is still whole, and this is not a bug.
        abandon()
        where = f": {error.filename}" if error.filename else ""
        raise BuildError(f"{out}: cannot write the site ({error.strerror}{where}); the previous site is unchanged") from None
    except BaseException:
        abandon()
        raise
    total, written, hashes = writer.total, writer.written, writer.hashes
    if old is None:
        return Written(total, written, hashes, None)
    try:
        if not previous:
            # Nothing describes the old site: not worth keeping. Renamed first, since it may
            # sit at the staging name, which a tree being written has.
            _discard(old, out)
            return Written(total, written, hashes, None)
        if old != kept:
            os.replace(old, kept)
    except OSError:
        shutil.rmtree(old, ignore_errors=True)
        return Written(total, written, hashes, None)
    return Written(total, written, hashes, dict(previous))


def reuses_spare(out: Path, previous: Mapping[str, str] | None, spare: Mapping[str, str] | None) -> bool:
    """Whether `publish` brings the spare tree up to date, given the digests of the site's
    files (`previous`) and of the spare's (`spare`), rather than making a new tree."""
    kept = spare_of(out)
    return bool(previous) and spare is not None and kept.is_dir() and not kept.is_symlink() and out.is_dir()


class _TreeWriter:
    """Puts one file after another into `root` (a new folder, or the spare tree), linking to
    the current site in `old` what did not change. Plain strings and os calls: a site has
    57,000 files in 27,000 folders, and pathlib's objects cost more than the links themselves.

    A file already in `root` is never written into: it may be the very inode the current site
    serves. It is replaced by a new file or a new link instead."""

    def __init__(self, root: str, old: str, previous: Mapping[str, str], spare: Mapping[str, str]) -> None:
        self.root, self.old, self.previous, self.spare = root, old, previous, spare
        # No site yet (a first build): nothing to compare with or link to.
        self._old_site = os.path.isdir(old)
        self.hashes: dict[str, str] = {}
        self.total = self.written = 0
        self._made = {root}

    def put(self, relative: str, data: bytes | None) -> None:
        self.total += 1
        current = self.previous.get(relative)
        old = f"{self.old}/{relative}"
        if data is None:
            digest = current if current is not None else _file_digest(old)
            same = True
        else:
            digest = file_digest(data)
            same = digest == current if self.previous else self._old_site and _same_bytes(old, data)
        self.hashes[relative] = digest
        if same and current is not None and self.spare.get(relative) == current:
            # The spare's file is the current site's own (both were linked to one inode).
            return
        target = f"{self.root}/{relative}"
        self._folder(target.rpartition("/")[0])
        if same and self._link(old, target):
            return
        if data is None:
            raise BuildError(f"{old}: the previous build's file vanished during the build")
        self._replace(target, partial(_write_new, target, data))
        self.written += 1

    def remove_the_rest(self) -> None:
        """Remove what the spare tree has and this site does not, and the folders left empty."""
        for relative in sorted(self.spare.keys() - self.hashes.keys()):
            path = f"{self.root}/{relative}"
            try:
                os.unlink(path)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue  # gone already, now a folder of this site's, or under a file of its
            folder = path.rpartition("/")[0]
            while folder != self.root:
                try:
                    os.rmdir(folder)
                except OSError:
                    break
                folder = folder.rpartition("/")[0]

    def _link(self, old: str, target: str) -> bool:
        try:
            self._replace(target, partial(os.link, old, target))
            return True
        except FileNotFoundError:
            return False

    def _replace(self, target: str, make: Callable[[], object]) -> None:
        try:
            make()
        except FileExistsError:
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.unlink(target)
            make()

    def _folder(self, folder: str) -> None:
        if folder in self._made:
            return
        try:
            if folder.rpartition("/")[0] in self._made:
                os.mkdir(folder)  # one new folder in a known one: one call, 27,000 times
            else:
                os.makedirs(folder, exist_ok=True)
        except FileExistsError:
            if not os.path.isdir(folder):
                self._clear_way(folder)
        except NotADirectoryError:
            self._clear_way(folder)
        self._made.add(folder)

    def _clear_way(self, folder: str) -> None:
        """A file of the spare tree stands where this site has a folder: remove it."""
        parts = folder[len(self.root) + 1 :].split("/")
        for count in range(1, len(parts) + 1):
            prefix = "/".join([self.root, *parts[:count]])
            if os.path.islink(prefix) or os.path.isfile(prefix):
                os.unlink(prefix)
        os.makedirs(folder, exist_ok=True)


def _write_new(target: str, data: bytes) -> None:
    with open(target, "xb") as handle:
        handle.write(data)


# What `file_digest` is, as the page manifest records it: digests made another way are not
# compared with this build's (the old files are read instead).
FILE_DIGEST = "sha256/32"


def file_digest(data: bytes) -> str:
    """A site file's digest: sha256, which runs in hardware on the machines measured, faster
    than blake2b over everything a cold build writes (bench/README.md)."""
    return hashlib.sha256(data).hexdigest()[:32]


def _file_digest(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return file_digest(handle.read())
    except OSError as error:
        raise BuildError(f"{path}: the previous build's file vanished during the build ({error.strerror})") from None


def _same_bytes(path: str, data: bytes) -> bool:
    try:
        if os.stat(path).st_size != len(data):
            return False
        with open(path, "rb") as handle:
            return handle.read() == data
    except OSError:
        return False


def _swap(tree: Path, out: Path) -> Path | None:
    """Put `tree` at `out`; returns where the site that was there is now (None: there was
    none). Where the system can, both folders trade places in one step; elsewhere the old one
    is moved aside first, and a reader may find no site for that instant."""
    if not out.exists():
        os.replace(tree, out)
        return None
    if not out.is_dir():
        raise BuildError(f"{out}: exists and is not a folder")
    if exchange(tree, out):
        return tree
    retired = _aside(out, out)
    try:
        os.replace(tree, out)
    except OSError:
        os.replace(retired, out)
        raise
    return retired


def exchange(first: Path, second: Path) -> bool:
    """Swap two folders atomically (Linux's `renameat2` with RENAME_EXCHANGE); False where the
    C library or the file system cannot."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _discard(folder: Path, out: Path) -> None:
    """Move `folder` out of the way at once, then delete it; if that is cut short, the next
    build into `out` clears the `.<out>.old-*` folder it left."""
    retired = _aside(folder, out)
    shutil.rmtree(retired, ignore_errors=True)


def _aside(folder: Path, out: Path) -> Path:
    """Rename `folder` to a new `.<out>.old-*` name beside `out`, which builds clear; returns it."""
    retired = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    os.rmdir(retired)
    os.replace(folder, retired)
    return retired
