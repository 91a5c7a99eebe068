"""The planner's second process (`kit.concurrency.second_core`): its answers are the ones
computed here, and whatever happens to it, the share is computed here instead and every
wait ends."""
from __future__ import annotations

import os
import sys
import time
import warnings
from typing import NamedTuple

import numpy as np
import pytest

from kit import jit
from kit.formats import plan_text
from kit.model import Broker, Cluster
from kit.plan import plan_rebalance
from kit.plan.actions import rebalance
from kit.plan.solvers.mip import answers_kept
from kit.concurrency import idle, second_core
from kit.plan.steps import leadership


def _pid_and(x):
    return os.getpid(), x * 2


def _only_here(parent: int, how: str):
    """x's answer here; in the second process, it fails as `how` says."""
    if os.getpid() != parent:
        if how == "raise":
            raise RuntimeError("only in the second process")
        if how == "exit":
            os._exit(7)
        time.sleep(3600)  # "hang"
    return "answered here"


@pytest.fixture
def process(monkeypatch):
    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    with second_core.second_process() as forked:
        assert forked
        yield


def _imported(names):
    return [n in sys.modules for n in names]


def test_the_second_process_imports_the_modules_ahead_before_its_first_share(monkeypatch, tmp_path):
    # A module whose import leaves a mark: the second process imports it once forked, before any
    # share asks for it; a module that does not import is passed over, and shares are answered.
    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    (tmp_path / "kit_ahead_probe.py").write_text(
        f"import os\nopen({str(tmp_path / 'imported-by')!r}, 'w').write(str(os.getpid()))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with second_core.second_process(ahead=("no_such_module_for_kit", "kit_ahead_probe")) as forked:
        assert forked
        assert _once_seen(str(tmp_path / "imported-by"))  # imported with no share sent
        here, theirs = second_core.run_both(lambda: _imported(["kit_ahead_probe"]), _imported,
                                            ["kit_ahead_probe", "no_such_module_for_kit"])
    assert here == [False] and theirs == [True, False]
    assert int((tmp_path / "imported-by").read_text()) != os.getpid()


def test_an_entry_ahead_may_name_a_function_the_second_process_calls_once_imported(monkeypatch, tmp_path):
    # ``module:function``: what a share will run loaded before the share comes (kit plan's compiled
    # kernels); a function that is not there, or fails, is passed over like a module that does not import.
    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    (tmp_path / "kit_ahead_call_probe.py").write_text(
        "import os\nloaded = []\n"
        f"def ready():\n    loaded.append(1)\n    open({str(tmp_path / 'called-by')!r}, 'w').write(str(os.getpid()))\n"
        "def broken():\n    raise RuntimeError('not today')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ahead = ("kit_ahead_call_probe:broken", "kit_ahead_call_probe:missing", "kit_ahead_call_probe:ready")
    with second_core.second_process(ahead=ahead) as forked:
        assert forked
        assert _once_seen(str(tmp_path / "called-by"))  # called with no share sent
        _, theirs = second_core.run_both(lambda: None, _loaded_by_probe)
    assert theirs == [1]  # called once, after the one that failed
    assert int((tmp_path / "called-by").read_text()) != os.getpid()


def _loaded_by_probe():
    return sys.modules["kit_ahead_call_probe"].loaded


def test_a_wait_for_the_other_end_does_not_take_the_kept_tasks(process, tmp_path):
    # The processes meet, so the wait is for one part at most: a task (a few tenths of a second)
    # would only lengthen it. It is left for the next wait of `run_both`.
    done, flag = [], tmp_path / "done-here"
    with idle.tasks_kept():
        idle.while_waiting(lambda: (done.append(os.getpid()), flag.touch()))
        starts = np.arange(0, 3 * second_core.WORTH_SPLITTING, second_core.WORTH_SPLITTING)
        assert second_core.solve_from_both_ends(_parts_answered, starts).tolist() == [0, 1]
        assert done == []
        # The next share ends only once the task ran here: it ran during that wait, however
        # fast the second process answers.
        assert second_core.run_both(lambda: None, _once_seen, str(flag)) == (None, True)
        assert done == [os.getpid()]


def _parts_answered(parts):
    choice = np.full(2, -1)
    for part in parts:
        choice[part] = part
    return choice


def test_without_a_second_process_both_shares_are_computed_here():
    assert second_core.run_both(lambda: 1, _pid_and, 4) == (1, (os.getpid(), 8))


def test_a_share_is_computed_in_the_second_process(process):
    here, (pid, answer) = second_core.run_both(lambda: os.getpid(), _pid_and, np.arange(3))
    assert here == os.getpid() and pid != os.getpid()
    assert answer.tolist() == [0, 2, 4]
    # The same process takes the next share.
    assert second_core.run_both(lambda: None, _pid_and, 5)[1] == (pid, 10)


@pytest.mark.parametrize("how", ["raise", "exit", "hang"])
def test_a_failed_share_is_computed_here_with_a_warning_and_the_process_is_dropped(process, monkeypatch, how):
    monkeypatch.setattr(second_core, "MIN_WAIT_S", 2.0)  # the hanging share: waited for 2 s, then killed
    with pytest.warns(RuntimeWarning, match="second process"):
        mine, theirs = second_core.run_both(lambda: "mine", _only_here, os.getpid(), how)
    assert (mine, theirs) == ("mine", "answered here")
    if how != "raise":  # dead or killed: every later share is computed here, without waiting
        assert second_core.run_both(lambda: None, _pid_and, 1)[1] == (os.getpid(), 2)


def test_an_error_here_kills_the_second_process_and_is_raised(process):
    with pytest.raises(ZeroDivisionError):
        second_core.run_both(lambda: 1 / 0, _pid_and, 1)
    assert second_core.run_both(lambda: None, _pid_and, 1)[1] == (os.getpid(), 2)


def _once_seen(path: str) -> bool:
    """Whether `path` appears within 60 s (it is made by a task run here while this waits)."""
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_tasks_kept_for_an_idle_moment_are_done_here_while_the_second_process_works(process, tmp_path):
    flag = tmp_path / "done-here"
    done = []
    with idle.tasks_kept():
        idle.while_waiting(lambda: done.append(os.getpid()))
        idle.while_waiting(flag.touch)
        # The share in the second process ends only once the tasks ran here: they ran during the wait.
        assert second_core.run_both(lambda: "mine", _once_seen, str(flag)) == ("mine", True)
        assert done == [os.getpid()]
        failed = tmp_path / "failed-here"
        idle.while_waiting(lambda: (failed.touch(), 1 / 0))  # an error in a task is raised; the process is dropped
        with pytest.raises(ZeroDivisionError):
            second_core.run_both(lambda: None, _once_seen, str(failed))
    assert second_core.run_both(lambda: None, _pid_and, 1)[1] == (os.getpid(), 2)


def test_outside_tasks_kept_while_waiting_keeps_nothing(process, tmp_path):
    done = []
    idle.while_waiting(lambda: done.append(1))  # a library caller: nothing is kept
    with idle.tasks_kept():
        assert second_core.run_both(lambda: 1, _pid_and, 1)[0] == 1
    assert done == []


def test_one_core_or_kit_plan_processes_1_forks_nothing(monkeypatch):
    monkeypatch.setenv("KIT_PLAN_PROCESSES", "1")
    with second_core.second_process() as forked:
        assert not forked
        assert second_core.run_both(lambda: 1, _pid_and, 1) == (1, (os.getpid(), 2))


def test_the_plan_is_the_same_with_its_shares_in_a_second_process(monkeypatch):
    # Every split (the components of the leader flow, the follower flows, the topic flow beside
    # numba's loading) taken on a small cluster: the same bytes as planned in one process.
    from tests.plan.test_count_balance import _drifted

    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(second_core, "WORTH_SPLITTING", 1)
    monkeypatch.setattr(rebalance, "LARGE", 0)  # one placement, with the topic flow where brokers are empty
    monkeypatch.setattr(leadership, "SPLIT_LIMIT", 1)  # the leader flow solved by components
    shares = []
    run_both = second_core.run_both

    def counted(here, there, *args, split=True, **options):
        # Parts solved from both ends go as second_core's function with the parts' solve.
        share = args[0] if there.__module__ == second_core.__name__ else there
        shares.append(share.__qualname__ if split else None)
        return run_both(here, there, *args, split=split, **options)

    monkeypatch.setattr(second_core, "run_both", counted)
    # As in a process that has not loaded numba (a remove's, a leaders plan's): the leader flow's
    # repair is a share too.
    monkeypatch.setattr(jit, "numba_loaded", lambda: False)
    # The integer programs of the spare copies' placement (no share of theirs is split) are
    # searched once, for the first plan: the second gets HiGHS's same answers from memory
    # (`answers_kept`; tests/plan/test_mip.py holds a second search to the same answer). They
    # were 26 of this test's 36 s.
    with answers_kept():
        for seed in range(4):
            cluster = _drifted(seed)
            if seed % 2:  # an empty broker: the topic flow runs
                new = Broker(id=99, rack=cluster.brokers[1].rack)
                cluster = Cluster(brokers={**cluster.brokers, 99: new}, partitions=cluster.partitions)
            want = plan_text(plan_rebalance(cluster))
            with second_core.second_process(), warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # no share fell back to this process
                assert plan_text(plan_rebalance(cluster)) == want
    assert {"_Batches.solve", "PartFlows.solve", "TopicFlow.quotas", "_repaired_where_compiled"} <= set(shares)


class _Parts(NamedTuple):
    """Parts 0..n-1 of one item each, whose choice is 10 x the part: each part solved leaves a
    file naming the process that solved it. Here, unless `how` is "alone", the first part waits
    until the second process has taken the last (60 s at most, as every wait below). There,
    `how` "wait": the last part waits until this process has taken the part before it; "exit":
    it dies there."""

    n: int
    where: str
    parent: int
    how: str

    def solve(self, parts):
        choice = np.full(self.n, -1, dtype=np.int64)
        for x in parts:
            here = os.getpid() == self.parent
            with open(os.path.join(self.where, f"{x}.{'here' if here else 'there'}"), "w"):
                pass
            if here and x == 0 and self.how != "alone":
                _once_seen(os.path.join(self.where, f"{self.n - 1}.there"))
            if not here and x == self.n - 1:
                if self.how == "exit":
                    os._exit(7)
                _once_seen(os.path.join(self.where, f"{x - 1}.here"))
            choice[x] = 10 * x
        return choice


def _solved(where):
    """{process: parts} as the files left by `_Parts.solve` say."""
    out: dict[str, list[int]] = {"here": [], "there": []}
    for name in os.listdir(where):
        part, side = name.split(".")
        out[side].append(int(part))
    return {side: sorted(parts) for side, parts in out.items()}


def test_parts_from_both_ends_without_a_second_process_are_all_solved_here_once(tmp_path):
    parts = _Parts(7, str(tmp_path), os.getpid(), "alone")
    got = second_core.solve_from_both_ends(parts.solve, np.arange(8) * second_core.WORTH_SPLITTING)
    assert got.tolist() == [10 * x for x in range(7)]
    assert _solved(tmp_path) == {"here": list(range(7)), "there": []}


def test_parts_from_both_ends_meet_where_the_processes_times_make_them(process, tmp_path):
    # The second process's first part (the last) ends only once this one has taken the part
    # before it: so this one takes every other part (split by arcs, each process took half and
    # the second waited out its 60 s), and the second none after its first.
    parts = _Parts(9, str(tmp_path), os.getpid(), "wait")
    got = second_core.solve_from_both_ends(parts.solve, np.arange(10) * second_core.WORTH_SPLITTING)
    assert got.tolist() == [10 * x for x in range(9)]
    assert _solved(tmp_path) == {"here": list(range(8)), "there": [8]}


def test_parts_taken_by_a_second_process_that_dies_are_solved_here(process, tmp_path):
    parts = _Parts(5, str(tmp_path), os.getpid(), "exit")
    with pytest.warns(RuntimeWarning, match="second process"):
        got = second_core.solve_from_both_ends(parts.solve, np.arange(6) * second_core.WORTH_SPLITTING)
    assert got.tolist() == [10 * x for x in range(5)]
    assert _solved(tmp_path)["here"] == list(range(5))


_kept: list = []


def _keep_and_sum(a):
    """Keeps `a` in this process (the second) and returns the sum of every array it kept."""
    _kept.append(a)
    return [int(k.sum()) for k in _kept]


def test_a_shares_arrays_go_through_the_arena_and_stay_whole_after_it_is_freed(process):
    # Through memory shared with the second process, not the pipe: what the second keeps of a
    # share is its own copy, whole after the arena's pages are freed for the next share.
    a = np.arange(3_000_000, dtype=np.int64)
    b = np.arange(1_000_000, dtype=np.int32)[::-1]
    _, first = second_core.run_both(lambda: None, _keep_and_sum, a)
    _, second = second_core.run_both(lambda: None, _keep_and_sum, b)
    assert first == [int(a.sum())] and second == [int(a.sum()), int(b.sum())]
    assert _kept == []  # kept there, not here


def test_a_share_larger_than_the_arena_goes_through_the_pipe(monkeypatch):
    monkeypatch.delenv("KIT_PLAN_PROCESSES", raising=False)
    if not second_core.available():
        pytest.skip("needs fork and two cores")
    monkeypatch.setattr(second_core._Arena, "SIZE", 1 << 16)
    a = np.arange(1_000_000, dtype=np.int64)
    with second_core.second_process() as forked:
        assert forked
        assert second_core.run_both(lambda: None, _pid_and, a)[1][1].tolist() == (2 * a).tolist()
