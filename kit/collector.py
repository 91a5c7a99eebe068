"""Python's cyclic garbage collector, paused where kit builds many objects and no cycles.

The collector runs after every few hundred new containers (lists, dicts, objects) and now and
then scans every one alive. Loading a 200,000-partition snapshot or setting up a planner
makes millions of them with no reference cycle among them: the scans found nothing to free
and took a third or more of those steps' time. Plain reference counting still frees what the
block drops.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (it runs again after, if it ran before)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

