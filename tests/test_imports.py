"""kit's pure core imports no I/O or heavy dependency (after Panel's tests/test_imports.py).

Each module is imported in a fresh interpreter, and `sys.modules` is looked at afterwards. An
import hook notes, for the first import of each listed dependency, the kit files on the stack
at that moment, so a failure names the chain (`kit/x.py:12 -> kit/y.py:30 -> pandas`) instead
of only the dependency.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

ROOT = Path(__file__).resolve().parents[1]

PURE = ["kit.plan", "kit.report", "kit.report.figures", "kit.report.waves", "kit.report.estimate",
        "kit.throttle.decide", "kit.throttle.replay", "kit.model", "kit.formats"]
# scipy: the planner loads it only when its exact leader-order program runs (about a second to import);
# numba only when a count balance has thousands of moves ahead (about half a second).
HEAVY = ["kazoo", "pyspark", "pandas", "panel", "holoviews", "bokeh", "nbformat", "papermill", "kafka", "scipy",
         "numba"]
# The runbook layer talks to clusters (kazoo, kafka) when imported, but tables, charts, widgets and
# the HTML record load their libraries only when a notebook asks for them: `kit run` and the
# runner import it before any kernel starts.
RUNBOOK = ["kit.runbook.steps", "kit.runbook.runner", "kit.runbook.catalog", "kit.runbook.replay",
           "kit.runbook.display", "kit.runbook.charts", "kit.runbook.record", "kit.runbook.environment",
           "kit.runbook.checks", "kit.runbook.planning", "kit.runbook.gate", "kit.runbook.change"]
NOTEBOOK_ONLY = ["pandas", "matplotlib", "IPython", "ipywidgets", "nbformat", "nbconvert", "papermill", "panel",
                 "pyspark", "scipy", "numba"]

CHECK = dedent("""\
    import importlib, importlib.abc, os, sys, traceback

    heavy, module = set(sys.argv[1].split(",")), sys.argv[2]
    ours = tuple(os.path.join(os.getcwd(), d, "") for d in ("kit", "spark"))
    root = os.getcwd() + os.sep
    chains = {}

    class Watch(importlib.abc.MetaPathFinder):
        # Only watches: returns None, so the normal finders do the import.
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in heavy and top not in chains:
                chain = [f for f in traceback.extract_stack() if f.filename.startswith(ours)]
                chains[top] = " -> ".join(f"{f.filename[len(root):]}:{f.lineno} ({f.line})" for f in chain)
            return None

    sys.meta_path.insert(0, Watch())
    importlib.import_module(module)
    for top in sorted(heavy & {m.partition(".")[0] for m in sys.modules}):
        print(f"{top}: {chains.get(top) or 'loaded before the import'}")
""")


def loaded_heavy(module: str, heavy: list[str] = HEAVY) -> list[str]:
    """The listed dependencies (`heavy`) a fresh `import module` leaves in `sys.modules`, each
    with its import chain."""
    out = subprocess.run([sys.executable, "-c", CHECK, ",".join(heavy), module], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize("module", PURE)
def test_the_pure_core_loads_no_io_or_heavy_dependency(module):
    found = loaded_heavy(module)
    assert not found, f"import {module} loads " + "; ".join(found)


@pytest.mark.parametrize("module", RUNBOOK)
def test_the_runbook_layer_loads_no_notebook_library_until_asked(module):
    found = loaded_heavy(module, NOTEBOOK_ONLY)
    assert not found, f"import {module} loads " + "; ".join(found)


def test_the_check_names_the_import_chain():
    # The ZooKeeper layer does load kazoo: the check sees it and says where from.
    found = loaded_heavy("kit.cluster.zk.layout")
    assert [line.split(":")[0] for line in found] == ["kazoo"]
    assert "kit/cluster/zk/layout.py:" in found[0] and "from kazoo" in found[0]
