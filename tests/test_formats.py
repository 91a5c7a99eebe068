"""kit.formats: Snapshot v1 loading and validation, plan text, atomic writes."""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import pickle
import random
import re
import threading

import pytest
from hypothesis import given, settings, strategies as st

from kit.errors import BadInput
from kit.formats import cluster_from_snapshot, load_plan, load_snapshot, parse_json, plan_text
from kit.files import read_input, write_atomic
from kit.model import Partition, Plan


def write(tmp_path, doc, name="snap.json"):
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


def snap(brokers=None, partitions=None, **extra):
    doc = {
        "version": 1,
        "brokers": brokers if brokers is not None else [
            {"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}, {"id": 4, "rack": "a"},
        ],
        "partitions": partitions if partitions is not None else [
            {"topic": "t", "partition": 0, "replicas": [1, 2, 3]},
            {"topic": "t", "partition": 1, "replicas": [2, 3, 1]},
        ],
    }
    doc.update(extra)
    return doc


def bad(tmp_path, doc, *fragments):
    """Loading doc raises BadInput whose one-line message names the file and every fragment."""
    path = write(tmp_path, doc)
    with pytest.raises(BadInput) as e:
        load_snapshot(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert path in msg
    for f in fragments:
        assert f in msg, f"{f!r} not in {msg!r}"
    return msg


# -- good input ---------------------------------------------------------------------------

def test_minimal_snapshot_takes_the_documented_defaults(tmp_path):
    c = load_snapshot(write(tmp_path, {"brokers": [{"id": 7}], "partitions": [
        {"topic": "events", "partition": 0, "replicas": [7]}]}))
    b = c.brokers[7]
    assert b.alive is True and b.rack is None and b.known is True
    assert b.storage_total is None and b.storage_free is None and b.net_capacity is None
    (p,) = c.partitions
    assert p.replicas == (7,) and p.isr == (7,)  # isr defaults to replicas
    assert p.size == 0 and p.bytes_in == 0.0 and p.bytes_out == 0.0 and p.leader is None


def test_full_snapshot_keeps_every_field(tmp_path):
    c = load_snapshot(write(tmp_path, snap(
        brokers=[{"id": 1001, "rack": "rack-a", "alive": True, "storage_total": 4_000_000_000_000,
                  "storage_free": 2_500_000_000_000, "instance_type": "standard", "net_capacity": 125_000_000},
                 {"id": 1002, "rack": "rack-b", "alive": False}],
        partitions=[{"topic": "events", "partition": 0, "replicas": [1001, 1002], "isr": [1001],
                     "size": 12345678, "bytes_in": 1e6, "bytes_out": 3e6, "leader": 1001}])))
    b = c.brokers[1001]
    assert (b.rack, b.storage_total, b.storage_free, b.instance_type, b.net_capacity) == (
        "rack-a", 4_000_000_000_000, 2_500_000_000_000, "standard", 125_000_000)
    assert c.brokers[1002].alive is False and c.live_ids == [1001]
    (p,) = c.partitions
    assert (p.isr, p.size, p.bytes_in, p.bytes_out, p.leader) == ((1001,), 12345678, 1e6, 3e6, 1001)


def test_null_rack_and_version_absent_are_accepted(tmp_path):
    c = load_snapshot(write(tmp_path, {"brokers": [{"id": 1, "rack": None}], "partitions": []}))
    assert c.brokers[1].rack is None and c.partitions == ()


def test_unknown_broker_in_replicas_becomes_a_dead_broker(tmp_path):
    c = load_snapshot(write(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": [1, 99, 2]}])))
    ghost = c.brokers[99]
    assert ghost.alive is False and ghost.known is False and ghost.rack is None
    assert 99 not in c.live_ids
    assert list(c.brokers) == sorted(c.brokers)


def test_partitions_and_brokers_come_out_sorted(tmp_path):
    parts = [{"topic": t, "partition": n, "replicas": [1, 2]} for t in ("b", "a", "c") for n in (2, 0, 10, 1)]
    random.Random(3).shuffle(parts)
    c = load_snapshot(write(tmp_path, snap(brokers=[{"id": 2}, {"id": 1}], partitions=parts)))
    assert [p.key for p in c.partitions] == sorted(p.key for p in c.partitions)
    assert list(c.brokers) == [1, 2]


def test_live_broker_with_no_replicas_is_kept(tmp_path):
    c = load_snapshot(write(tmp_path, snap()))
    assert 4 in c.live_ids and 4 not in c.map_brokers()


def _reference_partitions(entries):
    """The partitions a snapshot's entries stand for, built one by one as the format says."""
    out = []
    for e in sorted(entries, key=lambda e: (e["topic"], e["partition"])):
        reps = tuple(e["replicas"])
        out.append(Partition(topic=e["topic"], partition=e["partition"], replicas=reps,
                             isr=reps if e.get("isr") is None else tuple(e["isr"]),
                             size=int(e.get("size") or 0), bytes_in=float(e.get("bytes_in") or 0.0),
                             bytes_out=float(e.get("bytes_out") or 0.0), leader=e.get("leader")))
    return tuple(out)


@pytest.mark.parametrize("seed", range(6))
def test_every_optional_field_in_every_form_is_read_as_the_format_says(tmp_path, seed):
    # Many partitions, each field present, null or absent, ints and floats, mixed replication
    # factors, in shuffled order: the whole document is read at once, a column at a time.
    rng = random.Random(seed)
    entries = []
    for t in range(12):
        for n in rng.sample(range(40), 15):
            e = {"topic": f"topic.{t}_x-{seed}", "partition": n,
                 "replicas": rng.sample([1, 2, 3, 4, 9], rng.choice([1, 2, 3, 4]))}
            if rng.random() < 0.5:
                e["isr"] = rng.choice([None, [], e["replicas"][:1], e["replicas"][::-1][:2]])
            if rng.random() < 0.5:
                e["leader"] = rng.choice([None, -1, e["replicas"][0], e["replicas"][-1]])
            for key in ("size", "bytes_in", "bytes_out"):
                if rng.random() < 0.7:
                    e[key] = rng.choice([None, 0, 12, 2**53, 1.5, 0.0, 3e9])
            entries.append(e)
    rng.shuffle(entries)
    c = load_snapshot(write(tmp_path, snap(partitions=entries)))
    assert c.partitions == _reference_partitions(entries)
    assert [type(p.size) for p in c.partitions] == [int] * len(entries)
    assert {type(p.bytes_in) for p in c.partitions} | {type(p.bytes_out) for p in c.partitions} == {float}
    assert c.brokers[9].known is False and c.brokers[9].alive is False



def test_a_broker_id_and_a_topic_name_are_one_object_each_however_often_they_occur(tmp_path):
    # The parser makes an object per occurrence; the model keeps one per broker and per topic
    # (ids above 256, which CPython does not share by itself): memory at 1,000,000 partitions.
    rng = random.Random(5)
    ids = [1001, 1002, 1003, 1004, 2**31 - 1]
    entries = []
    for t in range(6):
        for n in range(30):
            reps = rng.sample(ids, 3)
            e = {"topic": f"orders-{t}", "partition": n, "replicas": reps}
            if n % 3 == 0:
                e["isr"] = reps[::-1][:2]
            if n % 4 == 0:
                e["leader"] = rng.choice([reps[1], -1, None])
            entries.append(e)
    rng.shuffle(entries)
    c = load_snapshot(write(tmp_path, snap(partitions=entries)))
    assert c.partitions == _reference_partitions(entries)
    members = [b for p in c.partitions for b in (*p.replicas, *p.isr, p.leader) if b is not None and b != -1]
    assert len(set(map(id, members))) == len(set(members)) == len(ids)
    assert len(set(map(id, (p.topic for p in c.partitions)))) == 6


@settings(max_examples=150, deadline=None)
@given(st.data(), st.sampled_from([1, 2, 3, None]), st.sampled_from(["equal", "shorter", "empty", "mixed"]))
def test_replica_lists_and_isrs_of_one_length_or_several_are_read_as_given(data, rf, isr_form):
    # Lists of one length are cut into tuples from one pass over their ids, lists of several
    # lengths one by one: both give the partitions built one by one, an isr equal to its
    # replica list sharing its tuple.
    entries = []
    for n in range(data.draw(st.integers(1, 12))):
        reps = data.draw(st.lists(st.sampled_from([1001, 1002, 1003, 1004]), min_size=rf or 1, max_size=rf or 4,
                                  unique=True))
        isr = {"equal": list(reps), "shorter": reps[1:] or reps, "empty": [],
               "mixed": data.draw(st.sampled_from([None, [], reps[:1], reps[::-1]]))}[isr_form]
        entries.append({"topic": "t", "partition": n, "replicas": reps, "isr": isr})
    c = cluster_from_snapshot(snap(partitions=entries))
    assert c.partitions == _reference_partitions(entries)
    assert all((p.isr is p.replicas) == (list(p.isr) == list(p.replicas)) for p in c.partitions)
    assert_flat_lists_are_the_partitions(c)


def assert_flat_lists_are_the_partitions(c):
    """`Cluster.lists`, kept by the reader, hold every partition's replica list and isr as
    flattening the partitions gives them, in arrays no reader can write to."""
    assert c.lists is not None
    for lists, field in zip(c.lists, ("replicas", "isr")):
        got = [lists.id[lists.row == p].tolist() for p in range(len(c.partitions))]
        assert got == [list(getattr(p, field)) for p in c.partitions], field
        assert lists.rows.tolist() == list(range(len(c.partitions)))
        assert lists.lens.tolist() == [len(getattr(p, field)) for p in c.partitions]
        with pytest.raises(ValueError):
            lists.id[:1] = 7


def test_flat_lists_are_kept_for_a_snapshot_in_order_only_and_not_for_a_cluster_made_from_it():
    """A snapshot listing its partitions out of (topic, partition) order is read as another
    order: no flat lists then (whoever wants them flattens the partitions); nor for a cluster
    with another assignment, or one replaced field by field."""
    entries = [{"topic": "t", "partition": n, "replicas": [1, 2, 3][n % 3:] + [1, 2, 3][:n % 3], "isr": [1, 2]}
               for n in range(6)]
    c = cluster_from_snapshot(snap(partitions=entries))
    assert_flat_lists_are_the_partitions(c)
    assert cluster_from_snapshot(snap(partitions=entries[::-1])).lists is None
    assert c.with_assignment([[3, 2, 1]] * 6).lists is None
    assert dataclasses.replace(c, partitions=c.partitions[:2]).lists is None
    assert pickle.loads(pickle.dumps(c)) == c


@pytest.mark.parametrize("isr", [[1, 1], [2, 1, 2, 3], [3, 2, 1], [], None, [1, 2, 3]])
@pytest.mark.parametrize("mixed", [False, True])
def test_an_isr_of_any_form_within_the_replicas_is_read_as_given(isr, mixed):
    # The isrs are read as one array of ids, only those that differ from their replica list
    # (a repeated broker, longer, reordered, empty) made into tuples of their own; others share it.
    entries = [{"topic": "t", "partition": n, "replicas": [1, 2, 3] if n % 2 or not mixed else [3, 1],
                "isr": [1, 2, 3] if n % 2 or not mixed else None} for n in range(50)]
    entries[21]["isr"] = isr
    c = cluster_from_snapshot(snap(partitions=entries))
    assert c.partitions == _reference_partitions(entries)
    assert all((p.isr is p.replicas) == (list(p.isr) == list(p.replicas)) for p in c.partitions)
    assert_flat_lists_are_the_partitions(c)


@pytest.mark.parametrize("field", ["replicas", "isr", "leader"])
@pytest.mark.parametrize("value", [2**63, 2**64 + 5])
def test_an_id_beyond_64_bits_given_as_data_is_refused_by_name(field, value):
    # The lists are read as orjson writes them, which it cannot for an int beyond 64 bits, and
    # into int64 arrays, which cannot hold 2^63: both are refused by the partition's reader.
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2]} for n in range(100)]
    parts[30][field] = value if field == "leader" else [1, value]
    with pytest.raises(BadInput, match=f"t-30 {field}.*outside"):
        cluster_from_snapshot(snap(partitions=parts))


def test_the_model_keeps_no_object_of_the_parsed_document():
    # One kept object holds its whole arena of the freed document in Python's allocator: at
    # 1,000,000 partitions the topics' first names alone held 1 GiB for 442 MB of live objects.
    rng = random.Random(11)
    entries = []
    for t in range(4):
        for n in range(300, 340):
            reps = rng.sample([1001, 1002, 1003, 1004, 2**31 - 1], 3)
            entries.append({"topic": f"orders-{t}", "partition": n, "replicas": reps, "isr": reps[:2],
                            "leader": reps[1], "size": 10**12 + n, "bytes_in": 1.5 * n, "bytes_out": n / 7})
    doc = snap(partitions=entries)
    parsed = parse_json(json.dumps(doc), "test")
    c = cluster_from_snapshot(parsed, "test")
    assert c.partitions == _reference_partitions(entries)
    theirs = {id(v) for e in parsed["partitions"] for k, v in e.items() if k != "replicas" and k != "isr"}
    theirs |= {id(b) for e in parsed["partitions"] for b in (*e["replicas"], *e["isr"])}
    kept = [v for p in c.partitions for v in (p.topic, p.partition, *p.replicas, *p.isr, p.leader, p.size,
                                               p.bytes_in, p.bytes_out)]
    assert not [v for v in kept if id(v) in theirs]


def test_partition_takes_its_fields_in_order_with_their_defaults():
    # Partition writes out its own __init__ (for speed): it must take the fields the dataclass declares.
    params = list(inspect.signature(Partition).parameters.values())
    declared = dataclasses.fields(Partition)
    assert [p.name for p in params] == [f.name for f in declared]
    assert [p.default for p in params] == [inspect.Parameter.empty if f.default is dataclasses.MISSING
                                           else f.default for f in declared]
    p = Partition("t", 1, (1, 2), (1,), size=5)
    assert dataclasses.replace(p, leader=2) == Partition("t", 1, (1, 2), (1,), 5, 0.0, 0.0, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.size = 6
    assert hash(p) == hash(Partition("t", 1, (1, 2), (1,), 5))



def test_partitions_built_many_at_once_are_the_ones_built_one_by_one():
    # Partition.many sets each slot column-wise, bypassing __init__: the same objects, as
    # immutable, hashable and picklable, and no per-instance dict (slots: memory per partition).
    rows = [("a", 0, (1, 2), (1,), 5, 1.5, 0.0, None), ("b", 3, (2,), (), 0, 0.0, 2.0, 2)]
    many = Partition.many(*map(list, zip(*rows)))
    assert many == [Partition(*r) for r in rows]
    assert list(map(hash, many)) == [hash(Partition(*r)) for r in rows]
    assert pickle.loads(pickle.dumps(many)) == many
    with pytest.raises(dataclasses.FrozenInstanceError):
        many[0].topic = "c"
    assert not hasattr(many[0], "__dict__")

# -- bad input: one BadInput naming the problem each --------------------------------------

def test_malformed_json(tmp_path):
    bad(tmp_path, '{"version": 1, "brokers": [', "not valid JSON")


def _typed(value):
    """`value` with the type of every scalar beside it: equal only when the types are too."""
    if isinstance(value, dict):
        return [(k, _typed(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


@pytest.mark.parametrize("raw", [
    b'{"a": 1, "b": [1, 2.5, -0.0, -0, 1.5e-320, 0.1, 1e308, 18446744073709551615, -9223372036854775808]}',
    b'{"a": 1, "a": 2, "b": 3}',  # the last of a repeated key, in the first one's place
    b'{"t": "caf\\u00e9 \\ud83d\\ude00", "n": null, "f": false, "e": {}, "l": []}',
    b'["\\ud800"]',  # a lone surrogate: orjson refuses it, the standard library keeps it
    b'\xef\xbb\xbf{"version": 1}',  # a byte order mark
    '{"version": 1}'.encode("utf-16"),
    '{"version": 1, "x": 1e400}'.encode(),  # infinity from a literal: kept, as before
])
def test_parse_json_reads_what_the_standard_library_reads(raw):
    # orjson reads first; whatever it refuses goes to the standard library: the same values of
    # the same types either way.
    assert _typed(parse_json(raw, "doc")) == _typed(json.loads(raw))


@pytest.mark.parametrize("raw, words", [
    (b'{"version": 1, "brokers": [', "Expecting value: line 1 column 28"),
    (b'[1, NaN]', "NaN is not a JSON number"),
    (b'{"x": -Infinity}', "-Infinity is not a JSON number"),
    (b"[" * 100_000 + b"]" * 100_000, "JSON nested too deeply"),
])
def test_parse_json_names_a_problem_in_the_standard_librarys_words(raw, words):
    # orjson refuses all of these in words of its own; the message is the one kit gave before.
    with pytest.raises(BadInput) as e:
        parse_json(raw, "snapshot s.json")
    assert str(e.value).startswith("snapshot s.json: ") and words in str(e.value)


def test_an_integer_beyond_64_bits_is_refused_as_before(tmp_path):
    # orjson reads it as a float where the standard library kept an int: refused either way.
    bad(tmp_path, '{"brokers": [{"id": 18446744073709551616}], "partitions": []}', "brokers[0].id")
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": [1, 2, 3],
                                    "size": 18446744073709551616}]), "t-0")


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.json")
    with pytest.raises(BadInput, match="no such file"):
        load_snapshot(path)


def test_not_an_object(tmp_path):
    bad(tmp_path, [1, 2, 3], "expected a JSON object")


def test_missing_replicas(tmp_path):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0}]), "partitions[0]", "'replicas'")


def test_missing_broker_id(tmp_path):
    bad(tmp_path, snap(brokers=[{"id": 1}, {"rack": "a"}]), "brokers[1]", "'id'")


def test_duplicate_broker_in_a_replica_list(tmp_path):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 3, "replicas": [1, 2, 1]}]),
        "t-3", "broker 1 twice")


def test_partition_listed_twice(tmp_path):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": [1, 2]},
                                   {"topic": "t", "partition": 0, "replicas": [2, 3]}]),
        "t-0", "listed twice")


def test_broker_listed_twice(tmp_path):
    bad(tmp_path, snap(brokers=[{"id": 1}, {"id": 1}]), "broker 1 listed twice")


@pytest.mark.parametrize("value", ["1001", 1.5, True, None])
def test_non_integer_broker_id(tmp_path, value):
    bad(tmp_path, snap(brokers=[{"id": value}]), "brokers[0].id", "expected an integer")


@pytest.mark.parametrize("value", ["2", 2.0, False])
def test_non_integer_broker_id_in_replicas(tmp_path, value):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": [1, value]}]),
        "t-0 replicas", "expected an integer")


@pytest.mark.parametrize("version", [2, 0, "1"])
def test_wrong_version(tmp_path, version):
    bad(tmp_path, snap(version=version), "unsupported snapshot version", "expected 1")


def test_empty_replica_list(tmp_path):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": []}]), "t-0", "non-empty list")


def test_isr_must_be_a_list(tmp_path):
    bad(tmp_path, snap(partitions=[{"topic": "t", "partition": 0, "replicas": [1, 2], "isr": 5}]),
        "t-0 isr", "list")


def test_alive_must_be_a_boolean(tmp_path):
    bad(tmp_path, snap(brokers=[{"id": 1, "alive": "false"}]), "brokers[0].alive", "true or false")


def test_free_storage_above_the_total_is_refused(tmp_path):
    brokers = [{"id": 1, "storage_total": 1000, "storage_free": 1001}, {"id": 2}, {"id": 3}]
    bad(tmp_path, snap(brokers=brokers), "brokers[0]", "storage_free 1001 is more than storage_total 1000")


def test_no_leader_is_a_leader_of_minus_one(tmp_path):
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2], "leader": -1 if n == 7 else 2} for n in range(50)]
    cluster = load_snapshot(write(tmp_path, snap(partitions=parts)))
    assert cluster.partitions[7].leader == -1 and cluster.partitions[8].leader == 2


def test_brokers_must_be_a_list(tmp_path):
    bad(tmp_path, snap(brokers={"1": {}}), "'brokers' must be a list")


@pytest.mark.parametrize("field,value,fragment", [
    ("topic", "", "expected a topic name"), ("topic", "a/b", "not a legal Kafka topic name"), ("topic", 5, "topic"),
    ("partition", -1, "outside"), ("partition", 1.0, "expected an integer"), ("partition", True, "expected an integer"),
    ("partition", 2**31, "outside"), ("replicas", [1, 2**31], "outside"), ("replicas", [1, -2], "outside"),
    ("replicas", [2, 2], "broker 2 twice"), ("replicas", [], "non-empty list"), ("replicas", {"1": 2}, "non-empty list"),
    ("replicas", [1, True], "expected an integer"), ("isr", [1, "2"], "isr"), ("isr", {}, "isr must be a list"),
    ("isr", [-1], "isr"),
    # Kafka keeps the isr within the replicas and the leader among them (-1: none): a stray
    # broker is refused by name, not read later as "no live in-sync replica".
    ("isr", [4242], "isr names broker 4242, which is not one of its replicas"),
    ("isr", [3, 1, 2], "isr names broker 2"), ("leader", 2, "leader 2 is not one of its replicas"),
    # Equal to the replica list [3, 1] (True == 1, 1.0 == 1) but not broker ids:
    ("isr", [3, True], "isr"), ("isr", [3, 1.0], "isr"),
    ("leader", -2, "leader"), ("leader", 1.0, "leader"), ("leader", False, "leader"),
    ("size", -1, "size"), ("size", 1e300, "size"), ("size", 2**53 + 1, "size"), ("size", "1", "size"),
    ("size", True, "size"), ("bytes_in", -0.5, "bytes_in"), ("bytes_out", "-1e999", "bytes_out"),
    ("bytes_out", [], "bytes_out"), ("bytes_out", "1e999", "bytes_out"),
])
def test_one_bad_field_among_many_partitions_is_named(tmp_path, field, value, fragment):
    parts = [{"topic": f"t{n % 7}", "partition": n, "replicas": [1 + n % 3, 1 + (n + 1) % 3], "size": n}
             for n in range(300)]
    parts[137][field] = value
    text = json.dumps(snap(partitions=parts))
    if value in ("1e999", "-1e999"):  # numbers JSON can spell but a float cannot hold: infinities
        text = text.replace(f'"{value}"', value)
    where = "partitions[137]" if field in ("topic", "partition") else "t4-137"
    bad(tmp_path, text, where, fragment)
    # The same document given as data (not JSON text): refused the same way.
    with pytest.raises(BadInput, match=f"{re.escape(where)}.*{re.escape(fragment)}"):
        cluster_from_snapshot(json.loads(text))


@pytest.mark.parametrize("field", ["size", "bytes_in", "bytes_out"])
def test_a_figure_that_is_not_a_number_given_as_data_is_refused(field):
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2]} for n in range(100)]
    parts[30][field] = float("nan")
    with pytest.raises(BadInput, match=f"t-30 {field}: expected a finite number"):
        cluster_from_snapshot(snap(partitions=parts))


def test_the_first_bad_partition_is_named(tmp_path):
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2]} for n in range(100)]
    parts[80]["replicas"] = [3, 3]
    parts[20]["size"] = -5
    bad(tmp_path, snap(partitions=parts), "t-20 size")


def test_a_broker_twice_among_lists_of_several_lengths_is_named(tmp_path):
    # Lists of one length are checked as the rows of one array, of several lengths length by length.
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2, 3][:1 + n % 3]} for n in range(100)]
    parts[50]["replicas"] = [3, 1, 3]
    bad(tmp_path, snap(partitions=parts), "t-50", "broker 3 twice")


def test_a_partition_listed_twice_among_many(tmp_path):
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2]} for n in range(100)]
    parts.append({"topic": "t", "partition": 42, "replicas": [2, 3]})
    bad(tmp_path, snap(partitions=parts), "t-42", "listed twice")


def test_a_partition_that_is_not_an_object_among_many(tmp_path):
    parts = [{"topic": "t", "partition": n, "replicas": [1, 2]} for n in range(100)]
    parts[60] = [1, 2]
    bad(tmp_path, snap(partitions=parts), "partitions[60]", "expected an object")


# -- plan text and plan loading -----------------------------------------------------------

def _plan(doc, after):
    c = cluster_from_snapshot(doc)
    return Plan(cluster=c, action="test", after=after, targets=c.live_ids)


def test_plan_text_lists_only_changes_and_is_deterministic(tmp_path):
    doc = snap(partitions=[{"topic": "t", "partition": n, "replicas": [1, 2, 3]} for n in range(4)])
    after = [[1, 2, 3], [4, 2, 3], [2, 1, 3], [1, 2, 3]]
    text = plan_text(_plan(doc, after))
    shuffled = dict(doc, partitions=list(reversed(doc["partitions"])))
    assert plan_text(_plan(shuffled, after)) == text  # input order does not matter
    assert plan_text(_plan(doc, after)) == text
    assert json.loads(text) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 1, "replicas": [4, 2, 3]},
        {"topic": "t", "partition": 2, "replicas": [2, 1, 3]},  # order-only: a leadership change
    ]}
    assert text.endswith("\n") and text.count("\n") == 4  # one partition per line


def test_plan_text_is_the_reassignment_json_per_line_whatever_the_lists_hold():
    # The replica lists are written in one piece and cut apart: lists of one, empty lists,
    # numpy ints and several replication factors side by side come out as json.dumps gives
    # each entry.
    import numpy as np
    doc = snap(partitions=[{"topic": t, "partition": n, "replicas": [1, 2, 3]} for t in ("a", "b.x") for n in range(3)])
    after = [[4], [], [np.int64(3), np.int32(2), 1], [1, 2, 3], [2, 1, 3, 4], []]
    plan = _plan(doc, after)
    entries = plan.reassignment()["partitions"]
    expected = [json.dumps({**e, "replicas": list(map(int, e["replicas"]))}, separators=(",", ":")) for e in entries]
    assert len(entries) == 5
    assert plan_text(plan) == '{"version":1,"partitions":[\n' + ",\n".join(expected) + "\n]}\n"


def test_plan_text_for_no_change():
    doc = snap()
    p = _plan(doc, [[1, 2, 3], [2, 3, 1]])
    assert plan_text(p) == '{"version":1,"partitions":[]}\n'


def test_plan_text_round_trips_through_load_plan(tmp_path):
    doc = snap()
    p = _plan(doc, [[4, 2, 3], [2, 3, 1]])
    path = tmp_path / "plan.json"
    write_atomic(str(path), plan_text(p))
    assert load_plan(str(path), p.cluster) == [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]


@pytest.mark.parametrize("entry,fragment", [
    ({"topic": "t", "partition": 0, "replicas": 4}, "replicas"),
    ({"topic": ["t"], "partition": 0, "replicas": [1]}, "topic"),
    ({"topic": "t", "partition": 0, "replicas": [1, 1]}, "twice"),
    ({"topic": "t", "partition": 9, "replicas": [1]}, "no partition t-9"),
    ({"topic": "t", "partition": 0, "replicas": [1, 77]}, "unknown broker 77"),
])
def test_load_plan_rejects_bad_entries(tmp_path, entry, fragment):
    c = cluster_from_snapshot(snap())
    path = write(tmp_path, {"version": 1, "partitions": [entry]}, "plan.json")
    with pytest.raises(BadInput, match=fragment):
        load_plan(path, c)


def test_load_plan_takes_log_dirs_of_any_as_no_preference(tmp_path):
    """Kafka's default for each replica: the plan is the same as without them."""
    path = write(tmp_path, {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [4, 2, 3], "log_dirs": ["any", "any", "any"]}]}, "plan.json")
    assert load_plan(path) == [{"topic": "t", "partition": 0, "replicas": [4, 2, 3]}]


@pytest.mark.parametrize("log_dirs, fragment", [
    (["any", "/data/kafka-2", "any"], r'log_dirs \(t-0\): "/data/kafka-2" for broker 2: kit cannot place a replica '
                                      r"in a log directory \(Kafka's tool does it with AlterReplicaLogDirs"),
    (["any", "any"], r"log_dirs \(t-0\): expected a list of one log directory \(or \"any\"\) per replica \(3\)"),
    ("any", "expected a list of one log directory"),
])
def test_load_plan_refuses_log_dirs_it_would_drop(tmp_path, log_dirs, fragment):
    """A replica's log directory is set by AlterReplicaLogDirs, which kit does not send (on
    either backend): refused, not dropped from the reassignment (it was, silently)."""
    path = write(tmp_path, {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [4, 2, 3], "log_dirs": log_dirs}]}, "plan.json")
    with pytest.raises(BadInput, match=fragment):
        load_plan(path)


# -- write_atomic -------------------------------------------------------------------------

def test_write_atomic_writes_and_replaces(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(str(path), "first\n")
    assert path.read_text() == "first\n"
    write_atomic(str(path), "second\n")
    assert path.read_text() == "second\n"
    assert os.listdir(tmp_path) == ["out.json"]  # no temporary file left behind


def test_write_atomic_leaves_the_old_file_on_failure(tmp_path):
    path = tmp_path / "out.json"
    path.write_text("old\n")
    with pytest.raises(TypeError):
        write_atomic(str(path), 123)  # type: ignore[arg-type]  # fails mid-write
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_atomic_uses_the_usual_file_mode(tmp_path):
    umask = os.umask(0o022)
    try:
        write_atomic(str(tmp_path / "out.json"), "x\n")
    finally:
        os.umask(umask)
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644


# -- read_input ---------------------------------------------------------------------------

@pytest.mark.parametrize("size,refused", [(0, False), (99, False), (100, False), (101, True), (5000, True)])
def test_read_input_takes_a_file_up_to_its_bound(tmp_path, size, refused):
    # The file's own size is read first, then whatever it holds past that size, up to the bound.
    path = tmp_path / "in.json"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    if refused:
        with pytest.raises(BadInput, match="larger than"):
            read_input(str(path), "snapshot", max_bytes=100)
    else:
        assert read_input(str(path), "snapshot", max_bytes=100) == path.read_bytes()


def test_read_input_reads_a_pipe_whole(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    data = b'{"version":1}' * 10000  # more than a pipe holds at once

    def write():
        with open(path, "wb") as f:
            f.write(data)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert read_input(str(path), "snapshot") == data
    finally:
        writer.join(timeout=60)
