"""Two independent shares of a planner's work at once: one in a second process on the
second core, the other here (`run_both`).

The planner's slow parts on large clusters are OR-Tools solves, which hold the GIL, so
threads would only take turns. `kit plan` forks the second process at its start
(`second_process`), while it is still small: a fork of the loaded 600 MB planner would
cost more than the share it takes, because the parent then faults on every page it writes
afterwards (three such forks cost a 200,000-partition scale-out 155,000 page faults, some
0.3-0.8 s). Each share goes over a pipe as a pickled function and its arguments, their
arrays through memory shared with the second process (`_Arena`), and comes back pickled.
Parts of one job are taken from either end by the two processes (`solve_from_both_ends`).

While this process waits for a share's answer it does the tasks given to
`idle.while_waiting` (work done ahead for later): a scale-out waits some 1.6 s for its topic
flow at 200,000 partitions.

The answer never depends on the second process, and every wait has an end. Without one
(library callers, notebooks, the dashboard: nothing forks there), or where it fails or has
not answered within `WAIT_FACTOR` times the time the share here took (at least
`MIN_WAIT_S`), the share is computed here, with a warning when the process failed; it is
then killed and not used again. The shares are deterministic, so the plan is the same
either way: only the time differs. `kit plan` forks nothing with ``KIT_PLAN_PROCESSES=1``
in the environment or on a machine with one core.
"""
from __future__ import annotations

import importlib
import mmap
import os
import pickle
import select
import signal
import struct
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import numpy as np

from kit.concurrency import idle

# Candidate arcs from which a solve is worth splitting over two processes: about 0.1 s of
# OR-Tools at 100,000 arcs, against some 10 ms to send the arrays and the answer over.
WORTH_SPLITTING = 100_000
# The wait for the second process once the share here is done: this many times that share's
# time, and at least MIN_WAIT_S (the shares are halves of one job; a loaded machine may starve
# one of them for a while).
WAIT_FACTOR = 10.0
MIN_WAIT_S = 60.0
_STOP_WAIT_S = 5.0  # for the second process to exit once told to, before it is killed

Here = TypeVar("Here")
There = TypeVar("There")


class _Failed(Exception):
    """The second process did not do its share (the reason is the message)."""


# The parts `solve_from_both_ends` has taken: [0, _claims[0]) here, [_claims[1], n) there. In
# memory shared with the second process once it is forked (`_Process`), so that each sees
# where the other is; this process's own otherwise (the other end's parts then computed here too).
_claims = np.zeros(2, dtype=np.int64)


class _Process:
    """The second process, forked: it imports the modules `ahead`, then reads (function,
    arguments) from one pipe and writes (ok, answer) back on another until its task pipe closes."""

    def __init__(self, ahead: tuple[str, ...] = ()):
        global _claims
        # An anonymous mapping is shared with the process forked after it (MAP_SHARED).
        _claims = np.frombuffer(mmap.mmap(-1, _claims.nbytes), dtype=np.int64)
        self.arena = _Arena.made()
        task_r, task_w = os.pipe()
        answer_r, answer_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(task_w)
            os.close(answer_r)
            _serve(task_r, answer_w, ahead, self.arena)  # never returns
        os.close(task_r)
        os.close(answer_w)
        os.set_blocking(task_w, False)  # a send waits for room with a deadline
        self.pid, self.tasks, self.answers = pid, task_w, answer_r

    def share(self, there: Callable, args: tuple, wait_s: float) -> None:
        """Send one share: its arrays through the arena where they fit, the rest through the pipe."""
        buffers: list[pickle.PickleBuffer] = []
        head = pickle.dumps((there, args), protocol=5, buffer_callback=buffers.append)
        places = self.arena.put(buffers) if self.arena is not None and buffers else None
        if places is None and buffers:
            head = pickle.dumps((there, args), protocol=5)  # arrays and all
        del buffers
        _write_message(self.tasks, pickle.dumps((places, head), protocol=5), time.monotonic() + wait_s)

    def answer(self, deadline: float):
        """The share's answer, once it comes (by `deadline`, monotonic seconds)."""
        try:
            message = _read_message(self.answers, deadline)
        finally:
            if self.arena is not None:
                self.arena.clear()  # read by the second process, or no longer wanted
        if message is None:
            raise _Failed("ended")
        ok, answer = pickle.loads(message)
        if not ok:
            raise _Failed(f"failed ({answer})")
        return answer

    def stop(self, kill: bool = False) -> None:
        """Close the pipes (the process exits when its task pipe closes), reap it; killed
        when `kill` or when it has not exited within `_STOP_WAIT_S`."""
        for fd in (self.tasks, self.answers):
            os.close(fd)
        if not kill:
            deadline = time.monotonic() + _STOP_WAIT_S
            while time.monotonic() < deadline:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.01)
        os.kill(self.pid, signal.SIGKILL)  # not reaped yet: the pid is still this process's child
        os.waitpid(self.pid, 0)


_process: _Process | None = None


def available() -> bool:
    """Whether `second_process` forks: a POSIX fork, more than one core for this process,
    and not turned off (KIT_PLAN_PROCESSES=1)."""
    if not hasattr(os, "fork") or os.environ.get("KIT_PLAN_PROCESSES", "").strip() == "1":
        return False
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores > 1


@contextmanager
def second_process(worth: bool = True, ahead: tuple[str, ...] = ()) -> Iterator[bool]:
    """Within the block, `run_both` gives shares to a second process, forked now (call it
    before loading a large cluster, and before starting threads); yields whether it did.
    `worth` False forks nothing (a small cluster, whose shares are never split). The process
    imports the modules `ahead` (dotted names) while this one reads its input: those its
    shares will need (a share's first import would otherwise wait on its answer; `kit plan`'s
    first, the 200,000-partition scale-out's topic flow, imported OR-Tools' min-cost flow for
    some 0.05-0.09 s). An entry ``module:function`` also calls that function of the module,
    without arguments, once it is imported (loading what its shares will run: compiled kernels)."""
    global _process
    if _process is not None or not worth or not available():
        yield False
        return
    _process = _Process(ahead)
    try:
        yield True
    finally:
        process, _process = _process, None
        if process is not None:
            process.stop()


def running() -> bool:
    """Whether `run_both` gives its shares to a second process now (within `second_process`,
    forked, and not given up)."""
    return _process is not None


def run_both(here: Callable[[], Here], there: Callable[..., There], *args, split: bool = True,
             tasks: bool = True) -> tuple[Here, There]:
    """``(here(), there(*args))``, `there` computed in the second process while `here` runs.

    Parameters
    ----------
    here : callable
        The share done here.
    there, args : callable and its arguments
        The other share: a module-level function (or method) and arguments that pickle
        (arrays); it must not need what `here` changes.
    split : bool
        False computes both here, one after the other (small work: sending it over would
        not pay).
    tasks : bool
        Whether the wait for `there`, once `here` is done, does the tasks kept for such waits
        (`idle.work_until`); False where the wait is short by design, so that a task would
        only lengthen it (and is better left for a long one).

    Returns
    -------
    tuple
        Both answers, the same whichever process computed `there`.
    """
    process = _process
    if not (split and process is not None):
        return here(), there(*args)
    try:
        process.share(there, args, MIN_WAIT_S)
    except (_Failed, OSError) as exc:
        _give_up(process)
        return here(), _here_instead(there, args, str(exc))
    started = time.monotonic()
    try:
        mine = here()
    except BaseException:
        _give_up(process)  # its answer would otherwise be read as the next share's
        raise
    wait = max(MIN_WAIT_S, WAIT_FACTOR * (time.monotonic() - started))
    deadline = time.monotonic() + wait
    try:
        if tasks:
            idle.work_until(lambda: bool(select.select([process.answers], [], [], 0)[0]))
    except BaseException:
        _give_up(process)
        raise
    try:
        theirs = process.answer(deadline)
    except (_Failed, OSError, pickle.UnpicklingError, EOFError) as exc:
        _give_up(process)
        return mine, _here_instead(there, args, str(exc) or f"did not answer within {wait:.0f} s")
    return mine, theirs


def solve_from_both_ends(solve: Callable[[Iterable[int]], np.ndarray | None], part_starts: np.ndarray
                         ) -> np.ndarray | None:
    """``solve(range(n))`` for parts 0..n-1 whose arcs begin at `part_starts` (n + 1 offsets,
    the last one the number of arcs): with `WORTH_SPLITTING` arcs, this process takes the parts
    from the first up and the second process from the last down, until they meet.

    `solve(parts)` gives one choice per item, -1 for the items of the parts it was not given,
    or None when a part has no answer; so the two merge by their maximum. A part's choice must
    not depend on which process solved it, nor on the other parts: a part may be solved by both
    (where they meet), and the second process's parts are solved here if it fails.

    A part is taken, its number written where the other process reads it (`_claims`), before it
    is solved, and a process stops at the first part the other has taken: so no part is left
    out, and the processes meet wherever their parts' times make them (the leader flow's
    batches of components, split by arcs, took twice as long in one half as in the other).
    """
    n_parts = len(part_starts) - 1
    _claims[:] = (0, n_parts)  # the second process is between shares: it reads them once sent
    # The processes meet, so this one waits for one part at most: the kept tasks (a few tenths
    # of a second) would make it wait longer; they are done in a longer wait (a repair's).
    mine, theirs = run_both(lambda: solve(_from_first(n_parts)), _solve_from_last, solve, n_parts,
                            split=int(part_starts[-1]) >= WORTH_SPLITTING, tasks=False)
    if mine is None or theirs is None:
        return None
    return np.maximum(mine, theirs)


def _from_first(n_parts: int) -> Iterator[int]:
    """Parts 0, 1, ... each taken before it is given, up to the first the other process took."""
    x = 0
    while x < min(n_parts, int(_claims[1])):
        _claims[0] = x + 1
        yield x
        x += 1


def _solve_from_last(solve: Callable[[Iterable[int]], np.ndarray | None], n_parts: int) -> np.ndarray | None:
    """`solve` of parts n_parts - 1, n_parts - 2, ... each taken before it is given, down to the
    last the other process took."""
    def parts():
        y = n_parts - 1
        while y >= int(_claims[0]):
            _claims[1] = y
            yield y
            y -= 1
    return solve(parts())


def _give_up(process: _Process) -> None:
    """Kill the second process; `run_both` computes every later share here."""
    global _process
    if _process is process:
        _process = None
    process.stop(kill=True)


def _here_instead(there: Callable[..., There], args: tuple, what: str) -> There:
    warnings.warn(f"kit: the planner's second process {what}; its share was computed in this one "
                  "(the same plan, in more time)", RuntimeWarning, stacklevel=3)
    return there(*args)


def _serve(tasks: int, answers: int, ahead: tuple[str, ...], arena: _Arena | None) -> None:
    """The second process's loop, once the modules `ahead` are imported: each share's answer,
    or why it failed; exits (without the parent's exit handlers or buffers) when the task pipe
    closes or on any other error."""
    code = 1
    try:
        for entry in ahead:
            module, _, function = entry.partition(":")
            try:
                loaded = importlib.import_module(module)
                if function:
                    getattr(loaded, function)()
            except Exception:  # noqa: BLE001 - a share that needs it fails there, and is computed in the parent
                pass
        while (message := _read_message(tasks, None)) is not None:
            places, head = pickle.loads(message)
            there, args = pickle.loads(head, buffers=None if places is None else arena.copies(places))
            del message, head
            try:
                out = (True, there(*args))
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which computes it itself
                out = (False, f"{type(exc).__name__}: {exc}")
            del there, args
            _write_message(answers, pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL), None)
            del out
        code = 0
    finally:
        os._exit(code)


class _Arena:
    """Memory shared with the second process, mapped before the fork (anonymous, MAP_SHARED),
    through which a share's arrays go instead of the pipe.

    Through the pipe, this process waited while the second read the share (the 1,000,000-
    partition follower flows: 70 MB, 0.17 s of the main process's critical path, and as long
    again before the second could begin): here the arrays are copied in, this process's view of
    the pages dropped (so its resident memory does not keep them), and only their places go
    over the pipe. The second process copies them out into its own memory (nothing it keeps
    refers to the arena), and the pages are freed once its answer is in."""

    SIZE = 1 << 30  # address space only: a page takes memory when a share is written to it
    _ALIGN = 64

    def __init__(self, mem: mmap.mmap):
        self.mem, self.used = mem, 0

    @classmethod
    def made(cls) -> _Arena | None:
        """An arena, or None where the system gives no such mapping (arrays then go by the pipe)."""
        try:
            mem = mmap.mmap(-1, cls.SIZE)
        except (OSError, ValueError, OverflowError):
            return None
        return cls(mem) if hasattr(mem, "madvise") and hasattr(mmap, "MADV_REMOVE") else None

    def put(self, buffers: list[pickle.PickleBuffer]) -> list[tuple[int, int]] | None:
        """The buffers copied in: their (offset, length), or None when one is not contiguous or
        they do not fit."""
        try:
            raws = [b.raw() for b in buffers]
        except BufferError:
            return None
        places, end = [], 0
        for raw in raws:
            places.append((end, raw.nbytes))
            end = -(-(end + raw.nbytes) // self._ALIGN) * self._ALIGN
        if end > self.SIZE:
            return None
        for (offset, size), raw in zip(places, raws):
            self.mem[offset:offset + size] = raw
        self.used = -(-end // mmap.PAGESIZE) * mmap.PAGESIZE
        if self.used:
            self.mem.madvise(mmap.MADV_DONTNEED, 0, self.used)  # the data stays, for the other process
        return places

    def copies(self, places: list[tuple[int, int]]) -> list[bytearray]:
        """What `put` copied in at these places, copied out (in the second process)."""
        with memoryview(self.mem) as view:
            return [bytearray(view[offset:offset + size]) for offset, size in places]

    def clear(self) -> None:
        """Free the pages the last share took (in this process, once the other read them)."""
        if self.used:
            self.mem.madvise(mmap.MADV_REMOVE, 0, self.used)
            self.used = 0


_HEADER = struct.Struct(">Q")  # a message's length, before it


def _write_message(fd: int, data: bytes, deadline: float | None) -> None:
    """Write `data` with its length before it; by `deadline` (monotonic s) on a non-blocking fd."""
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise _Failed("did not take its share in time")
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


def _read_message(fd: int, deadline: float | None) -> bytes | None:
    """One message (see `_write_message`); None when the pipe closed before it began."""
    header = _read_exactly(fd, _HEADER.size, deadline, may_end=True)
    if header is None:
        return None
    return _read_exactly(fd, _HEADER.unpack(header)[0], deadline, may_end=False)


def _read_exactly(fd: int, size: int, deadline: float | None, may_end: bool) -> bytes | None:
    chunks, got = [], 0
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise _Failed("")
        chunk = os.read(fd, min(size - got, 1 << 22))
        if not chunk:
            if may_end and not got:
                return None
            raise _Failed("ended")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
