"""`kit run`: execute a runbook with papermill into an incident record.

`kit run NAME [-p KEY VALUE]... [-f params.yaml] [--record-dir DIR]` executes
runbooks/NAME.ipynb (kit.runbook.catalog) into DIR/<UTC timestamp>-NAME.ipynb, exports an .html
beside it (nbconvert; charts are PNGs and nothing is fetched from the network, so it reads
offline) and completes the JSON record the runbook keeps (DIR/<timestamp>-NAME.json). Exit 0
when the runbook succeeded (or planned without applying), 3 when it stopped at a pre-check, 4 on
a doctor's alert, 1 when it failed, 130 / 143 when SIGINT / SIGTERM interrupted it; the record
is written and says why in every case. Parameter values are read against the runbook's own
declared types, so `-p replace 1003:1013` stays a string and `-p cap_map '{"standard": 125}'` is
a dict; and they must name one cluster (`zk` or `bootstrap`, not both; `cluster` "zookeeper" or
"kraft").

What a night can do to a run, and what the runner does about it:

- SIGINT or SIGTERM: the kernel is killed (the runbook does nothing more), the cluster's state is
  read (a simulated cluster's before it is stopped; a real one's after the run's own processes
  have stopped), every process the run started is stopped (kit.runbook.processes), and the record
  says `interrupted`, what was left in the cluster and the command that continues or undoes it.
- The record folder is checked writable before anything starts; when it fills up (or turns
  read-only) during the run, the run ends with one line naming the folder and the cause (exit 2)
  and leaves no partial record (every file is written whole, and this run's are removed).
- Runs side by side: each kernel talks over Unix sockets in a private temporary folder, and
  each run's file stem is reserved (O_EXCL on its JSON), so two runs started in the same
  second into the same folder keep two records.
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from kit.cluster.backend import ClusterAddress, open_backend, parse_connect
from kit.errors import BadInput
from kit.formats import dumps, load_yaml
from kit.files import read_json_object, write_atomic
from kit.runbook import processes
from kit.runbook.catalog import RESERVED, declared_parameters, runbook_path
from kit.runbook.record import run_workdir
from kit.runbook.steps import (Environment, check_address, command_line, record_notebook, rollback_path,
                               simulated_address, stop_simulated)

# papermill and jupyter_client are the `notebooks` extra (papermill alone takes about a second
# to import): imported inside the functions that run a notebook.
_TYPES = {"bool": bool, "int": int, "float": (int, float), "str": str, "dict": dict, "list": list}
# The runbooks' numeric parameters and the values that make sense (low, high, low excluded):
# a negative speed or a NaN client load would apply the plan and then never copy a byte.
RANGES = {"speed": (0.0, 1e7, True), "client_load": (0.0, 0.95, False), "max_wait_s": (0.0, 7 * 86400, True),
          "limit_in": (0.0, 1e12, False), "limit_out": (0.0, 1e12, False), "replication": (1, 100, False)}


def parse_parameters(declared: dict[str, dict], pairs: list[tuple[str, str]], files: list[str]) -> dict:
    """Merge parameter files (YAML mappings) and -p KEY VALUE pairs (later wins), each value
    checked against the declared type. BadInput (one line) for an unknown name or a wrong type."""
    merged: dict = {}
    for f in files:
        doc = load_yaml(f, "-f") or {}  # bounded, UTF-8, no alias bombs
        if not isinstance(doc, dict):
            raise BadInput(f"-f {f}: expected a mapping of parameter names to values")
        merged.update(doc)
    for key, raw in pairs:
        kind = declared.get(key, {}).get("type")
        if kind == "str":
            merged[key] = raw
        else:
            try:
                merged[key] = yaml.safe_load(raw)
            except yaml.YAMLError:
                raise BadInput(f"-p {key}: {raw!r} is not a {kind or 'YAML'} value") from None
    out = {}
    for key, value in merged.items():
        if key in RESERVED:
            raise BadInput(f"parameter {key} is set by kit run")
        if key not in declared:
            raise BadInput(f"unknown parameter {key!r} (parameters: {', '.join(k for k in declared if k not in RESERVED)})")
        want = _TYPES.get(declared[key]["type"])
        ok = want is None or (isinstance(value, want) and not (want is not bool and isinstance(value, bool)))
        if not ok:
            raise BadInput(f"parameter {key}: expected {declared[key]['type']}, got {value!r}")
        out[key] = float(value) if declared[key]["type"] == "float" else value
        check_value(key, out[key])
    if "cluster" in declared:  # one cluster: zk, bootstrap, or the simulated one named by `cluster`
        check_address(out.get("zk", ""), out.get("bootstrap", ""), out.get("cluster", "zookeeper"))
    if out.get("zk"):  # the form here; whether a ZooKeeper answers there is the run's to find out
        parse_connect(out["zk"], "parameter zk")
    return out


def check_value(key: str, value) -> None:
    """BadInput (one line) for a value no runbook can work with: not finite, out of range, a
    throttle that is neither "auto" nor a positive rate."""
    if isinstance(value, float) and not math.isfinite(value):
        raise BadInput(f"parameter {key}: must be a finite number, got {value!r}")
    if key in RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high, open_low = RANGES[key]
        if value < low or (open_low and value == low) or value > high:
            raise BadInput(f"parameter {key}: must be {'above' if open_low else 'at least'} {low:g} "
                           f"and at most {high:g}, got {value!r}")
    if key == "throttle" and value != "auto":
        try:
            rate = float(value)
        except (TypeError, ValueError):
            rate = float("nan")
        if not (math.isfinite(rate) and rate > 0):
            raise BadInput(f"parameter throttle: \"auto\" or a positive rate in bytes/s, got {value!r}")
    if key == "cap_map" and isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise BadInput(f"parameter cap_map: {k!r} must be a positive number of MB/s, got {v!r}")




# Exit codes by outcome; "interrupted" exits with the shell's code for the signal (128 + it).
EXIT_CODES = {"succeeded": 0, "planned": 0, "stopped": 3, "alert": 4}
INTERRUPTED_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
# A folder that cannot take a record: one line naming it and the cause, exit 2.
DISK_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
# Free space a record needs (the executed notebook and its HTML, charts embedded, are about 1 MiB
# together): checked before a run starts, so that a full disk is said at once. A run on the
# simulated cluster also keeps its ZooKeeper's data beside the record (in <stem>-files).
RECORD_SPACE = 4 * 2 ** 20
KERNEL_GRACE_S = 5.0  # an interrupted run's kernel: SIGTERM, then SIGKILL after this long
STATE_WAIT_S = 30.0  # the longest an interrupted run waits to read its cluster's state
NOTEBOOK_WAIT_S = 60.0  # papermill's notice that its kernel is gone, and its last save of the notebook


def run(name: str, pairs: list[tuple[str, str]], files: list[str], record_dir: str = "records",
        hide_input: bool = False, timeout: float | None = None) -> tuple[int, dict]:
    """Execute the runbook; returns (exit code, the record). BadInput (one line, exit 2) for
    bad parameters or a record folder that cannot be written (checked before anything is
    written), and for a folder that fills up during the run (this run's files removed)."""
    path = runbook_path(name)
    params = parse_parameters(declared_parameters(path), pairs, files)
    folder = writable_folder(record_dir)
    with _Signals() as caught:
        stem = None
        try:
            stem = reserve_stem(folder, name, params)
            return _execute(path, name, params, stem, hide_input, timeout, caught)
        except OSError as e:
            if e.errno not in DISK_ERRORS:
                raise
            kept = discard(stem) if stem else None
            where = os.path.abspath(str(e.filename)) if e.filename else folder
            inside = os.path.commonpath([where, folder]) == folder
            raise BadInput(f"{f'--record-dir {record_dir}' if inside else os.path.dirname(where)}: "
                           f"{os.strerror(e.errno).lower()}"
                           + (f"; the run had applied its plan, or was about to: its rollback file is kept, {kept}"
                              if kept else "")) from None


def writable_folder(record_dir: str) -> str:
    """The record folder (absolute), created if missing, once a file could be written and
    synced in it and `RECORD_SPACE` is free; BadInput naming it and the cause otherwise (a
    read-only or full file system, no permission)."""
    folder = os.path.abspath(record_dir)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise BadInput(f"--record-dir {record_dir}: not a directory")
    made = not os.path.exists(folder)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".kit-probe-")
        try:
            os.write(fd, b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
        disk = os.statvfs(folder)
        free = disk.f_bavail * disk.f_frsize
        if free < RECORD_SPACE:
            raise BadInput(f"--record-dir {record_dir}: no space left on device for a record ({free / 1024:,.0f} KiB "
                           f"free; a record takes up to {RECORD_SPACE // 2 ** 20} MiB)")
    except (OSError, BadInput) as e:
        if made and os.path.isdir(folder):
            shutil.rmtree(folder, ignore_errors=True)
        if isinstance(e, BadInput):
            raise
        raise BadInput(f"--record-dir {record_dir}: {os.strerror(e.errno).lower() if e.errno else e}") from None
    return folder


def first_record(name: str, params: dict) -> dict:
    """The record before the runbook writes its own (and what is left when it never does)."""
    given = {k: v for k, v in params.items() if k not in RESERVED}
    return {"runbook": name, "started": _now(), "finished": None, "outcome": "running", "reason": None,
            "parameters": given, "steps": [], "checks": [], "command": command_line(name, given)}


def reserve_stem(folder: str, name: str, params: dict) -> str:
    """FOLDER/<UTC stamp>-NAME, reserved by creating its JSON record exclusively (O_EXCL): a
    second run in the same second gets <stamp>.2-NAME, and so on; no file of another record is
    ever overwritten."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1, 1000):
        stem = os.path.join(folder, f"{stamp}{'' if n == 1 else f'.{n}'}-{name}")
        if any(os.path.exists(stem + end) for end in (".ipynb", ".html", "-files")):
            continue
        try:
            fd = os.open(stem + ".json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(dumps(first_record(name, params)))
        except OSError:
            os.unlink(stem + ".json")
            raise
        return stem
    raise BadInput(f"--record-dir {folder}: a thousand records of {name} started this second")


def discard(stem: str) -> str | None:
    """Remove this run's record files after a disk error, and its default workdir unless the
    run had applied its plan (or was about to): then the rollback file is kept and returned.
    A workdir the operator named is theirs and stays."""
    workdir = _workdir(read_json_object(stem + ".json") or {}, stem)
    for end in (".json", ".ipynb", ".html"):
        if os.path.exists(stem + end):
            os.unlink(stem + end)
    rollback = rollback_path(Environment("", False, workdir))
    if os.path.exists(rollback):
        return rollback
    if os.path.abspath(workdir) == stem + "-files":
        shutil.rmtree(workdir, ignore_errors=True)
    return None


def _execute(path: Path, name: str, params: dict, stem: str, hide_input: bool, timeout: float | None,
             caught: _Signals) -> tuple[int, dict]:
    """Run the notebook (papermill in a thread, so that the main thread keeps the signals),
    stop what the run started, complete the record and write the notebook and the HTML."""
    notebook, html, record_path = stem + ".ipynb", stem + ".html", stem + ".json"
    params = dict(params, record_path=record_path)
    tag = processes.new_tag()
    private = tempfile.mkdtemp(prefix="kit-run-")
    execution = _Execution(path, params, private, os.path.dirname(stem), tag, timeout)
    try:
        execution.start()
        while execution.is_alive() and caught.signal is None:
            execution.join(0.5)
        interrupted = None
        if caught.signal is not None and execution.is_alive():
            interrupted = _stop_interrupted(execution, record_path, stem, tag, caught.signal)
        else:
            # The runbook's own default workdir, unless it was given: nothing simulated outlives the run.
            stop_simulated(_workdir(read_json_object(record_path) or {}, stem))
            processes.stop(tag)
        record = read_json_object(record_path) or first_record(name, params)
        if interrupted is not None:
            _mark_interrupted(record, interrupted)
        elif record.get("outcome") == "running":  # the runbook did not say: it failed outside its steps
            record.update(outcome="failed", reason=_error_text(execution.error) if execution.error else
                          "the runbook ended without saying how it went")
        outcome = record["outcome"]
        code = EXIT_CODES.get(outcome, INTERRUPTED_EXIT.get(caught.signal, 130) if outcome == "interrupted" else 1)
        record.update(json=record_path, exit_code=code, finished=record.get("finished") or _now())
        record.pop("notebook", None)
        record.pop("html", None)
        if _readable_notebook(execution.output):
            record.update(notebook=notebook, html=html)
            # The headline (outcome, what changed, estimate vs actual, fail-safe time) goes first.
            record_notebook(execution.output, record, notebook, html, hide_input)
        write_atomic(record_path, dumps(record))
        return code, record
    finally:
        execution.cancelled.set()
        processes.stop(tag)
        shutil.rmtree(private, ignore_errors=True)


def _workdir(record: dict, stem: str) -> str:
    """The runbook's files, as the run's record names them (`run_workdir` beside <stem>.json)."""
    return run_workdir(record.get("parameters"), record.get("runbook", ""), stem + ".json")


def _readable_notebook(path: str) -> bool:
    """Whether papermill left a whole notebook there (it writes in place: one cut short by a
    kernel that never answered again can be half written)."""
    try:
        with open(path, encoding="utf-8") as fh:
            json.load(fh)
        return True
    except (OSError, ValueError):
        return False


def _error_text(error: BaseException) -> str:
    """The error that ended the notebook as its cell showed it (papermill's), else as raised."""
    if hasattr(error, "ename"):
        return f"{error.ename}: {error.evalue}"
    return f"{type(error).__name__}: {error}"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# -- the run's kernel ------------------------------------------------------------------------

class _Execution(threading.Thread):
    """papermill executing the runbook into `output` (in the run's private folder), in a thread
    of its own: the main thread keeps SIGINT and SIGTERM (nbclient would take them for itself in
    the main thread and reset them when done)."""

    def __init__(self, path: Path, params: dict, private: str, cwd: str, tag: str, timeout: float | None):
        super().__init__(name=f"kit run {path.stem}", daemon=True)
        self.path, self.params, self.private, self.cwd, self.tag, self.timeout = \
            path, params, private, cwd, tag, timeout
        self.output = os.path.join(private, path.name)
        self.error: BaseException | None = None
        self.kernels: list = []
        self.cancelled = threading.Event()  # no kernel starts once set

    def run(self) -> None:
        import papermill

        try:
            papermill.execute_notebook(str(self.path), self.output, parameters=self.params, kernel_name=kernel_name(),
                                       progress_bar=False, log_output=False, execution_timeout=self.timeout,
                                       kernel_manager_class=self.kernel_manager())
        except BaseException as e:  # noqa: BLE001  (a failed cell, a kernel that died: the record says it)
            self.error = e

    def kernel_pid(self) -> int | None:
        for km in self.kernels:
            pid = getattr(getattr(km, "provisioner", None), "pid", None)
            if pid:
                return pid
        return None

    def kernel_manager(self):
        """The kernel manager class papermill starts the kernel with: the kernel talks over Unix
        sockets in the run's private folder (nothing listens on TCP, and no other run's kernel
        shares a socket name), works in the record folder, and carries the run's tag."""
        from jupyter_client.manager import AsyncKernelManager

        execution = self

        class RunKernelManager(AsyncKernelManager):
            def __init__(self, **kwargs):
                kwargs.update(transport="ipc", ip=os.path.join(execution.private, "kernel-ipc"),
                              connection_file=os.path.join(execution.private, "kernel.json"))
                super().__init__(**kwargs)
                execution.kernels.append(self)

            async def start_kernel(self, **kwargs):
                if execution.cancelled.is_set():
                    raise RuntimeError("interrupted before the kernel started")
                kwargs.update(env=processes.tagged_environment(execution.tag), cwd=execution.cwd)
                return await super().start_kernel(**kwargs)
        return RunKernelManager


def kernel_name() -> str:
    """The runbooks name the "kit" kernel (this environment, registered by `make`); where it
    is not registered, the "python3" kernel of the interpreter running kit."""
    from jupyter_client.kernelspec import KernelSpecManager

    return "kit" if "kit" in KernelSpecManager().find_kernel_specs() else "python3"


# -- interruptions ---------------------------------------------------------------------------

class _Signals:
    """While a run is under way (main thread only), SIGINT and SIGTERM are noted instead of
    ending `kit run` at once: the run is then stopped in order and its record written."""

    def __init__(self):
        self.signal: int | None = None
        self._before: dict = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for sig in INTERRUPTED_EXIT:
                self._before[sig] = signal.signal(sig, self._note)
        return self

    def _note(self, signum, _frame) -> None:
        if self.signal is None:
            self.signal = signum
            sys.stderr.write(f"kit: {signal.Signals(signum).name}: stopping the run (every process it started) "
                             "and writing its record\n")

    def __exit__(self, *exc) -> None:
        for sig, handler in self._before.items():
            signal.signal(sig, handler)


def _stop_interrupted(execution: _Execution, record_path: str, stem: str, tag: str, signum: int) -> dict:
    """Stop an interrupted run: its kernel first (the runbook does nothing more), then read
    the cluster's state and stop every process the run started. A simulated cluster is read
    before it is stopped; a real one after the run's own processes (the auto-throttle leaves
    the rates in force) have stopped. Returns what `_mark_interrupted` writes."""
    execution.cancelled.set()
    kernel = execution.kernel_pid()
    with _kernel_stopped_on_purpose():
        if kernel:
            processes.end([kernel], KERNEL_GRACE_S)
        record = read_json_object(record_path) or {}
        workdir = _workdir(record, stem)
        given = record.get("parameters") or execution.params
        address = simulated_address(workdir)
        simulated = not (given.get("zk") or given.get("bootstrap"))
        if address is None:
            processes.stop(tag)
            if not simulated:
                address = ClusterAddress(zk=given.get("zk") or None, bootstrap=given.get("bootstrap") or None)
        state = cluster_state(address) if address else None
        stop_simulated(workdir)
        processes.stop(tag)
        execution.join(NOTEBOOK_WAIT_S)  # papermill finds its kernel gone and saves the notebook
    step = next((s["step"] for s in record.get("steps", []) if s.get("ok") is None), None)
    flag = "" if simulated else (f"--zk {shlex.quote(given['zk'])}" if given.get("zk")
                                 else f"--bootstrap {shlex.quote(given['bootstrap'])}")
    plan = (record.get("plan") or {}).get("file")
    rollback = rollback_path(Environment("", simulated, workdir))
    # Run again as it was asked for: the files of this run (its workdir) stay this run's.
    again = command_line(execution.path.stem, {k: v for k, v in execution.params.items() if k not in RESERVED})
    return interruption(signal.Signals(signum).name, step, simulated, state, flag,
                        plan if plan and os.path.exists(plan) else None,
                        rollback if os.path.exists(rollback) else None, again)


@contextlib.contextmanager
def _kernel_stopped_on_purpose():
    """nbclient's notice (on stderr, through papermill's logger) that the kernel died is no
    news when the run killed it."""
    quiet = logging.Filter("kit")  # passes records of kit's loggers only
    loggers = [logging.getLogger(name) for name in ("papermill", "traitlets")]
    for log in loggers:
        log.addFilter(quiet)
    try:
        yield
    finally:
        for log in loggers:
            log.removeFilter(quiet)


def cluster_state(address: ClusterAddress, wait: float = STATE_WAIT_S) -> dict:
    """The reassignment and throttles the cluster holds now (its backend's `status`), or
    {"error": why} when it did not answer within `wait` seconds."""
    got: dict = {}

    def read():
        try:
            with open_backend(address) as backend:
                got["status"] = backend.status()
        except Exception as e:  # noqa: BLE001  (whatever kept the answer away is what the record says)
            got["error"] = str(e) or type(e).__name__
    reader = threading.Thread(target=read, name="kit run: cluster state", daemon=True)
    reader.start()
    reader.join(wait)
    if "status" not in got:
        return {"error": got.get("error") or f"no answer within {wait:.0f} s"}
    st = got["status"]
    return {"reassignment_running": st["reassigning"], "partitions_moving": st["reassigning_partitions"],
            "bytes_left": st["bytes_left"], "throttled_brokers": st["throttled_brokers"],
            "throttled_topics": len(st["throttled_topics"])}


def interruption(signal_name: str, step: str | None, simulated: bool, state: dict | None, flag: str,
                 plan: str | None, rollback: str | None, rerun: str) -> dict:
    """What an interrupted run's record says: {signal, step, cluster (its state), simulated,
    reason (one paragraph), continue and undo (commands, or None)}. Only commands that can
    work are given: a simulated cluster is gone once the run stops, so it gets none."""
    what = f"interrupted by {signal_name}" + (f" during step {step!r}" if step else "")
    go_on = undo = None
    readable = state is not None and "error" not in state
    moving = readable and state["reassignment_running"]
    throttled = state["throttled_brokers"] if readable else []
    throttles = (f"throttles on broker(s) {', '.join(map(str, throttled[:12]))}"
                 + (f" (+{len(throttled) - 12} more)" if len(throttled) > 12 else "")) if throttled else ""
    left = (f"a reassignment of {state['partitions_moving']} partition(s) still running, "
            f"{state['bytes_left'] / 1e9:,.1f} GB left to copy") if moving else ""
    if simulated:
        if state is None:
            where = "no simulated cluster was running yet"
        elif not readable:
            where = f"the simulated cluster's state could not be read ({state['error']}); it was stopped"
        else:
            held = "; ".join(x for x in (left, throttles) if x) or "no reassignment running and no throttle set"
            where = f"the simulated cluster was stopped with {held}"
        where += ": it is gone, so nothing is left to continue or undo" + (f"; `{rerun}` runs the runbook again"
                                                                           if rerun else "")
    elif not readable:
        why = state["error"] if state else "no cluster address"
        where = f"the cluster's state could not be read ({why}): look with `kit status {flag}`"
        undo = f"kit rollback {shlex.quote(rollback)} {flag}" if rollback else None
    elif moving:
        where = (f"{left} in the cluster" + (f", {throttles}" if throttles else "") + "; it goes on at the rates "
                 "in force (the auto-throttle was stopped)")
        go_on = f"kit verify {shlex.quote(plan) + ' ' if plan else ''}{flag} --wait"
        undo = f"kit rollback {shlex.quote(rollback)} {flag}" if rollback else None
    elif throttled:
        where = f"no reassignment running, but replication {throttles} left behind"
        go_on = f"kit verify {flag}"
    elif rollback:
        where = ("no reassignment running and no throttle set; the plan had been applied, or was about to be "
                 "(its rollback file was written)")
        go_on = f"kit verify {shlex.quote(plan) + ' ' if plan else ''}{flag}"
        undo = f"kit rollback {shlex.quote(rollback)} {flag}"
    else:
        where = "no reassignment running and no throttle set; the run had not applied its plan: it changed nothing"
    steps = "; ".join(f"{k}: `{v}`" for k, v in (("continue", go_on), ("undo", undo)) if v)
    return {"signal": signal_name, "step": step, "simulated": simulated, "cluster": state,
            "continue": go_on, "undo": undo, "reason": f"{what}; {where}" + (f"; {steps}" if steps else "")}


def _mark_interrupted(record: dict, interrupted: dict) -> None:
    """The record of an interrupted run: its outcome, why, the cluster's state and the
    commands; the step under way when it stopped is marked."""
    for entry in record.get("steps", []):
        if entry.get("ok") is None:
            entry.update(ok=False, error=f"interrupted by {interrupted['signal']}")
    record.update(outcome="interrupted", reason=interrupted["reason"],
                  interrupted={k: v for k, v in interrupted.items() if k != "reason"})
