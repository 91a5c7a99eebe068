"""`kit plan` runs without the cyclic collector's scans, from importing the command line to its
last output (kit.collector.paused around kit.cli's imports, the options and kit.cli.plan.run):
they found nothing to free, and the 45 young scans of the imports (numpy, the planner,
OR-Tools) cost a small plan 15-45 ms. The collector runs again after."""
from __future__ import annotations

import json
import subprocess
import sys

# Counts the collections from the import of kit.cli on, then runs `kit`.
PROBE = """
import gc, json, sys
scans = []
gc.callbacks.append(lambda phase, info: phase == "stop" and scans.append(info["generation"]))
from kit.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "scans": len(scans), "enabled_after": gc.isenabled()}))
"""


def test_a_plan_runs_from_import_to_output_without_a_collection(tmp_path, snapshots):
    out = subprocess.run([sys.executable, "-c", PROBE, "plan", "rebalance", "--snapshot", str(snapshots["balanced"]),
                          "--out", str(tmp_path / "plan.json"), "--report", str(tmp_path / "report.json"),
                          "--ignore-warns"], capture_output=True, text=True, timeout=300, check=True)
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["code"] == 0 and (tmp_path / "plan.json").exists()
    assert seen["enabled_after"]
    # A few fall before the first block (argparse's own imports); 45 did without the blocks.
    assert seen["scans"] <= 5, out.stderr


# kit run as the process's own command (main without argv, as the console script runs it); an
# exit handler sees what the interpreter's own collections at exit will scan.
AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count()))
from kit.cli import main
print("code:", main())
"""


def test_a_plans_objects_are_left_out_of_the_collections_at_exit(tmp_path, snapshots):
    # The exit's full collections scanned everything the plan made and freed nothing: some 30 of
    # the 40 CPU ms after a 5,000-partition plan's last output (kit.collector.spared_at_exit).
    out = subprocess.run([sys.executable, "-c", AT_EXIT, "plan", "rebalance", "--snapshot", str(snapshots["balanced"]),
                          "--out", str(tmp_path / "plan.json"), "--ignore-warns"],
                         capture_output=True, text=True, timeout=300, check=True)
    lines = out.stdout.splitlines()
    assert "code: 0" in lines
    frozen = int(lines[-1].removeprefix("frozen at exit: "))
    assert frozen > 10_000, out.stdout[-500:]
