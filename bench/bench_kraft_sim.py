#!/usr/bin/env python3
"""Time the simulated KRaft cluster (`kit sim start --kraft`) at real sizes, against issue 36's targets.

  bench_kraft_sim.py [--partitions 200000] [--brokers 150] [--topics 400] [--repeat N] [--out FILE | --docs]

The cluster is generated once with shared/tools/gen_cluster.py (balanced, --seed 1; cached in
build/bench/). Each repeat then, on the wall clock (time.perf_counter, monotonic):

- times `kit snapshot`'s work from that Snapshot v1 file (bench/snapshot_from_file.py in a child
  process: kit's start-up, load_snapshot, the same writing): the baseline of the snapshot target;
- starts it with `kit sim start --kraft` (from the command to its exit: every live broker's
  listener answers);
- with nothing moving, asks on the wire Metadata (v12, every topic) of one broker, DescribeLogDirs
  (v4, every partition) of every broker (all at once, each on its own connection, as an Admin API
  client asks them) and ListPartitionReassignments (v0, all), each twice: "first" (the cluster
  makes the answer) and "again" (the state unchanged; the cluster keeps its encoded answer);
- runs `kit snapshot --bootstrap` (a child process, to the file written);
- reads the server's peak resident memory (VmHWM) and stops it with `kit sim stop`.

The table gives each figure's median, min and max over the repeats, its unit and clock, and
issue 36's target beside it (2-core machine: ready within 60 s; Metadata, DescribeLogDirs of all
brokers and ListPartitionReassignments each answered within 2 s, the first answer; `kit snapshot
--bootstrap` within 3x the baseline, paired within each repeat). `--docs` writes
docs/bench/sim-kraft-<partitions>p-<brokers>b.md (what `make bench-sim` does).

Exits 1 when a run failed (a missed target is said in the table, as bench_plan.py does; the table
is written either way).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kafka.protocol.admin import (DescribeLogDirsRequest, DescribeLogDirsResponse, ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from provenance import ROOT, header, load_average, utc_now, write_atomically

TIMEOUT_S = 600.0  # a request or command not done by then is reported as failed
BASELINE = Path(__file__).resolve().parent / "snapshot_from_file.py"

# (key, what, unit and clock, target in seconds or as a ratio, target's words); None: no target.
FIGURES = [
    ("ready", "`kit sim start --kraft --snapshot`, command to exit (every listener answers)", "s, wall", 60.0,
     "≤ 60 s"),
    ("metadata_first", "Metadata v12, every topic, one broker: first (answer made)", "s, wall", 2.0, "≤ 2 s"),
    ("metadata_again", "Metadata, again (state unchanged, kept answer)", "s, wall", None, ""),
    ("log_dirs_first", "DescribeLogDirs v4, every partition, all brokers at once: first", "s, wall", 2.0, "≤ 2 s"),
    ("log_dirs_again", "DescribeLogDirs, all brokers, again", "s, wall", None, ""),
    ("reassign_first", "ListPartitionReassignments v0, all: first", "s, wall", 2.0, "≤ 2 s"),
    ("reassign_again", "ListPartitionReassignments, again", "s, wall", None, ""),
    ("snapshot_bootstrap", "`kit snapshot --bootstrap` (child process, to the file written)", "s, wall", None, ""),
    ("snapshot_file", "baseline: `kit snapshot`'s work from the Snapshot v1 file (bench/snapshot_from_file.py)",
     "s, wall", None, ""),
    ("snapshot_ratio", "`kit snapshot --bootstrap` / baseline, same repeat", "ratio", 3.0, "≤ 3x"),
    ("server_peak_mib", "the server's peak resident memory (VmHWM), after the requests and the snapshot",
     "MiB", None, ""),
    ("stop", "`kit sim stop` (saves the state)", "s, wall", None, ""),
]


def log(msg: str) -> None:
    """A progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def ask(port: int, request, response_class, version: int):
    """One request on a connection of its own; (wall seconds, decoded response)."""
    took, body = exchange(port, request, version)
    return took, response_class.decode(body, version=version, header=True)


def exchange(port: int, request, version: int) -> tuple[float, bytes]:
    """One request on a connection of its own; (wall seconds to the whole answer read, the
    answer's bytes, undecoded)."""
    request.with_header(correlation_id=1, client_id="kit-bench")
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        stream = s.makefile("rb")
        size = struct.unpack(">i", stream.read(4))[0]
        body = stream.read(size)
    return time.perf_counter() - started, body


def metadata(port: int) -> tuple[float, int]:
    """Metadata of every topic from one broker: (seconds, partitions listed)."""
    took, resp = ask(port, MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False), MetadataResponse, 12)
    return took, sum(len(t.partitions) for t in resp.topics)


def log_dirs(ports: list[int]) -> tuple[float, int]:
    """Every broker asked at once; the wall time until the last answer was read, replicas
    listed. The answers are decoded after: decoding 150 of them here (about 2 s of this
    process's CPU) would otherwise hold up the threads still reading."""
    bodies: list[bytes] = []
    lock = threading.Lock()

    def one(port):
        _, body = exchange(port, DescribeLogDirsRequest(version=4, topics=None), 4)
        with lock:
            bodies.append(body)
    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(p,)) for p in ports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    answers = [DescribeLogDirsResponse.decode(b, version=4, header=True) for b in bodies]
    return took, sum(len(t.partitions) for resp in answers for r in resp.results for t in r.topics)


def reassignments(port: int) -> tuple[float, int]:
    """ListPartitionReassignments of all: (seconds, partitions listed)."""
    took, resp = ask(port, ListPartitionReassignmentsRequest(version=0, timeout_ms=60000, topics=None),
                     ListPartitionReassignmentsResponse, 0)
    return took, sum(len(t.partitions) for t in resp.topics)


def timed(cmd: list, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    """Run a child process to its exit: (wall seconds, the finished process)."""
    started = time.perf_counter()
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                       timeout=TIMEOUT_S)
    return time.perf_counter() - started, r


def kit(*args) -> list:
    """A `kit` command line run by this Python (the checkout's kit, through PYTHONPATH)."""
    return [sys.executable, "-m", "kit", *args]


def generator_command(a: argparse.Namespace, out: Path) -> list[str]:
    """shared/tools/gen_cluster.py's command line for the benchmark's cluster."""
    return [sys.executable, str(a.shared / "tools" / "gen_cluster.py"), "--brokers", str(a.brokers),
            "--topics", str(min(a.topics, a.partitions)), "--partitions", str(a.partitions), "--seed", str(a.seed),
            "--out", str(out)]


def cluster_file(a: argparse.Namespace) -> Path:
    """The generated Snapshot v1 file, made once and cached in build/bench/."""
    cache = ROOT / "build" / "bench"
    path = cache / f"sim-kraft-p{a.partitions}-b{a.brokers}-t{min(a.topics, a.partitions)}-s{a.seed}.json"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    log(f"generating {path.name} ...")
    subprocess.run(generator_command(a, tmp), check=True, stdin=subprocess.DEVNULL)
    os.replace(tmp, path)
    return path


def peak_mib(pid_file: Path) -> float | None:
    """The peak resident memory (VmHWM) of the process named in pid_file, in MiB (Linux), or None."""
    try:
        pid = int(pid_file.read_text().split()[0])
        with open(f"/proc/{pid}/status") as f:
            kib = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return kib / 1024.0


def last_line(r: subprocess.CompletedProcess) -> str:
    """A failed child's last word (stderr's last line)."""
    return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


def one_repeat(snap: Path, work: Path, a: argparse.Namespace, env: dict) -> tuple[dict, list[str], list[str]]:
    """One repeat: every figure of FIGURES measured once, what looked wrong, and what failed."""
    row: dict = {}
    notes: list[str] = []
    failures: list[str] = []
    state, out = work / "state", work / "bootstrap-snapshot.json"
    took, r = timed([sys.executable, BASELINE, snap, work / "file-snapshot.json"], env)
    if r.returncode != 0:
        return row, notes, [f"baseline failed: {last_line(r)}"]
    row["snapshot_file"] = took
    took, r = timed(kit("sim", "start", "--kraft", "--snapshot", snap, "--state", state), env)
    if r.returncode != 0:
        return row, notes, [f"kit sim start --kraft failed after {took:.1f} s: {last_line(r)}"]
    row["ready"] = took
    try:
        ports = [int(p) for p in json.loads((state / "cluster.json").read_text())["ports"].values()]
        expected = {"metadata": a.partitions, "reassign": 0, "log_dirs": None}
        for key, call in (("metadata", lambda: metadata(ports[0])), ("log_dirs", lambda: log_dirs(ports)),
                          ("reassign", lambda: reassignments(ports[0]))):
            row[f"{key}_first"], n = call()
            row[f"{key}_again"], n_again = call()
            if n != n_again or expected[key] is not None and n != expected[key]:
                notes.append(f"{key}: listed {n} then {n_again}, expected {expected[key]}")
            if key == "log_dirs":
                row["replicas_listed"] = n
        took, r = timed(kit("snapshot", "--bootstrap", (state / "bootstrap").read_text().strip(), "--out", out), env)
        if r.returncode != 0:
            failures.append(f"kit snapshot --bootstrap failed: {last_line(r)}")
        else:
            row["snapshot_bootstrap"] = took
            row["snapshot_ratio"] = took / row["snapshot_file"]
            said = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            row["snapshot_said"] = said.split(": ", 1)[-1]  # without the temporary folder's name
        peak = peak_mib(state / "server.pid")
        if peak is not None:
            row["server_peak_mib"] = peak
    finally:
        took, r = timed(kit("sim", "stop", "--state", state), env)
        if r.returncode == 0:
            row["stop"] = took
        else:
            failures.append(f"kit sim stop failed: {last_line(r)}")
    return row, notes, failures


def verdict(samples: list[float], target: float | None) -> str:
    """pass when every repeat met the target; pass (median) when only the median did; else FAIL."""
    if target is None:
        return ""
    if not samples:
        return "FAIL (not measured)"
    if max(samples) <= target:
        return "pass"
    return "pass (median; not every repeat)" if statistics.median(samples) <= target else "FAIL"


def table(rows: list[dict]) -> tuple[list[str], bool]:
    """The figures' lines (median, min, max, target, pass/fail) and whether every target was met."""
    out = ["| figure | unit, clock | median | min | max | repeats | target (issue 36) | pass/fail |",
           "|---|---|---:|---:|---:|---:|---|---|"]
    ok = True
    for key, what, unit, target, words in FIGURES:
        samples = [r[key] for r in rows if key in r]
        fmt = "{:.0f}" if unit == "MiB" else "{:.2f}x" if unit == "ratio" else "{:.3f}"
        cells = [fmt.format(f(samples)) for f in (statistics.median, min, max)] if samples else ["-", "-", "-"]
        v = verdict(samples, target)
        ok = ok and not v.startswith("FAIL")
        out.append(f"| {what} | {unit} | " + " | ".join(cells) + f" | {len(samples)} | {words} | {v} |")
    return out, ok


def markdown(rows: list[dict], notes: list[str], a: argparse.Namespace, snap: Path, provenance: dict) -> str:
    """The whole table file: title, provenance header, what was measured, the figures and notes."""
    lines, _ = table(rows)
    gen = " ".join(generator_command(a, Path(snap.name))[1:]).replace(str(a.shared), "$SHARED")
    said = sorted({r["snapshot_said"] for r in rows if r.get("snapshot_said")})
    head = [
        f"# The simulated KRaft cluster at {a.partitions:,} partitions / {a.brokers} brokers",
        "",
        *header(provenance["command"], provenance["started"], provenance["load_before"]),
        f"- cluster: `{gen}` (balanced, RF 3, 3 racks; Snapshot v1, {snap.stat().st_size / 2**20:.1f} MiB)",
        f"- {a.repeat} repeat(s), each a fresh `kit sim start --kraft` of that file with nothing moving; "
        "median, min and max over the repeats. Wall clock: `time.perf_counter` in the benchmark process, "
        "from sending a request (or starting a child process) to the whole answer read (or the child's exit). "
        "A target is \"pass\" when every repeat met it, \"pass (median; not every repeat)\" when the median did.",
        "- the snapshot target's baseline is `kit snapshot`'s own work with the cluster read from the Snapshot v1 "
        "file instead of a live cluster (bench/snapshot_from_file.py: start-up, `load_snapshot`, the same "
        "writing); the ratio is `kit snapshot --bootstrap` over the baseline of the same repeat.",
        "",
    ]
    tail = [""]
    if said:
        tail += ["`kit snapshot --bootstrap` said: " + "; ".join(f"`{s}`" for s in said), ""]
    if notes:
        tail += ["Notes:", "", *[f"- {n}" for n in notes], ""]
    return "\n".join(head + lines + tail)


def main(argv: list[str] | None = None) -> int:
    """Generate, run the repeats, print (and with --out/--docs write) the table; 1 when a run failed."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--brokers", type=int, default=150)
    ap.add_argument("--topics", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3, help="fresh starts measured; the median is reported (default 3)")
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("SHARED", ROOT.parent / "shared")),
                    help="the shared/ folder holding tools/gen_cluster.py")
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="also write the markdown table to this file")
    where.add_argument("--docs", action="store_true",
                       help="write the table to docs/bench/sim-kraft-<partitions>p-<brokers>b.md (what `make "
                            "bench-sim` does; docs/benchmarks.md links it)")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if not (a.shared / "tools" / "gen_cluster.py").exists():
        ap.error(f"{a.shared}/tools/gen_cluster.py not found; pass --shared /path/to/shared")
    out = ROOT / "docs" / "bench" / f"sim-kraft-{a.partitions}p-{a.brokers}b.md" if a.docs else a.out
    provenance = {"command": " ".join(["bench/bench_kraft_sim.py", *(sys.argv[1:] if argv is None else argv)]),
                  "started": utc_now(), "load_before": load_average()}
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    snap = cluster_file(a)
    rows, notes, failures = [], [], []
    for i in range(a.repeat):
        log(f"repeat {i + 1}/{a.repeat}")
        with tempfile.TemporaryDirectory(prefix="kit-bench-kraft-") as tmp:
            try:
                row, odd, failed = one_repeat(snap, Path(tmp), a, env)
            except (OSError, subprocess.TimeoutExpired) as e:  # a request or a command not answered in time
                row, odd, failed = {}, [], [f"{type(e).__name__}: {e}"]
        rows.append(row)
        notes += [f"repeat {i + 1}: {n}" for n in odd]
        failures += [f"repeat {i + 1}: FAILED: {n}" for n in failed]
        log("  " + json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}))
    text = markdown(rows, failures + notes, a, snap, provenance)
    print(text, end="")
    if out:
        write_atomically(out, text)
        log(f"table written to {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
