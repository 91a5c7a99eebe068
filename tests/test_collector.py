"""kit.collector.paused: no cyclic collection inside, the collector as it was after, and a
cycle made inside still freed by the next full collection."""
from __future__ import annotations

import gc
import weakref

from kit import collector


class _Node:
    """Something a weak reference can follow, to make a reference cycle of."""


def test_paused_stops_the_collector_inside_and_restores_it_after():
    assert gc.isenabled()
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():  # nested: still paused, and the outer block restores it
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector.paused():
            pass
        assert not gc.isenabled()  # a collector paused before stays paused
    finally:
        gc.enable()


def test_a_cycle_made_inside_is_freed_by_the_next_full_collection():
    with collector.paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        assert alive() is not None  # reference counting alone cannot free a cycle
    gc.collect()
    assert alive() is None
