"""Ctrl-C: one line on stderr, exit 130, no traceback; `kit plan` leaves its outputs whole or
absent (kit.cli.main, kit.cli.plan.run).

Each case runs `kit` in a child interpreter whose step of the command is replaced by one that
sends the process a real SIGINT (as a terminal's Ctrl-C does); the child restores Python's own
SIGINT handler first, since a job started in the background of a shell inherits SIGINT ignored.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kit.errors import INTERRUPTED
from kit.testing import PROGRESS_LINE, run_kit

CHILD = textwrap.dedent("""\
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import kit.cli, kit.cli.doctor, kit.cli.plan

    def ctrl_c():
        os.kill(os.getpid(), signal.SIGINT)

    def interrupted(*args, **kwargs):  # the step Ctrl-C lands in: it never ends by itself
        ctrl_c()
        time.sleep(120)

    real_write = kit.cli.plan.write_atomic

    def write_interrupted(path, text):  # Ctrl-C as the first output is being written
        ctrl_c()
        real_write(path, text)

    where = sys.argv[1]
    if where == "planning":
        kit.cli.plan.make_plan = interrupted
    elif where == "writing":
        kit.cli.plan.write_atomic = write_interrupted
    elif where == "doctor":
        kit.cli.doctor.run = interrupted
    sys.exit(kit.cli.main(sys.argv[2:]))
""")


def kit_interrupted(where: str, *args) -> subprocess.CompletedProcess:
    """`kit ARGS` in a child, Ctrl-C landing `where`; stderr without the progress lines."""
    r = subprocess.run([sys.executable, "-c", CHILD, where, *map(str, args)], capture_output=True, text=True,
                       timeout=120)
    r.stderr = "".join(line for line in r.stderr.splitlines(keepends=True)
                       if not PROGRESS_LINE.fullmatch(line.rstrip("\n")))
    return r


def test_plan_interrupted_while_planning_writes_nothing(tmp_path, snapshots):
    out = tmp_path / "out"
    out.mkdir()
    r = kit_interrupted("planning", "plan", "leaders", "--snapshot", snapshots["balanced"],
                        "--out", out / "plan.json", "--report", out / "report.json")
    assert r.returncode == INTERRUPTED, r.stderr
    assert r.stderr == "kit: plan interrupted (Ctrl-C); nothing written\n"
    assert r.stdout == ""
    assert list(out.iterdir()) == []


def test_plan_interrupted_while_writing_finishes_every_output_first(tmp_path, snapshots):
    """The plan and its report are both written whole, byte for byte those of a run left alone,
    and the line names them; the summary is not printed."""
    alone, out = tmp_path / "alone", tmp_path / "out"
    alone.mkdir()
    out.mkdir()
    args = ("plan", "scale-out", "--snapshot", snapshots["scale-out"])
    assert run_kit(*args, "--out", alone / "plan.json", "--report", alone / "report.json").returncode == 0
    r = kit_interrupted("writing", *args, "--out", out / "plan.json", "--report", out / "report.json",
                        "--waves-dir", out / "waves")
    assert r.returncode == INTERRUPTED, r.stderr
    assert r.stderr == (f"kit: plan interrupted (Ctrl-C); --out {out / 'plan.json'} and --report "
                        f"{out / 'report.json'} and --waves-dir {out / 'waves'} "
                        f"({len(list((out / 'waves').iterdir()))} wave files) written whole\n")
    assert r.stdout == ""
    for name in ("plan.json", "report.json"):
        assert (out / name).read_bytes() == (alone / name).read_bytes()
    assert sorted(p.name for p in out.iterdir()) == ["plan.json", "report.json", "waves"]
    assert not [p for p in out.rglob(".kit-*")]  # no temporary file left


def test_any_command_interrupted_says_so_in_one_line(snapshots):
    r = kit_interrupted("doctor", "doctor", "--snapshot", snapshots["balanced"])
    assert r.returncode == INTERRUPTED, r.stderr
    assert r.stderr == "kit: interrupted (Ctrl-C)\n"


def test_plan_without_ctrl_c_is_untouched(tmp_path, snapshots):
    """The child's harness itself changes nothing: a run with no step replaced writes its plan."""
    r = kit_interrupted("nowhere", "plan", "leaders", "--snapshot", snapshots["balanced"], "--out", tmp_path / "p.json")
    assert r.returncode == 0, r.stderr
    assert Path(tmp_path / "p.json").stat().st_size > 0
