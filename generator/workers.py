"""Work run in other processes: the one module that starts them.

Two shapes. `background` runs a few tasks one after the other in one forked process while
this one goes on, and hands back a function per task that waits for its result. `pool` is a
process pool for maps (rendering pages, extracting and highlighting files). Data reaches a
child through the pool's initializer: with the fork start method the child finds it in the
memory it inherits, nothing is pickled, and nothing is put in a module global of the parent
before it forks. A child never holds the build's lock (`publish.build_lock` takes a POSIX lock,
which belongs to the process that took it), so no at-fork hook is needed.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager

# What `_keep` was handed, in a child process only: its tasks or its shared data.
_GIVEN: tuple = ()


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def cores(jobs: int | None) -> int:
    """How many processes to use: `jobs`, or every core."""
    return jobs or os.cpu_count() or 1


def _keep(parent: int, niceness: int, *given: object) -> None:
    global _GIVEN
    _GIVEN = given
    if niceness:
        os.nice(niceness)
    # As in a build's own process: the work done here (parsing, extracting, rendering) makes
    # millions of objects and no cycles worth collecting, and each pass of the collector walks
    # every one still alive (bench/README.md).
    gc.disable()
    _end_with_parent(parent)


def _end_with_parent(parent: int) -> None:
    """Have the system end this child when the process that started it ends, killed or not:
    an idle worker of a killed build would otherwise wait for work forever. Linux only; elsewhere
    a child still ends when its pool is shut down."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)  # the parent was gone before the request was made


def given() -> tuple:
    """In a child of `pool(..., shared=...)`, the objects shared with it."""
    return _GIVEN


def _run_task(number: int) -> object:
    return _GIVEN[number]()


def mapped(function: Callable[[object], object], items: Sequence[object], least: int, jobs: int | None = None) -> Iterator[object]:
    """`map(function, items)`, in a pool of every core (or `jobs`) when there are at least
    `least` items and more than one core; the pool ends once the results are read."""
    if len(items) < least or cores(jobs) == 1:
        yield from map(function, items)
        return
    with pool(cores(jobs)) as executor:
        yield from executor.map(function, items)


def pool(jobs: int, shared: tuple = (), start: str = "fork", deferred: bool = False) -> ProcessPoolExecutor:
    """A pool of `jobs` processes, each given `shared` (read back in the child with `given`).
    `start` is the start method: "fork" shares this process's records without pickling them;
    "spawn" suits a pool this process keeps using while it builds large records, since every
    page it touched after a fork would be copied. A `deferred` pool's work is needed later
    than what this process and the others do meanwhile: it runs at a lower priority, on the
    cores they leave idle while they wait for each other."""
    if start == "fork" and not can_fork():
        start = "spawn"
    context = multiprocessing.get_context(start)
    return ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_keep, initargs=(os.getpid(), _DEFERRED if deferred else 0, *shared))


# The niceness of a deferred pool's processes: under the scheduler's weights, a tenth of a
# core's share against a process of this one's priority.
_DEFERRED = 10


def background(tasks: Sequence[Callable[[], object]], jobs: int | None, size: int) -> list[Callable[[], object]]:
    """Start `tasks` one after the other in a forked process, which inherits the records they
    read instead of receiving them pickled; returns, per task, a function that waits for its
    result. With one job, no fork, or little work (`size` records), each task runs when its
    result is asked for."""
    if cores(jobs) == 1 or size < 1000 or not can_fork():
        return list(tasks)
    executor = pool(1, tuple(tasks))
    futures = [executor.submit(_run_task, number) for number in range(len(tasks))]

    def waiting(future: Future) -> Callable[[], object]:
        def result() -> object:
            try:
                return future.result()
            finally:
                if all(other.done() for other in futures):
                    executor.shutdown()

        return result

    return [waiting(future) for future in futures]


@contextmanager
def without_cycle_collection():
    """Python's cycle collector off for a build or a backfill, and in the processes they fork. A build makes
    millions of records, lists and tuples and frees them all at its end, and they hold no
    cycles; each collection the allocations triggered walked the records still alive: a fifth
    of a rebuild's time, for nothing to free. Peak memory stays the same (`bench/`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
