"""`kit run`: execute a runbook with papermill into an incident record.

`kit run NAME [-p KEY VALUE]... [-f params.yaml] [--record-dir DIR]` executes
runbooks/NAME.ipynb into DIR/<UTC timestamp>-NAME.ipynb, exports an .html beside it
(nbconvert; charts are PNGs, so it reads offline) and completes the JSON record the runbook
keeps (DIR/<timestamp>-NAME.json). Exit 0 when the runbook succeeded (or planned without
applying), 3 when it stopped at a pre-check, 4 on a doctor's alert, 1 when it failed; the record is written and
says why in every case. Parameter values are read against the runbook's own declared types,
so `-p replace 1003:1013` stays a string and `-p cap_map '{"standard": 125}'` is a dict; and
they must name one cluster (`zk` or `bootstrap`, not both; `cluster` "zookeeper" or "kraft").
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import yaml

from kit.cluster.zk.layout import parse_connect
from kit.errors import BadInput
from kit.formats import dumps, load_yaml, write_atomic
from kit.runbook.steps import RUNBOOKS, check_address, record_notebook, stop_simulated

# papermill and jupyter_client are the `notebooks` extra (papermill alone takes about a second
# to import): imported inside the functions that read or run a notebook.
_TYPES = {"bool": bool, "int": int, "float": (int, float), "str": str, "dict": dict, "list": list}
RESERVED = ("record_path",)
# The runbooks' numeric parameters and the values that make sense (low, high, low excluded):
# a negative speed or a NaN client load would apply the plan and then never copy a byte.
RANGES = {"speed": (0.0, 1e7, True), "client_load": (0.0, 0.95, False), "max_wait_s": (0.0, 7 * 86400, True),
          "limit_in": (0.0, 1e12, False), "limit_out": (0.0, 1e12, False), "replication": (1, 100, False)}


def available() -> list[str]:
    return sorted(p.stem for p in RUNBOOKS.glob("*.ipynb"))


def runbook_path(name: str) -> Path:
    path = RUNBOOKS / f"{name}.ipynb"
    if not path.exists():
        raise BadInput(f"no runbook {name!r} (runbooks: {', '.join(available())})")
    return path


def declared_parameters(path: Path) -> dict[str, dict]:
    """The runbook's parameters cell as papermill reads it: name -> {type, default, help}."""
    import papermill

    return {name: {"type": p["inferred_type_name"], "default": p["default"], "help": p["help"]}
            for name, p in papermill.inspect_notebook(str(path)).items()}


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


def run(name: str, pairs: list[tuple[str, str]], files: list[str], record_dir: str = "records",
        hide_input: bool = False, timeout: float | None = None) -> tuple[int, dict]:
    """Execute the runbook; returns (exit code, the record)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    path = runbook_path(name)
    params = parse_parameters(declared_parameters(path), pairs, files)
    if os.path.exists(record_dir) and not os.path.isdir(record_dir):
        raise BadInput(f"--record-dir {record_dir}: not a directory")
    os.makedirs(record_dir, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    stem = os.path.join(os.path.abspath(record_dir), f"{stamp}-{name}")
    notebook, html, record_path = stem + ".ipynb", stem + ".html", stem + ".json"
    params["record_path"] = record_path
    error = None
    try:
        papermill.execute_notebook(str(path), notebook, parameters=params, kernel_name=kernel_name(),
                                   progress_bar=False, log_output=False, execution_timeout=timeout,
                                   cwd=os.path.abspath(record_dir), kernel_manager_class=_local_kernel_manager())
    except PapermillExecutionError as e:
        error = (e.ename, e.evalue)
    except Exception as e:  # noqa: BLE001  (a kernel that died: the record still says so)
        error = (type(e).__name__, str(e))
    record = _read_json(record_path) or {"runbook": name, "parameters": {k: v for k, v in params.items()
                                                                          if k != "record_path"},
                                         "outcome": "running", "steps": [], "checks": []}
    # The runbook's own default workdir, unless it was given: nothing simulated outlives the run.
    stop_simulated(record["parameters"].get("workdir") or stem + "-files")
    if error and error[0] in ("CheckFailed", "Unsafe"):
        record.update(outcome="stopped", reason=error[1])
    elif error:
        record.update(outcome="failed", reason=f"{error[0]}: {error[1]}")
    elif record.get("outcome") == "running":
        record.update(outcome="failed", reason="the runbook ended without saying how it went")
    code = {"succeeded": 0, "planned": 0, "stopped": 3, "alert": 4}.get(record["outcome"], 1)
    record.update(notebook=notebook, exit_code=code, finished=record.get("finished") or
                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if os.path.exists(notebook):
        record["html"] = html
        # The headline (outcome, what changed, estimate vs actual, fail-safe time) goes first.
        record_notebook(notebook, dict(record, json=record_path), notebook, html, hide_input)
    write_atomic(record_path, dumps(record))
    return code, record


def kernel_name() -> str:
    """The runbooks name the "kit" kernel (this environment, registered by `make`); where it
    is not registered, the "python3" kernel of the interpreter running kit."""
    from jupyter_client.kernelspec import KernelSpecManager

    return "kit" if "kit" in KernelSpecManager().find_kernel_specs() else "python3"


def _local_kernel_manager():
    """A kernel manager talking to the kernel over Unix sockets: nothing listens on TCP, and
    the kernel has no reason to warn about unencrypted TCP in every scheduled run's log."""
    from jupyter_client.manager import AsyncKernelManager

    class LocalKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            kwargs.setdefault("transport", "ipc")
            super().__init__(**kwargs)
    return LocalKernelManager


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, json.JSONDecodeError):
        return None
