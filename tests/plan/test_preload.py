"""The flow solvers' libraries loaded ahead on another thread (`kit.concurrency.preload`): found
without running any of their packages, loaded as the import loads them, and asked for by
`kit plan` for every action that solves a flow (issue 38: 45-65 ms of a small plan's start)."""
from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from textwrap import dedent

import pytest

from kit.cli import main
from kit.cli import plan as cli_plan
from kit.concurrency import preload


def test_an_extension_is_found_without_running_its_packages():
    code = dedent("""\
        import sys
        from kit.concurrency import preload
        print(preload.library_path("ortools.graph.python.min_cost_flow") is not None)
        print(sorted(m for m in sys.modules if m.startswith("ortools")))
        print(preload.library_path("ortools.graph.python.no_such_solver"), preload.library_path("json"),
              preload.library_path("no_such_package.x"))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["True", "[]", "None None None"]


def test_the_libraries_load_on_their_thread_and_the_import_finds_them():
    # After the thread, the library is mapped and no OR-Tools package has run; the import then
    # works as usual (the same module, its solver usable).
    code = dedent("""\
        import sys
        from kit.cli.plan import SOLVER_EXTENSIONS
        from kit.concurrency import preload
        thread = preload.ahead(SOLVER_EXTENSIONS)
        thread.join(120)
        print(thread.is_alive(), "libortools" in open("/proc/self/maps").read(),
              [m for m in sys.modules if m.startswith("ortools")])
        from kit.plan.solvers import new_max_flow, new_min_cost_flow
        new_min_cost_flow(), new_max_flow()
        print(all(m in sys.modules for m in SOLVER_EXTENSIONS))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["False True []", "True"]


# A library whose initialiser says it has started (creates $KIT_TEST_IN), then waits for the
# loading process to create $KIT_TEST_GO (at most 20 s), and writes what it saw to $KIT_TEST_SAW.
SLOW_LIBRARY = """\
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
__attribute__((constructor)) static void wait_for_go(void) {
    const char *in = getenv("KIT_TEST_IN"), *go = getenv("KIT_TEST_GO"), *saw = getenv("KIT_TEST_SAW");
    if (!in || !go || !saw) return;
    close(open(in, O_CREAT | O_WRONLY, 0644));
    struct timespec tick = {0, 10000000};
    int i = 0;
    while (i < 2000 && access(go, F_OK) != 0) { nanosleep(&tick, NULL); i++; }
    FILE *f = fopen(saw, "w");
    fputs(access(go, F_OK) == 0 ? "go" : "no go", f);
    fclose(f);
}
"""


@pytest.mark.skipif(shutil.which("cc") is None or not hasattr(os, "fork"), reason="needs a C compiler, POSIX")
def test_the_command_runs_while_a_library_loads(tmp_path):
    # ctypes.CDLL held the GIL through dlopen: the command's thread stood still for the whole
    # load (45-65 ms of OR-Tools' libraries), so nothing overlapped. Here the library's
    # initialiser waits until the command's thread, running meanwhile, says go.
    package = tmp_path / "slowpkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('never run by the preload')\n")
    (tmp_path / "slow.c").write_text(SLOW_LIBRARY)
    library = package / f"slow{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(tmp_path / "slow.c")], check=True, timeout=120)
    code = dedent("""\
        import os, sys, time
        sys.path.insert(0, sys.argv[1])
        from kit.concurrency import preload
        thread = preload.ahead(("slowpkg.slow",))
        deadline = time.monotonic() + 60
        while not os.path.exists(os.environ["KIT_TEST_IN"]) and time.monotonic() < deadline:
            time.sleep(0.01)
        open(os.environ["KIT_TEST_GO"], "w").close()
        thread.join(60)
        print(thread.is_alive(), open(os.environ["KIT_TEST_SAW"]).read())
    """)
    env = dict(os.environ, **{f"KIT_TEST_{k}": str(tmp_path / k.lower()) for k in ("IN", "GO", "SAW")})
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=180,
                       env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "go"]


def test_nothing_found_starts_no_thread():
    assert preload.ahead(("no_such_package.solver", "json")) is None


def _snapshot(tmp_path, new_broker: bool):
    """Six brokers in three racks, 30 partitions (RF 3), and an empty broker 7 when asked."""
    brokers = [{"id": i, "rack": f"r{i % 3}"} for i in range(1, 8 if new_broker else 7)]
    parts = [{"topic": "t", "partition": p, "replicas": [1 + p % 6, 1 + (p + 1) % 6, 1 + (p + 2) % 6]}
             for p in range(30)]
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"version": 1, "brokers": brokers, "partitions": parts}))
    return path


@pytest.mark.parametrize("action, extra, asked", [("leaders", [], True), ("rebalance", [], True),
                                                  ("replace", ["--replace", "1:7"], False)])
def test_kit_plan_asks_for_the_solvers_unless_it_substitutes(tmp_path, monkeypatch, capsys, action, extra, asked):
    asks = []
    monkeypatch.setattr(cli_plan, "preload", type("Fake", (), {"ahead": staticmethod(asks.append)}))
    snap = _snapshot(tmp_path, new_broker=action == "replace")
    code = main(["plan", action, "--snapshot", str(snap), *extra, "--out", str(tmp_path / "p.json"), "--ignore-warns"])
    assert code == 0, capsys.readouterr().err
    assert asks == ([cli_plan.SOLVER_EXTENSIONS] if asked else [])


def test_the_solvers_load_after_the_reader_and_the_progress_thread(tmp_path):
    # Started before the first stage, the load held the dynamic loader while the progress
    # thread was made and orjson imported: the command's thread waited for the whole load
    # (5,000-partition rebalance: 84 ms asleep, 10 ms once started here; medians of 7).
    code = dedent("""\
        import sys, threading
        from kit.cli import main, plan
        seen = []
        def ahead(modules):
            seen.append((modules, "orjson" in sys.modules,
                         any(t.name == "kit-progress" and t.is_alive() for t in threading.enumerate())))
        plan.preload = type("Fake", (), {"ahead": staticmethod(ahead)})
        code = main(sys.argv[1:])
        print(code, seen == [(plan.SOLVER_EXTENSIONS, True, True)], seen)
    """)
    snap = _snapshot(tmp_path, new_broker=False)
    r = subprocess.run([sys.executable, "-c", code, "plan", "rebalance", "--snapshot", str(snap), "--out",
                        str(tmp_path / "p.json"), "--ignore-warns"], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1].split()[:2] == ["0", "True"], r.stdout.splitlines()[-1]
