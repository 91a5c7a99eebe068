"""`kit run` through a real night: interrupted (SIGINT, SIGTERM), a record folder that is
read-only or fills up, two runs side by side, records opened offline, and the runbooks shipped
inside the package (a wheel installed elsewhere runs them)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import kit_command, run_kit as kit, wait_for
from test_runbooks import check_the_planned_run
from kit import pids
from kit.runbook import catalog, processes, runner, steps

ROOT = Path(__file__).resolve().parents[2]


# -- the runbooks as package data, listed without papermill ------------------------------------

def test_listing_the_runbooks_needs_neither_papermill_nor_the_steps():
    """`kit run` alone lists the runbooks and their parameters from the notebooks' JSON: it took
    4.6 s when it imported papermill and the runbooks' steps to inspect each notebook."""
    code = ("import sys; from kit.cli import main; rc = main(['run']); "
            "print('LOADED', sorted(m for m in ('papermill', 'nbclient', 'kit.runbook.steps', 'kit.runbook.runner') "
            "if m in sys.modules), rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "LOADED [] 0"
    for name in catalog.available():
        assert f"\n{name}\n" in f"\n{r.stdout}"
    assert '  speed: float = 2000.0  # simulated cluster only: simulated seconds per wall second' in r.stdout
    assert "record_path" not in r.stdout  # kit run fills it in


def test_the_parameters_cell_is_read_as_papermill_reads_it(tmp_path):
    """One reading of a parameters cell: papermill's. kit's own (no papermill import) must agree
    with it on every runbook and on the cases papermill's parser has rules for."""
    import nbformat
    import papermill

    def papermills(path):
        return {k: {"type": v["inferred_type_name"], "default": v["default"], "help": v["help"]}
                for k, v in papermill.inspect_notebook(str(path)).items()}
    odd = tmp_path / "odd.ipynb"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(
        "# a comment line\n"
        'cap_map: dict = {  # the first line\'s comment is dropped\n'
        '    "standard": 125,\n'
        '}  # the help is the last line\'s\n'
        "\n"
        "untyped = 3\n"
        "commented = 'x'  # type: str the help after a type comment\n"
        "a = b = 2  # two assignments: papermill skips the line\n"
        "quoted: 'float' = 1.5\n")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("no parameters here"), cell]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(odd))
    assert catalog.declared_parameters(odd) == papermills(odd)
    assert list(catalog.declared_parameters(odd)) == ["cap_map", "untyped", "commented", "quoted"]
    for name in catalog.available():
        path = catalog.runbook_path(name)
        assert catalog.declared_parameters(path) == papermills(path), name


def test_the_runbooks_are_package_data_found_through_importlib():
    from importlib import resources

    folder = resources.files("kit") / "runbooks"
    assert catalog.RUNBOOKS == Path(str(folder))
    names = sorted(p.name for p in (ROOT / "runbooks").glob("*.ipynb"))
    assert names and sorted(p.name for p in catalog.RUNBOOKS.glob("*.ipynb")) == names
    assert all((catalog.RUNBOOKS / "clusters" / f"{Path(n).stem}.json").is_file() for n in names)


@pytest.mark.slow
def test_a_wheel_carries_the_runbooks_and_runs_them_from_anywhere(tmp_path):
    """`pip install .` (no checkout, no editable link) can `kit run`: the wheel holds every
    runbook and simulated cluster, and kit installed from it lists and runs one from another
    directory. The wheel is built as pip builds it for an install (its own build environment)."""
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = next(dist.glob("kit-*.whl"))
    inside = set(zipfile.ZipFile(wheel).namelist())
    # One top-level package: the Spark jobs ship inside kit, not as a package named `spark`
    # that could clash with another distribution's (issue 37).
    assert {n.split("/")[0] for n in inside if ".dist-info/" not in n} == {"kit"}
    assert "kit/spark/metrics_jobs.py" in inside
    for path in sorted((ROOT / "runbooks").rglob("*")):
        if path.is_file() and path.suffix in (".ipynb", ".json"):
            assert f"kit/runbooks/{path.relative_to(ROOT / 'runbooks')}" in inside, path
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    probe = subprocess.run([sys.executable, "-c", "import kit; print(kit.__file__)"], capture_output=True,
                           text=True, cwd=elsewhere, env=env, timeout=60)
    assert probe.stdout.startswith(str(site)), probe.stdout + probe.stderr
    listed = subprocess.run([sys.executable, "-m", "kit", "run"], capture_output=True, text=True, cwd=elsewhere,
                            env=env, timeout=120)
    assert listed.returncode == 0 and "broker_replacement\n" in listed.stdout, listed.stderr
    ran = subprocess.run([sys.executable, "-m", "kit", "run", "broker_replacement", "--record-dir", "records"],
                         capture_output=True, text=True, cwd=elsewhere, env=env, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    record = json.loads(next((elsewhere / "records").glob("*-broker_replacement.json")).read_text())
    assert record["outcome"] == "planned" and record["plan"]["partitions"] > 0
    # This is the replacement's run with its defaults: checked as test_runbooks.py checks the others'.
    check_the_planned_run(record, "broker_replacement", "zookeeper")


# -- the HTML record opens offline ------------------------------------------------------------

class _Loads(HTMLParser):
    """What a page would fetch: script/img/iframe/source sources, stylesheet links, CSS url()s
    and @imports, and modules imported by inline scripts."""

    def __init__(self):
        super().__init__()
        self.loads, self.links, self._tag = [], [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self._tag = tag
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.loads.append(a["src"])
        if tag == "link" and a.get("href"):
            self.loads.append(a["href"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])

    def handle_data(self, data):
        import re

        if self._tag in ("style", "script"):
            self.loads += re.findall(r"""url\(\s*['"]?([^'")\s]+)""", data)
            self.loads += re.findall(r"""@import\s+['"]([^'"]+)""", data)
            self.loads += re.findall(r"""import\(\s*['"]([^'"]+)""", data)


def test_the_html_record_loads_nothing_from_the_network(tmp_path):
    """Offline, a record opened with no console errors: no require.js, MathJax, mermaid or
    widget renderer from a CDN (links to read stay links)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Broker replacement\nRead [Kafka's docs](https://kafka.apache.org)."),
                nbformat.v4.new_code_cell("1 + 1", outputs=[nbformat.v4.new_output(
                    "execute_result", data={"text/plain": "2"}, execution_count=1)])]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2,
                                                                              "version_minor": 0}}
    src = tmp_path / "run.ipynb"
    nbformat.write(nb, str(src))
    record = {"runbook": "broker_replacement", "outcome": "planned", "started": "2024-01-01T00:00:00Z"}
    out, html = tmp_path / "out.ipynb", tmp_path / "out.html"
    steps.record_notebook(str(src), record, str(out), str(html))
    page = _Loads()
    page.feed(html.read_text())
    remote = [u for u in page.loads if u.startswith(("http:", "https:", "//"))]
    assert remote == [], remote
    assert "https://kafka.apache.org" in page.links
    assert "<title>broker_replacement: planned</title>" in html.read_text()
    assert nbformat.read(str(out), as_version=4).cells[0].metadata["tags"] == [steps.HEADLINE_TAG]


# -- the record says how the run ended ---------------------------------------------------------

@pytest.mark.parametrize("error, outcome", [
    (steps.CheckFailed("pre-check failed: broker 4242 is live"), "stopped"),
    (ValueError("no such topic"), "failed"),
    (KeyboardInterrupt(), "interrupted"),
])
def test_the_record_owns_the_outcome_of_a_step_that_raised(tmp_path, error, outcome):
    """The runbook's Record says how its run ended; `kit run` completes it, it does not work
    the outcome out from exception class names."""
    path = tmp_path / "record.json"
    record = steps.Record(str(path), "broker_replacement", {"apply": True})
    with pytest.raises(type(error)), record.step("pre-checks"):
        saved = json.loads(path.read_text())
        assert saved["steps"][-1] == {**saved["steps"][-1], "step": "pre-checks", "ok": None}  # cut short: known
        raise error
    saved = json.loads(path.read_text())
    assert saved["outcome"] == outcome and saved["finished"], saved
    assert saved["steps"][-1]["ok"] is False and saved["steps"][-1]["seconds"] is not None
    with pytest.raises(RuntimeError), record.step("later"):
        raise RuntimeError("after the outcome was given")
    assert json.loads(path.read_text())["outcome"] == outcome  # the first one stands


# -- interruptions -----------------------------------------------------------------------------

def test_an_interrupted_run_names_what_the_cluster_was_left_with_and_a_command_that_works():
    running = {"reassignment_running": True, "partitions_moving": 150, "bytes_left": 1.17e12,
               "throttled_brokers": [1001, 1013], "throttled_topics": 20}
    real = runner.interruption("SIGTERM", "apply, monitor, verify", False, running, "--zk zk1:2181/kafka",
                               "/r/files/plan.json", "/r/files/rollback.json", "kit run broker_replacement")
    assert real["continue"] == "kit verify /r/files/plan.json --zk zk1:2181/kafka --wait"
    assert real["undo"] == "kit rollback /r/files/rollback.json --zk zk1:2181/kafka"
    assert real["reason"].startswith("interrupted by SIGTERM during step 'apply, monitor, verify'; a reassignment "
                                     "of 150 partition(s) still running, 1,170.0 GB left to copy in the cluster, "
                                     "throttles on broker(s) 1001, 1013")
    # A simulated cluster is gone once the run stops: no command would find it.
    gone = runner.interruption("SIGINT", "apply, monitor, verify", True, running, "", None,
                               "/r/files/rollback.json", "kit run broker_replacement -p apply true")
    assert gone["continue"] is None and gone["undo"] is None
    assert "the simulated cluster was stopped with a reassignment of 150 partition(s) still running" in gone["reason"]
    assert "`kit run broker_replacement -p apply true` runs the runbook again" in gone["reason"]
    # Throttles without a reassignment: verify clears them.
    left = dict(running, reassignment_running=False, partitions_moving=0, bytes_left=0)
    assert runner.interruption("SIGINT", None, False, left, "--bootstrap k1:9092", None, None, "")["continue"] \
        == "kit verify --bootstrap k1:9092"
    # Interrupted before anything was applied: nothing to continue or undo, and it says so.
    calm = dict(left, throttled_brokers=[])
    before = runner.interruption("SIGINT", "plan", False, calm, "--zk zk1:2181", None, None, "")
    assert (before["continue"], before["undo"]) == (None, None) and "it changed nothing" in before["reason"]
    # The cluster did not answer: say so, and how to look.
    lost = runner.interruption("SIGINT", None, False, {"error": "no answer within 30 s"}, "--zk zk1:2181", None,
                               "/r/rollback.json", "")
    assert "`kit status --zk zk1:2181`" in lost["reason"] and lost["undo"] == "kit rollback /r/rollback.json --zk zk1:2181"


def test_every_process_of_a_run_is_found_by_its_tag_whatever_its_session(tmp_path):
    """A process started in a session of its own by a child that then exited (as the kernel's
    ZooKeeper, brokers, controller and auto-throttle are when the kernel dies) is still found,
    and stopped, one that ignores SIGTERM too."""
    tag = processes.new_tag()
    pidfile = tmp_path / "grandchild.pid"
    grandchild = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                  "time.sleep(600)")
    child = (f"import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', {grandchild!r}], "
             f"start_new_session=True); open({str(pidfile)!r}, 'w').write(str(p.pid))")
    subprocess.run([sys.executable, "-c", child], env=processes.tagged_environment(tag), check=True, timeout=60)
    pid = int(pidfile.read_text())
    assert pids.alive(pid) and os.getsid(pid) != os.getsid(0)
    assert processes.tagged(tag) == [pid]
    assert processes.tagged(processes.new_tag()) == []
    assert processes.stop(tag, grace=2.0) == [pid]
    wait_for("the grandchild gone", lambda: not pids.alive(pid), limit=60)
    assert processes.tagged(tag) == []


def _descendants(root: int) -> set[int]:
    """Every live process below `root` (its children, theirs, ...)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [root]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_run_stops_everything_it_started_and_says_what_it_left(tmp_path, sig, code):
    """Ctrl-C (or a SIGTERM) in the middle of a copy: every process the run started stops (the
    kernel, the simulated ZooKeeper and brokers, the controller, the auto-throttle: they sit in
    sessions of their own), the record says `interrupted` and what the cluster held, the
    notebook and the HTML are written, and the exit code is the signal's."""
    records = tmp_path / "records"
    proc = subprocess.Popen(kit_command() + ["run", "broker_replacement", "-p", "apply", "true", "-p", "speed", "50",
                                             "--record-dir", str(records)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def copying():
            for path in records.glob("*.json"):
                doc = json.loads(path.read_text() or "{}")
                if any(s["step"] == "apply, monitor, verify" for s in doc.get("steps", [])) and \
                        (Path(doc["parameters"]["workdir"]) / "events.jsonl").exists():
                    return doc
            return None
        doc = wait_for("the copy under way", copying, limit=400, every=0.5)
        started = _descendants(proc.pid)
        assert len(started) >= 5, started  # kernel, ZooKeeper, brokers, controller, auto-throttle
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    assert "Traceback" not in err and "Kernel died" not in err, err
    assert [p for p in started if pids.alive(p)] == []
    record = json.loads(next(records.glob("*.json")).read_text())
    assert record["outcome"] == "interrupted" and record["exit_code"] == code and record["finished"]
    left = record["interrupted"]
    assert left["signal"] == signal.Signals(sig).name and left["step"] == "apply, monitor, verify"
    assert left["simulated"] and left["cluster"]["reassignment_running"] and left["cluster"]["throttled_brokers"]
    assert left["continue"] is None and left["undo"] is None  # the simulated cluster is gone
    assert "the simulated cluster was stopped with a reassignment of" in record["reason"]
    assert record["steps"][-1] == {**record["steps"][-1], "ok": False,
                                   "error": f"interrupted by {signal.Signals(sig).name}"}
    html = Path(record["html"]).read_text()
    assert "<title>broker_replacement: interrupted</title>" in html and "simulated cluster was stopped" in html
    import nbformat

    nbformat.read(record["notebook"], as_version=4)  # whole
    assert doc["parameters"]["workdir"] == record["parameters"]["workdir"]
    assert not list(records.glob("kernel-ipc*")) and not list(records.glob(".kit-*"))


# -- the record folder -------------------------------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path):
    """mount(size) -> a fresh tmpfs of that size (root can write anywhere: a read-only or a full
    folder must be a real file system's); skipped where mounting is not permitted."""
    mounted = []

    def mount(size: str) -> Path:
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
        mounted.append(where)
        return where
    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_read_only_record_folder_is_one_line_and_exit_2(small_tmpfs):
    ro = small_tmpfs("1m")
    (ro / "records").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    for target in (ro / "records", ro / "new"):
        r = kit("run", "broker_replacement", "--record-dir", target, timeout=120)
        assert r.returncode == 2 and r.stderr == f"kit: --record-dir {target}: read-only file system\n", r.stderr
    assert [p.name for p in ro.iterdir()] == ["records"] and not list((ro / "records").iterdir())


def test_a_full_record_folder_is_one_line_and_exit_2_before_anything_starts(small_tmpfs):
    full = small_tmpfs("64k")
    r = kit("run", "broker_replacement", "--record-dir", full, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith(f"kit: --record-dir {full}: no space left on device"), r.stderr
    assert len(r.stderr.splitlines()) == 1 and list(full.iterdir()) == []
    with open(full / "filler", "wb") as fh:  # nothing left at all
        try:
            fh.write(b"x" * (1 << 20))
        except OSError:
            pass
    r = kit("run", "broker_replacement", "--record-dir", full / "records", timeout=120)
    assert r.returncode == 2 and r.stderr == f"kit: --record-dir {full / 'records'}: no space left on device\n"
    assert [p.name for p in full.iterdir()] == ["filler"]


def test_a_record_folder_that_fills_up_during_the_run_leaves_no_partial_record(small_tmpfs, tmp_path, monkeypatch):
    """The folder has room when the run starts, not for the record at its end: one line naming
    the folder and the cause, exit 2, and none of this run's files left (no JSON record saying
    "running", no half notebook)."""
    import nbformat

    book = tmp_path / "big_output.ipynb"
    params = nbformat.v4.new_code_cell('record_path: str = ""  # the JSON record (set by kit run)')
    params.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook()
    nb.cells = [params, nbformat.v4.new_code_cell(
        "import json\n"
        "json.dump({'runbook': 'big_output', 'outcome': 'succeeded', 'parameters': {}, 'steps': [], 'checks': []},"
        " open(record_path, 'w'))\n"
        "print('x' * 3_500_000)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(book))
    monkeypatch.setattr(runner, "runbook_path", lambda name: book)
    folder = small_tmpfs("6m")
    with pytest.raises(runner.BadInput) as failed:
        runner.run("big_output", [], [], str(folder))
    assert str(failed.value) == f"--record-dir {folder}: no space left on device"
    assert list(folder.iterdir()) == []


# -- runs side by side -------------------------------------------------------------------------

def test_two_runs_started_in_the_same_second_keep_two_records(tmp_path, monkeypatch):
    frozen = time.gmtime(1_700_000_000)
    monkeypatch.setattr(runner.time, "gmtime", lambda *_: frozen)
    stems = [runner.reserve_stem(str(tmp_path), "scale_out", {}) for _ in range(3)]
    assert [os.path.basename(s) for s in stems] == ["20231114T221320Z-scale_out", "20231114T221320Z.2-scale_out",
                                                   "20231114T221320Z.3-scale_out"]
    for stem in stems:  # each reserved by its JSON record, which a reader takes for a run under way
        assert json.loads(Path(stem + ".json").read_text())["outcome"] == "running"


def test_each_kernel_talks_over_sockets_in_a_folder_of_its_own(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    execution = runner._Execution(catalog.runbook_path("scale_out"), {}, str(private), str(tmp_path), "t", None)
    km = execution.kernel_manager()(kernel_name="python3")
    assert km.transport == "ipc" and Path(km.ip).parent == private and Path(km.connection_file).parent == private


@pytest.mark.slow
def test_two_runs_into_one_folder_in_the_same_second_both_succeed(tmp_path, monkeypatch):
    """Two runs of one runbook started in the same second into one folder (the clock held on
    one second): each keeps its own record, and neither kernel talks on the other's sockets
    (they once shared the folder's kernel-ipc-N: "Invalid Signature"). They are the scale-out's
    runs with its defaults, checked as test_runbooks.py checks the other runbooks'; ZooKeeper
    credentials in the environment stay out of every file they leave."""
    import threading

    frozen = time.gmtime()
    monkeypatch.setattr(runner.time, "gmtime", lambda *_: frozen)
    monkeypatch.setenv("KIT_ZK_AUTH", "digest:oncall:hunter2-secret")
    monkeypatch.setenv("KIT_STATE_DIR", str(tmp_path / "state"))
    records = tmp_path / "records"
    results: list = []

    def one():
        try:
            results.append(runner.run("scale_out", [], [], str(records)))
        except BaseException as e:  # noqa: BLE001  (the assertion below shows it)
            results.append(e)
    runs = [threading.Thread(target=one) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(900)
    assert [r[0] if isinstance(r, tuple) else r for r in results] == [0, 0], results
    found = sorted(records.glob("*-scale_out.json"))
    assert len(found) == 2 and found[0].name != found[1].name
    for path in found:
        record = json.loads(path.read_text())
        assert record["outcome"] == "planned" and record["json"] == str(path) and Path(record["html"]).exists()
        check_the_planned_run(record, "scale_out", "zookeeper")
    assert not list(records.glob("kernel-ipc*"))
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert b"hunter2-secret" not in f.read_bytes(), f
