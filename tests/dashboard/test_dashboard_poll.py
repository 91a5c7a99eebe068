"""The poller's cost on a loaded machine (issue 39): a poll does not parse again the sample
files that did not change.

No wall timing: what is counted is which files are opened and parsed.
"""
from __future__ import annotations

import builtins
import json
import os

import pytest

pytest.importorskip("panel")

from kit.dashboard import readers  # noqa: E402
from kit.dashboard.poller import Poller  # noqa: E402
from kit.throttle.sources import JsonLinesFiles, SampleDirMetrics, replica_row, replica_sizes  # noqa: E402


def _broker_line(broker: int, ts: str, rx: float = 1e6) -> str:
    return json.dumps({"ts": ts, "broker": broker, "net_rx_bytes_per_sec": rx, "net_tx_bytes_per_sec": rx,
                       "storage_free_bytes": 10**11, "storage_total_bytes": 10**12}) + "\n"


def _samples(tmp_path):
    folder = tmp_path / "samples"
    (folder / "broker").mkdir(parents=True)
    (folder / "replica").mkdir()
    (folder / "broker" / "20260101T000000Z.jsonl").write_text(
        "".join(_broker_line(b, "2026-01-01T00:00:00Z") for b in (1, 2, 3)))
    (folder / "replica" / "20260101T000000Z.jsonl").write_text("".join(
        json.dumps({"ts": "2026-01-01T00:00:00Z", "topic": "t", "partition": p, "broker": 3,
                    "size_bytes": 1000 * p}) + "\n" for p in range(4)))
    return folder


class Opened:
    """Records the sample files `open` is asked for."""

    def __init__(self, monkeypatch, folder):
        self.paths: list[str] = []
        real, root = builtins.open, str(folder)

        def counting(path, *a, **k):
            if str(path).startswith(root):
                self.paths.append(os.path.relpath(str(path), root))
            return real(path, *a, **k)
        monkeypatch.setattr(builtins, "open", counting)


def test_a_poll_does_not_read_unchanged_samples_again(tmp_path, monkeypatch):
    """Before: every poll (each half second in the browser test) parsed the newest broker files
    twice (the clock, the rates) and the newest replica file whole: 0.2 of its 0.38 CPU s at 150
    brokers. Now a file is read again only once it changed; a new file, or a line appended,
    is read, and its figures are the poll's."""
    folder = _samples(tmp_path)
    poller = Poller(events=None, samples=str(folder), interval=60.0)
    opened = Opened(monkeypatch, folder)
    first = poller.poll()
    assert first.clock is not None and set(first.storage) == {1, 2, 3}
    read_first = list(opened.paths)
    assert "broker/20260101T000000Z.jsonl" in read_first
    del opened.paths[:]
    poller.poll()
    poller.poll()
    assert not [p for p in opened.paths if p.endswith(".jsonl")], opened.paths
    # A line appended (a broker's next sample) is read at the next poll, and counts.
    with open(folder / "broker" / "20260101T000000Z.jsonl", "a") as fh:
        fh.write(_broker_line(1, "2026-01-01T00:00:20Z"))
    after = poller.poll()
    assert "broker/20260101T000000Z.jsonl" in opened.paths
    assert after.clock == first.clock + 20


def test_replica_sizes_and_the_rates_read_a_file_again_only_once_it_changed(tmp_path, monkeypatch):
    folder = _samples(tmp_path)
    files, rates = JsonLinesFiles(replica_row), SampleDirMetrics(str(folder), window=0.5)
    wanted = {("t", p, 3) for p in range(4)}
    opened = Opened(monkeypatch, folder)
    assert replica_sizes(str(folder), wanted, files) == {("t", p, 3): 1000 * p for p in range(4)}
    assert set(rates.read({1, 2})) == {1, 2}
    assert files.parsed == 1 and rates.files.parsed == 1
    assert replica_sizes(str(folder), wanted, files) == {("t", p, 3): 1000 * p for p in range(4)}
    assert set(rates.read({1, 2, 3})) == {1, 2, 3}
    assert files.parsed == 1 and rates.files.parsed == 1 and len(opened.paths) == 2
    # The next replica sample (written aside, then renamed in): the newest file is read.
    aside = folder / "replica.tmp"
    aside.write_text("".join(json.dumps({"ts": "2026-01-01T00:00:20Z", "topic": "t", "partition": p, "broker": 3,
                                         "size_bytes": 2000 * p}) + "\n" for p in range(4)))
    os.replace(aside, folder / "replica" / "20260101T000020Z.jsonl")
    assert replica_sizes(str(folder), wanted, files) == {("t", p, 3): 2000 * p for p in range(4)}
    assert files.parsed == 2


def test_the_clock_without_kept_files_reads_as_before(tmp_path):
    """`samples_clock` alone (no files kept: the runbook's way) gives the same figures."""
    folder = _samples(tmp_path)
    kept = JsonLinesFiles()
    assert readers.samples_clock(str(folder)) == readers.samples_clock(str(folder), kept) == \
        readers.samples_clock(str(folder), kept)
    assert kept.parsed == 1
