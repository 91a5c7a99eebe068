"""kit's layers: what each may import (`LAYERS`, checked on the source), and what a fresh import
or a command's help loads (checked in a fresh interpreter, after Panel's tests/test_imports.py).

The layer rules are read from the source with `ast` (nothing is executed): every import of a
kit module, at the top or inside a function, and every module a command names with
`lazy_module`, must be one its layer may import. For the loads, an import hook notes, for the
first import of each listed dependency, the kit files on the stack at that moment, so a failure
names the chain (`kit/x.py:12 -> kit/y.py:30 -> pandas`) instead of only the dependency.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from textwrap import dedent

import pytest

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- the layer rules

# The foundations: data, errors, text, files and formats, integer-array helpers, which every
# layer may import; they import only one another.
FOUNDATION = {"kit", "kit.errors", "kit.text", "kit.validate", "kit.collector", "kit.pids", "kit.files", "kit.model",
              "kit.events", "kit.progress", "kit.formats", "kit.clock_file", "kit.jit", "kit.array_ops"}
# The pure models of a cluster's traffic and copies, shared by the planner, the estimator and
# the simulator; they import only the foundations and one another.
MODELS = {"kit.traffic", "kit.offline", "kit.physics", "kit.fill_kernel", "kit.capacity"}
THROTTLE = {"kit.throttle.decide", "kit.throttle.configs", "kit.throttle.replay", "kit.throttle.lease",
            "kit.throttle.sources", "kit.throttle.overrides", "kit.throttle.loop"}
# Each layer (a kit module, or a package and everything in it) and the layers it may import
# besides itself. A module belongs to the longest layer name it starts with.
LAYERS: dict[str, set[str]] = {
    **{name: FOUNDATION for name in FOUNDATION},
    **{name: FOUNDATION | MODELS for name in MODELS},
    # The planner's process machinery (a second process, work done while waiting): nothing of kit.
    "kit.concurrency": set(),
    # The planner: pure, cluster in, plan out; neither the estimate nor the simulator nor a cluster.
    "kit.plan": FOUNDATION | MODELS | {"kit.concurrency"},
    # The auto-throttle's decisions and their replay: pure, no planner, no cluster.
    "kit.throttle.decide": FOUNDATION,
    "kit.throttle.configs": FOUNDATION,
    "kit.throttle.replay": FOUNDATION | {"kit.throttle.decide"},
    "kit.throttle.lease": FOUNDATION,
    # The review and the duration estimate: the copy physics, never the simulator (kit.sim).
    "kit.report": FOUNDATION | MODELS | {"kit.plan", "kit.throttle.decide"},
    # File names of kafka-kit's metrics, which the backends and the metrics job share.
    "kit.metrics": FOUNDATION,
    # The seam to a cluster and its two backends.
    "kit.cluster": FOUNDATION | MODELS | {"kit.metrics", "kit.throttle.configs", "kit.throttle.lease"},
    # The simulated clusters: the copy physics, the auto-throttle's decisions, kit's own ZooKeeper
    # layout; never the planner or the estimate.
    "kit.sim": FOUNDATION | MODELS | {"kit.cluster", "kit.throttle.decide", "kit.throttle.configs"},
    # The PySpark jobs: pure DataFrame transforms, nothing of kit; `kit metrics` runs them.
    "kit.spark": set(),
    "kit.metrics.edge": FOUNDATION | {"kit.cluster", "kit.metrics", "kit.spark"},
    # The auto-throttle's metric sources and overrides: read through the seam to a cluster.
    "kit.throttle.sources": FOUNDATION | {"kit.throttle.decide", "kit.cluster", "kit.metrics"},
    "kit.throttle.overrides": FOUNDATION | {"kit.cluster"},
    "kit.throttle.loop": FOUNDATION | THROTTLE | {"kit.cluster", "kit.metrics", "kit.sim"},
    "kit.doctor": FOUNDATION | MODELS | {"kit.cluster", "kit.metrics", "kit.plan", "kit.report"},
    "kit.dashboard": FOUNDATION | MODELS | THROTTLE | {"kit.cluster", "kit.report"},
    # The runbooks use every library layer; only the command line and the dashboard are above them.
    "kit.runbook": FOUNDATION | MODELS | THROTTLE | {"kit.plan", "kit.report", "kit.cluster", "kit.sim", "kit.metrics",
                                                      "kit.metrics.edge", "kit.doctor", "kit.runbooks"},
    "kit.runbooks": set(),
    # The command line may import every layer; `python -m kit` is the command line.
    "kit.cli": {"*"},
    # The test harness kit ships starts servers and clusters of every kind.
    "kit.testing": {"*"},
    # Its warm command line: the `kit` command forked from a process that imported it once.
    "kit.warm_cli": {"kit", "kit.cli", "kit.jit"},
    "kit.__main__": {"kit.cli"},
}


def layer_of(module: str) -> str:
    """The layer `module` belongs to: the longest name of LAYERS it is or starts with."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return ".".join(parts[:n])
    raise AssertionError(f"{module} is in no layer of LAYERS: add it")


def kit_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every kit module the file imports: `import`, `from ... import` (a
    name imported from a package counts as its submodule when there is one), and the modules
    a command names for later with `lazy_module("...")`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if (ROOT / node.module.replace(".", "/") / a.name).is_dir()
                      or (ROOT / node.module.replace(".", "/") / f"{a.name}.py").is_file()]
        elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_module" and node.args
              and isinstance(node.args[0], ast.Constant)):
            found.append((node.lineno, node.args[0].value))
    return [(line, name) for line, name in found if name == "kit" or name.startswith("kit.")]


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def broken_rule(module: str, imported: str) -> str | None:
    """Why `module` may not import `imported` (None when its layer may)."""
    mine, theirs = layer_of(module), layer_of(imported)
    allowed = LAYERS[mine]
    if mine == theirs or "*" in allowed or theirs in allowed:
        return None
    return f"{module} imports {imported}: {mine} may import only {', '.join(sorted(allowed)) or 'nothing of kit'}"


def test_every_module_imports_only_what_its_layer_may():
    broken = []
    for path in sorted((ROOT / "kit").rglob("*.py")):
        module = module_name(path)
        for line, imported in kit_imports(path):
            why = broken_rule(module, imported)
            if why:
                broken.append(f"{path.relative_to(ROOT)}:{line}: {why}")
    assert not broken, "layer rules broken:\n" + "\n".join(broken)


def test_the_layer_check_names_a_broken_rule():
    # The estimator once imported the simulator for the copy physics (issue 37).
    why = broken_rule("kit.report.estimate", "kit.sim.physics")
    assert why and why.startswith("kit.report.estimate imports kit.sim.physics: kit.report may import only ")
    assert broken_rule("kit.plan.steps.place", "kit.cluster.backend")
    assert broken_rule("kit.throttle.decide", "kit.plan")
    assert broken_rule("kit.report.estimate", "kit.physics") is None
    assert broken_rule("kit.cli.plan", "kit.plan") is None


def test_the_import_reader_sees_lazy_and_function_level_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('import os\nfrom kit import text, plan\nx = lazy_module("kit.sim.physics")\n'
                      'def f():\n    from kit.cluster.backend import open_backend\n')
    assert kit_imports(source) == [(2, "kit"), (2, "kit.text"), (2, "kit.plan"), (3, "kit.sim.physics"), (5, "kit.cluster.backend")]

# --------------------------------------------------------------------------- what an import loads

PURE = ["kit.plan", "kit.report", "kit.report.figures", "kit.report.waves", "kit.report.estimate", "kit.report.fluid",
        "kit.throttle.decide", "kit.throttle.replay", "kit.model", "kit.formats", "kit.files", "kit.physics",
        "kit.array_ops"]
# scipy: the planner loads it only where a split flow or a test needs it (about a second to import);
# highspy only when an exact pass solves an integer program; numba only when a count balance has
# thousands of moves ahead (about half a second).
HEAVY = ["kazoo", "pyspark", "pandas", "panel", "holoviews", "bokeh", "nbformat", "papermill", "kafka", "scipy",
         "highspy", "numba"]
# The runbook layer talks to clusters (kazoo, kafka) when imported, but tables, charts, widgets and
# the HTML record load their libraries only when a notebook asks for them: `kit run` and the
# runner import it before any kernel starts.
RUNBOOK = ["kit.runbook.steps", "kit.runbook.runner", "kit.runbook.catalog", "kit.runbook.replay",
           "kit.runbook.display", "kit.runbook.charts", "kit.runbook.record", "kit.runbook.environment",
           "kit.runbook.checks", "kit.runbook.planning", "kit.runbook.gate", "kit.runbook.change"]
NOTEBOOK_ONLY = ["pandas", "matplotlib", "IPython", "ipywidgets", "nbformat", "nbconvert", "papermill", "panel",
                 "pyspark", "scipy", "highspy", "numba"]

CHECK = dedent("""\
    import importlib, importlib.abc, os, sys, traceback

    heavy, module = set(sys.argv[1].split(",")), sys.argv[2]
    ours = (os.path.join(os.getcwd(), "kit", ""),)
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


# What the notebooks' one entry point loads: `kit run` and the runner import it before any kernel
# starts. A cluster is opened through the seam, which loads only the client of the backend it
# opens, and a simulated cluster's modules load when one is started or read; the replacement's
# pairing is a pure rule apart from the planner's pipeline. numpy does load: kit's foundations
# (kit.formats) and the estimate use it.
NOT_FOR_STEPS = ["ortools", "kazoo", "kafka", "scipy", "highspy", "numba"]


@pytest.mark.parametrize("module", ["kit.runbook.steps", "kit.runbook.runner"])
def test_the_runbook_steps_and_runner_load_no_cluster_client_or_solver(module):
    # The steps loaded OR-Tools, kazoo and kafka-python (1.2 s, issue 37); the runner, which
    # `kit run` imports before any kernel starts, kazoo for a connect string's syntax.
    found = loaded_heavy(module, NOT_FOR_STEPS)
    assert not found, f"import {module} loads " + "; ".join(found)


# A simulated KRaft cluster's state directory (whether it runs, its facts, ending it) is what
# `kit sim stop --state`, a runbook's end and `kit run`'s clean-up need: read without the Kafka
# wire protocol (kafka-python) or ZooKeeper's client, which its start and its listeners' probe load.
def test_the_simulated_kraft_clusters_state_directory_loads_no_cluster_client():
    # kit.sim.kraft.cluster loaded kafka-python at its top for one ApiVersions probe (issue 37).
    found = loaded_heavy("kit.sim.kraft.state", NOT_FOR_STEPS + ["numpy"])
    assert not found, "import kit.sim.kraft.state loads " + "; ".join(found)


def test_the_check_names_the_import_chain():
    # The ZooKeeper layer does load kazoo: the check sees it and says where from.
    found = loaded_heavy("kit.cluster.zk.layout")
    assert [line.split(":")[0] for line in found] == ["kazoo"]
    assert "kit/cluster/zk/layout.py:" in found[0] and "from kazoo" in found[0]


# --------------------------------------------------------------------------- what a command's help loads

# What no help text needs, and each costs a noticeable part of a second to import.
NOT_FOR_HELP = ["numpy", "ortools", "numba", "scipy", "highspy", "kazoo", "kafka", "pandas", "panel", "pyspark",
                "nbformat", "papermill"]

HELP = dedent("""\
    import argparse, contextlib, io, sys
    from kit.cli import build_parser, main

    def parsers(parser):
        # Every parser of the command line, each with its deferred arguments declared.
        yield parser.declared() if hasattr(parser, "declared") else parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from parsers(sub)

    words = sys.argv[2:]
    with contextlib.redirect_stdout(io.StringIO()):
        if words == ["every"]:
            for parser in parsers(build_parser()):
                parser.format_help()
        else:
            with contextlib.suppress(SystemExit):
                main(words)
    print(",".join(m for m in sys.argv[1].split(",") if m in sys.modules))
""")


def loaded_by_help(*words: str) -> list[str]:
    """The modules of NOT_FOR_HELP that `kit WORDS` leaves loaded, in a fresh interpreter
    (`every`: the help of every command and subcommand, the plan's actions included)."""
    out = subprocess.run([sys.executable, "-c", HELP, ",".join(NOT_FOR_HELP), *words], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.strip().split(",") if m]


@pytest.mark.parametrize("words", [["--help"], ["plan", "--help"], ["plan", "rebalance", "--help"], ["every"]],
                         ids=" ".join)
def test_help_loads_no_planner_cluster_client_or_numpy(words):
    # kit --help took 0.8 s loading OR-Tools to print help (issue 37): argparse is declared
    # from light modules; a command imports what it runs when it runs.
    assert loaded_by_help(*words) == []


def test_kit_sim_stop_of_a_kraft_state_directory_loads_no_cluster_client(tmp_path):
    # It loaded kafka-python, kazoo and numpy through kit.sim.kraft.cluster (issue 37).
    assert loaded_by_help("sim", "stop", "--state", str(tmp_path)) == []


SEAM = dedent("""\
    import sys
    from kit.cluster import backend
    loaded = lambda: [m for m in ("kazoo", "kafka") if m in sys.modules]
    print(loaded())
    backend.backend_class(sys.argv[1] or None)
    print(loaded())
""")


@pytest.mark.parametrize("bootstrap, opened", [("", ["kazoo"]), ("broker:9092", ["kafka"])])
def test_the_cluster_seam_loads_only_the_backend_opened(bootstrap, opened):
    out = subprocess.run([sys.executable, "-c", SEAM, bootstrap], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.splitlines()[:1] == ["[]"], "importing kit.cluster.backend loads " + out.stdout
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", str(opened)]



# --------------------------------------------------------------------------- what a small plan loads

# What a small cluster's `kit plan` does not need (issue 38: within 0.6 s at up to 5,000
# partitions): numba's compiled kernels (0.7 CPU s to load, kit.jit), SciPy and HiGHS (an exact
# pass's integer program), a cluster client; nor a second process (kit.concurrency.second_core
# forks for large snapshots only). OR-Tools does load: its flows are solved at every size.
# Nor numpy's masked arrays, which a plain np.unique imports for its masked check (7 CPU ms;
# kit.array_ops.distinct instead), nor hashlib, which only the answers to integer programs kept
# within kit.plan.solvers.mip.answers_kept use (2.5 ms).
NOT_FOR_A_SMALL_PLAN = ["numba", "llvmlite", "scipy", "highspy", "kazoo", "kafka", "pandas", "pyspark", "numpy.ma",
                        "hashlib"]

SMALL_PLAN = dedent("""\
    import contextlib, io, os, sys
    from kit.cli import main

    forks = []
    fork = os.fork
    os.fork = lambda: forks.append(1) or fork()
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(sys.argv[2:])
    print(code, len(forks), ",".join(m for m in sys.argv[1].split(",") if m in sys.modules))
""")


@pytest.mark.parametrize("action, scenario", [("az-loss", "az-loss"), ("scale-out", "scale-out"),
                                              ("rebalance", "balanced"), ("leaders", "balanced")])
def test_a_small_plan_loads_no_compiler_or_exact_solver_and_forks_nothing(snapshots, tmp_path, action, scenario):
    extra = ["--rack", "rack-c"] if action == "az-loss" else []
    words = ["plan", action, "--snapshot", str(snapshots[scenario]), *extra, "--out", str(tmp_path / "p.json"),
             "--ignore-warns"]
    out = subprocess.run([sys.executable, "-c", SMALL_PLAN, ",".join(NOT_FOR_A_SMALL_PLAN), *words], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "KIT_PLAN_PROCESSES": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "0"], out.stdout
