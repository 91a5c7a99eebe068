"""Python's cyclic garbage collector, paused where kit builds many objects and no cycles; and
the C heap's free pages handed back to the system (`memory_returned`).

The collector runs after every few hundred new containers (lists, dicts, objects) and now and
then scans every one alive. Loading a 200,000-partition snapshot or setting up a planner
makes millions of them with no reference cycle among them: the scans found nothing to free
and took a third or more of those steps' time. Plain reference counting still frees what the
block drops.
"""
from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (it runs again after, if it ran before).

    What the block made joins the oldest generation, as if it had survived the scans: else the
    first collection after the block scans all of it at once (1.7 CPU s after planning
    1,000,000 partitions), finding nothing. The next full collection still frees any cycle."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # every tracked object to the permanent generation (a list merge, no scan)
        gc.unfreeze()  # and from there to the oldest generation
        gc.enable()


def spared_at_exit() -> None:
    """Leave every object alive now out of the collector's scans for the rest of the process,
    for a command that ends with it: the interpreter's last full collection at exit scanned
    them all and found nothing (0.37-0.47 CPU s after a 200,000-partition `kit plan`, which
    leaves numba's, SciPy's and OR-Tools' modules and the loaded cluster's objects behind;
    0.05-0.06 left out). Reference counting still frees them, and what is made after this is
    collected as before. Only a cycle alive at exit is no longer collected, and kit closes what
    it writes before then (a 5,000-partition plan: some 30 of the 40 CPU ms after its last
    output)."""
    gc.freeze()


def memory_returned() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim): freed objects and
    arrays then lower the resident size, where the heap would keep their pages for its own
    reuse (arrays of tens of MiB rarely fit those holes again, and take new pages). A no-op
    without glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
