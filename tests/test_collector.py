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


def test_spared_at_exit_leaves_what_is_alive_out_of_the_scans_and_collects_what_comes_after():
    gc.collect()
    try:
        kept = _Node()
        collector.spared_at_exit()
        assert gc.get_freeze_count() > 0
        assert not any(o is kept for o in gc.get_objects())  # in no generation a collection scans
        a, b = _Node(), _Node()  # a cycle made after is collected as before
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        gc.collect()
        assert alive() is None
    finally:
        gc.unfreeze()


def test_kit_spares_its_objects_only_when_it_runs_as_the_process_command(monkeypatch, tmp_path):
    import sys

    from kit import cli

    spared = []
    monkeypatch.setattr(collector, "spared_at_exit", lambda: spared.append(True))
    # Refused before anything is read (an output in a missing directory): the command still ends.
    words = ["plan", "rebalance", "--snapshot", str(tmp_path / "c.json"), "--out", str(tmp_path / "no" / "p.json")]
    assert cli.main(words) != 0
    assert spared == []  # called in-process (tests, scripts): the process goes on
    monkeypatch.setattr(sys, "argv", ["kit", *words])
    assert cli.main() != 0
    assert spared == [True]
