"""Work done ahead while the planner waits: tasks given to `while_waiting` are done by the
planner's own thread when it would otherwise only wait, for the second process's answer
(`second_core.run_both`) or for the count balance's compiled kernel to choose its next
moves (`count_balance.moves_aside`).

A task is work whose result is kept for later and that later would do anyway (filling a
cache, such as the duration estimate's view of the cluster read, `report.estimate.prepare`):
the output is the same whether it was done ahead or not. Tasks are kept only inside a
`tasks_kept` block (`kit plan` opens one; library callers do not, and nothing is kept for
them); those not done by its end are dropped.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_tasks: list[Callable[[], object]] | None = None


@contextmanager
def tasks_kept() -> Iterator[None]:
    """Keep the tasks given to `while_waiting` within the block."""
    global _tasks
    outer, _tasks = _tasks, []
    try:
        yield
    finally:
        _tasks = outer


def while_waiting(task: Callable[[], object]) -> None:
    """Do `task` the next time the planner waits (inside `tasks_kept`; otherwise never).
    What it returns is dropped; what it raises is raised where the wait was."""
    if _tasks is not None:
        _tasks.append(task)


def work_until(ready: Callable[[], bool]) -> None:
    """Do the kept tasks, one at a time and in order, until `ready()` or none is left."""
    while _tasks and not ready():
        _tasks.pop(0)()
