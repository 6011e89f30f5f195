"""What the benchmarks print about the machine beside their figures: its kind, and how fast its
file system makes a new folder holding a page right now.

A cold build makes some 36,000 folders and 77,000 files. On the 2-core machines measured, one
folder with a 9 KB file in it took 24 µs of the kernel's time in one minute and 400-600 µs a few
minutes later on the same ext4 file system, after trees of 100,000 files were deleted: ext4's
inode allocator then reads the inode of each free inode it passes to skip those deleted in the
last minutes (`recently_deleted`, `find_get_block_common`: 40% of the probe's samples under
perf). That is 1 s or 20 s of a cold build, which no change to errorkb moves. The probe says
which kind of minute a figure comes from.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import tempfile
import time
from pathlib import Path


def describe() -> str:
    return f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.platform()}"


def file_system_probe(near: Path, count: int = 2000) -> str:
    """Microseconds per new folder with a 9 KB `index.html` in it, of wall and of system time,
    made `count` times in a scratch folder beside `near` (on its file system), then deleted."""
    data = b"x" * 9000
    scratch = Path(tempfile.mkdtemp(prefix="errorkb-probe-", dir=near))
    try:
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for number in range(count):
            folder = f"{scratch}/{number:016x}"
            os.mkdir(folder)
            handle = os.open(f"{folder}/index.html", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(handle, data)
            os.close(handle)
        wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    system = after.ru_stime - before.ru_stime
    return f"file system: a folder with a 9 KB page in {wall / count * 1e6:.0f} µs ({system / count * 1e6:.0f} µs of system time)"
