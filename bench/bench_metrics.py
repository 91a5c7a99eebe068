"""Benchmark `kit metrics` on generated samples: Spark local[1] vs local[2], and pandas.

Generates (once) 30 million replica samples as Parquet with kit/spark/samples.py (`ts` as a UTC
timestamp column, or ISO-8601 text with --ts-text); with --format json, converts those
(once) into JSON lines, the form collectors and `kit sim` write (`ts` ISO-8601 text, 40
files per directory so that Spark reads parallel splits). Times the batch job's computation
(`kit.metrics.edge.compute`: read, validate, the four figures) in a fresh child process per run
and master, then computes the same figures with pandas on one node in this process, from
the same input (JSON lines through pyarrow's parser, so both engines' times include
parsing), as a correctness cross-check and a time ratio. Prints a Markdown table of
medians, with each Spark run's JVM CPU time split into task threads, the JIT compiler and
the garbage collector (Linux /proc). With --pin each child runs on as many CPUs as its
master has task slots, which is what local[1] means on a one-core machine.

    .venv/bin/python bench/bench_metrics.py --repeat 3
    .venv/bin/python bench/bench_metrics.py --repeat 3 --pin
    .venv/bin/python bench/bench_metrics.py --repeat 3 --format json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

WINDOW_S = 48 * 3600
JSON_FILES = 40  # JSON-lines files per input directory (replica, broker)
COOLDOWN_S = 30 * 60
SLACK_S = 5 * 60


def jvm_cpu(pid: int) -> dict[str, float]:
    """CPU seconds used so far by a JVM's threads: `jit` (the C1/C2 compiler threads), `tasks`
    (Spark's executor task threads), `gc` (the garbage collector's threads) and `total`;
    empty where /proc is not available.

    On a small machine the JIT's warm-up work runs beside the tasks: with local[1] on two
    cores it takes the core the single task thread leaves idle, so local[1] is not a one-core
    run. These figures show how much of each run that is.
    """
    out = {"jit": 0.0, "tasks": 0.0, "gc": 0.0, "total": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for t in threads:
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        secs = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        out["total"] += secs
        if name.startswith(("C1 CompilerThre", "C2 CompilerThre")):
            out["jit"] += secs
        elif name.startswith("Executor task"):
            out["tasks"] += secs
        elif name.startswith(("GC Thread", "G1 ", "ParGC Thread")):  # G1 (the default) or Parallel GC
            out["gc"] += secs
    return out


def child(data: str, master: str, memory: str, pin: bool) -> None:
    """One timed Spark run; prints seconds, the JVM's CPU split and the figures as JSON."""
    from kit.metrics.edge import compute, spark_session

    slots = int(master.strip("local[]*") or os.cpu_count() or 1)
    if pin and hasattr(os, "sched_setaffinity") and slots < len(os.sched_getaffinity(0)):
        # A machine with as many cores as task slots: the JVM started below inherits this.
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:slots])
    spark = spark_session(master, shuffle_partitions=slots * 4, driver_memory=memory)
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    before = jvm_cpu(pid)
    start = time.perf_counter()
    figs = compute(spark, os.path.join(data, "replica"), os.path.join(data, "broker"), WINDOW_S, "max")
    secs = time.perf_counter() - start
    after = jvm_cpu(pid)
    spark.stop()
    cpu = {k: after[k] - before[k] for k in after}
    print(json.dumps({"seconds": secs, "cpu": cpu, "figures": figs}))


def read_json_lines(path: str, kind: str):
    """A directory of JSON-lines samples as a pandas DataFrame, parsed by pyarrow's JSON
    reader with the documented column types (`ts` stays text, parsed below like Parquet's
    text `ts`)."""
    import pyarrow as pa
    import pyarrow.json as pj

    if kind == "replica":
        fields = [("ts", pa.string()), ("broker", pa.int64()), ("topic", pa.string()), ("partition", pa.int32()),
                  ("leader", pa.bool_()), ("size_bytes", pa.int64()), ("bytes_in_per_sec", pa.float64()),
                  ("bytes_out_per_sec", pa.float64()), ("reassigning", pa.bool_())]
    else:
        fields = [("ts", pa.string()), ("broker", pa.int64()), ("rack", pa.string()), ("instance_type", pa.string()),
                  ("net_rx_bytes_per_sec", pa.float64()), ("net_tx_bytes_per_sec", pa.float64()),
                  ("storage_total_bytes", pa.int64()), ("storage_free_bytes", pa.int64())]
    opts = pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore")
    files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith((".json", ".jsonl")))
    return pa.concat_tables(pj.read_json(f, parse_options=opts) for f in files).to_pandas()


def pandas_figures(data: str, fmt: str = "parquet") -> dict:
    """The same four figures with pandas (single node), for the cross-check."""
    import numpy as np
    import pandas as pd

    if fmt == "json":
        r = read_json_lines(os.path.join(data, "replica"), "replica")
        b = read_json_lines(os.path.join(data, "broker"), "broker")
    else:
        r = pd.read_parquet(os.path.join(data, "replica"))
        b = pd.read_parquet(os.path.join(data, "broker"))
    # Epoch seconds whatever the input: ISO text, or a timestamp column of any unit.
    epoch = pd.Timestamp(0, tz="UTC")
    r["ts"] = (pd.to_datetime(r["ts"], utc=True) - epoch) // pd.Timedelta(seconds=1)
    b["ts"] = (pd.to_datetime(b["ts"], utc=True) - epoch) // pd.Timedelta(seconds=1)
    # latest size per replica, then max over replicas
    last = r.sort_values("ts").drop_duplicates(["topic", "partition", "broker"], keep="last")
    sizes = last.groupby(["topic", "partition"])["size_bytes"].max()
    meta: dict = {}
    for (t, p), s in sizes.items():
        meta.setdefault(t, {})[str(p)] = {"Size": int(s)}
    lb = b.sort_values("ts").drop_duplicates("broker", keep="last").set_index("broker")
    bm = {str(k): {"StorageFree": int(v)} for k, v in lb["storage_free_bytes"].dropna().sort_index().items()}
    # traffic: leader rows in the window, outside reassignments and their cooldown
    newest = r["ts"].max()
    cand = r[(r["leader"] | r["reassigning"]) & (r["ts"] > newest - WINDOW_S - COOLDOWN_S)]
    key = cand["topic"].astype(str) + "/" + cand["partition"].astype(str)
    cand = cand.assign(key=key)
    moves = cand[cand["reassigning"]][["key", "ts"]].drop_duplicates().sort_values("ts")
    lead = cand[cand["leader"] & ~cand["reassigning"] & (cand["ts"] > newest - WINDOW_S)].sort_values("ts")
    lead = pd.merge_asof(lead, moves.rename(columns={"ts": "last_move"}), left_on="ts", right_on="last_move",
                         by="key", direction="backward")
    ok = lead[lead["last_move"].isna() | (lead["ts"] - lead["last_move"] > COOLDOWN_S)]
    tr = ok.groupby(["topic", "partition"])[["bytes_in_per_sec", "bytes_out_per_sec"]].max().dropna(how="all")
    traffic = [{"topic": t, "partition": int(p), "bytes_in": float(row.bytes_in_per_sec),
                "bytes_out": float(row.bytes_out_per_sec)} for (t, p), row in tr.iterrows()]
    # broker load from the current placement
    pnew = last.groupby(["topic", "partition"])["ts"].transform("max")
    place = last[last["ts"] >= pnew - SLACK_S][["topic", "partition", "broker", "leader"]]
    place = place.merge(place.groupby(["topic", "partition"]).size().rename("rf").reset_index())
    place = place.merge(tr.reset_index(), how="left").fillna({"bytes_in_per_sec": 0.0, "bytes_out_per_sec": 0.0})
    place["load_out"] = np.where(place["leader"], place["bytes_out_per_sec"]
                                 + place["bytes_in_per_sec"] * (place["rf"] - 1), 0.0)
    g = place.groupby("broker").agg(replicas=("topic", "size"), leaders=("leader", "sum"),
                                    expected_bytes_in=("bytes_in_per_sec", "sum"),
                                    expected_bytes_out=("load_out", "sum"))
    load = [{"broker": int(k), **{c: float(v[c]) for c in ("expected_bytes_in", "expected_bytes_out")},
             "replicas": int(v["replicas"]), "leaders": int(v["leaders"]),
             "measured_rx_bytes_per_sec": float(lb.loc[k, "net_rx_bytes_per_sec"]),
             "measured_tx_bytes_per_sec": float(lb.loc[k, "net_tx_bytes_per_sec"])} for k, v in g.iterrows()]
    return {"partition_meta": meta, "broker_metrics": bm, "replica_traffic": traffic, "broker_load": load}


def to_json_lines(src: str, dst: str, files: int = JSON_FILES) -> dict:
    """Convert the Parquet samples in `src` into JSON lines in `dst` (replica/ and broker/,
    `files` plain .json files each, rows in time order: each file a stretch of time, as a
    collector writes them). `ts` becomes ISO-8601 UTC text with 'Z'; a follower's null rates
    are written as null. Spark writes doubles so that they read back exactly. Runs in a
    child process (a JVM of its own, gone before any timing); returns the row counts."""
    from pyspark.sql import functions as F

    from kit.metrics.edge import spark_session
    from kit.spark.metrics_jobs import BROKER_SCHEMA, REPLICA_SCHEMA

    spark = spark_session("local[2]", driver_memory="4g", app="bench-json-lines")
    tmp = dst + ".tmp"
    counts = {}
    for kind, schema in (("replica", REPLICA_SCHEMA), ("broker", BROKER_SCHEMA)):
        df = spark.read.parquet(os.path.join(src, kind))
        cols = [F.date_format(F.col("ts"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("ts") if f.name == "ts"
                else F.col(f.name).cast(f.dataType) for f in schema.fields]
        out = df.select(*cols).repartitionByRange(files, "ts").sortWithinPartitions("ts", "broker")
        out.write.mode("overwrite").option("ignoreNullFields", "false").option("compression", "none") \
            .json(os.path.join(tmp, kind))
        counts[kind] = spark.read.parquet(os.path.join(src, kind)).count()
    spark.stop()
    os.rename(tmp, dst)
    return counts


def same(spark_figs: dict, pd_figs: dict) -> list[str]:
    """Differences between the two engines' figures (empty when they agree)."""
    import math

    diffs = []
    for k in ("partition_meta", "broker_metrics"):
        if spark_figs[k] != pd_figs[k]:
            diffs.append(k)
    for k, key in (("replica_traffic", ("topic", "partition")), ("broker_load", ("broker",))):
        a = {tuple(r[c] for c in key): r for r in spark_figs[k]}
        b = {tuple(r[c] for c in key): r for r in pd_figs[k]}
        if a.keys() != b.keys():
            diffs.append(f"{k}: {len(a)} vs {len(b)} rows")
            continue
        for kk, ra in a.items():
            if any(not math.isclose(ra[c], b[kk][c], rel_tol=1e-9) for c in b[kk] if isinstance(b[kk][c], float)):
                diffs.append(f"{k} {kk}")
                break
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--format", choices=("parquet", "json"), default="parquet",
                    help=f"input format (default parquet). json: JSON lines ({JSON_FILES} plain .json files per "
                         "directory, `ts` ISO-8601 text), converted once from the Parquet samples (generated "
                         "first if missing); Spark and the pandas cross-check both read and parse them")
    ap.add_argument("--data", help="sample directory (generated when missing; default build/bench/metrics-30m-ts, "
                                    "build/bench/metrics-30m with --ts-text, build/bench/metrics-30m-json with "
                                    "--format json, converted from the default Parquet samples, or from DATA-parquet "
                                    "when DATA is given)")
    ap.add_argument("--ts-text", action="store_true",
                    help="generate `ts` as ISO-8601 text rather than a Parquet timestamp (the parse-heavy input)")
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--steps", type=int, default=2000, help="sample instants (x partitions x RF 3 = rows)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--masters", default="local[1],local[2]")
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--pin", action="store_true",
                    help="run each Spark child on as many CPUs as its master has task slots (local[1] on one "
                         "core), so the JIT compiler cannot borrow an idle core: a speed-up per core")
    ap.add_argument("--child", metavar="MASTER", help=argparse.SUPPRESS)
    ap.add_argument("--convert-from", metavar="PARQUET_DIR", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.format == "json" and a.ts_text:
        ap.error("--ts-text is for Parquet input (JSON lines always carry `ts` as text)")
    if a.convert_from:
        print(json.dumps(to_json_lines(a.convert_from, a.data)))
        return 0
    parquet = os.path.join(ROOT, "build", "bench", "metrics-30m" if a.ts_text else "metrics-30m-ts")
    if a.data is None:
        a.data = os.path.join(ROOT, "build", "bench", "metrics-30m-json") if a.format == "json" else parquet
    if a.child:
        child(a.data, a.child, a.driver_memory, a.pin)
        return 0
    if a.data != parquet:  # generate the Parquet samples where asked (to convert from: beside the JSON lines)
        parquet = a.data if a.format == "parquet" else a.data.rstrip("/") + "-parquet"
    if not os.path.isdir(os.path.join(a.data, "replica")) and not os.path.isdir(os.path.join(parquet, "replica")):
        from kit.spark.samples import generate

        t = time.perf_counter()
        n = generate(parquet, partitions=a.partitions, steps=a.steps, ts_text=a.ts_text)
        print(f"generated {n['replica_rows']:,} replica and {n['broker_rows']:,} broker samples "
              f"in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    if not os.path.isdir(os.path.join(a.data, "replica")):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, __file__, "--data", a.data, "--convert-from", parquet],
                             capture_output=True, text=True, check=True)
        n = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"converted {n['replica']:,} replica and {n['broker']:,} broker samples to JSON lines "
              f"({JSON_FILES} files each) in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    times: dict[str, list[float]] = {}
    cpus: dict[str, list[dict]] = {}
    loads: list[float] = []  # 1-minute load average before each run: the machine may be shared
    figs = None
    for _ in range(a.repeat):
        for m in a.masters.split(","):
            loads.append(os.getloadavg()[0])
            out = subprocess.run([sys.executable, __file__, "--data", a.data, "--child", m,
                                  "--driver-memory", a.driver_memory] + (["--pin"] if a.pin else []),
                                 capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            times.setdefault(m, []).append(res["seconds"])
            cpus.setdefault(m, []).append(res["cpu"])
            figs = res["figures"]
            c = res["cpu"]
            print(f"{m}: {res['seconds']:.1f} s" + (f" (JVM CPU {c['total']:.1f} s: tasks {c['tasks']:.1f}, "
                                                   f"JIT {c['jit']:.1f}, GC {c['gc']:.1f})" if c else ""),
                  file=sys.stderr)
        loads.append(os.getloadavg()[0])
        t = time.perf_counter()
        pd_figs = pandas_figures(a.data, a.format)
        times.setdefault("pandas", []).append(time.perf_counter() - t)
        print(f"pandas: {times['pandas'][-1]:.1f} s", file=sys.stderr)
    diffs = same(figs, pd_figs)
    med = {k: statistics.median(v) for k, v in times.items()}
    masters = a.masters.split(",")
    print("| engine | median s | runs | JVM CPU s (median) | of which tasks | of which JIT | of which GC |")
    print("|---|---|---|---|---|---|---|")
    for k, v in times.items():
        c = [x for x in cpus.get(k, []) if x]
        split = " | ".join(f"{statistics.median(x[f] for x in c):.1f}" for f in ("total", "tasks", "jit", "gc")) if c \
            else "- | - | - | -"
        print(f"| {k}{' (pinned)' if a.pin and k in cpus else ''} | {med[k]:.1f} | "
              f"{', '.join(f'{x:.1f}' for x in v)} | {split} |")
    if len(masters) == 2:
        print(f"\nspeed-up {masters[1]} over {masters[0]}: {med[masters[0]] / med[masters[1]]:.2f}x")
    print(f"{masters[-1]} / pandas: {med[masters[-1]] / med['pandas']:.2f}x")
    print(f"load average before the runs ({os.cpu_count()} cores): {min(loads):.1f} to {max(loads):.1f}")
    print(f"cross-check: {'identical figures' if not diffs else 'DIFFERENT: ' + ', '.join(diffs)} "
          f"({len(figs['replica_traffic'])} partitions with traffic, {len(figs['broker_load'])} brokers)")
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
