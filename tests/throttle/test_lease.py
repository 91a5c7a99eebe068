"""The auto-throttle's lease as a record and its rules (kit/throttle/lease.py), without a cluster."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from kit.pids import alive
from kit.throttle.lease import MARKER_PREFIX, MIN_TTL, Lease, holder_gone, lapsed, refusal, this_place, ttl_for

NOW = 1_795_000_000.0  # 2026-11-18T11:06:40Z
OTHER = Lease("broker-host-7", 4242, "2026-11-28T05:20:01Z", "feedfacecafe", "0badc0de")


def test_a_lease_names_host_pid_and_start_and_nothing_else():
    mine = Lease.mine(NOW)
    assert (mine.pid, mine.place, mine.since) == (os.getpid(), this_place(), "2026-11-18T11:06:40Z")
    assert "/" not in mine.host and mine.expires is None and len(mine.token) == 8
    assert set(json.loads(mine.to_json())) == {"host", "pid", "since", "place", "token"}
    renewed = mine.renewed(90, NOW)
    assert renewed.expires == "2026-11-18T11:08:10Z" and renewed.same_holder(mine)
    assert set(json.loads(renewed.to_json())) == {"host", "pid", "since", "place", "token", "expires"}


@pytest.mark.parametrize("lease", [OTHER, dataclasses.replace(OTHER, expires="2026-11-28T05:22:01Z")])
def test_a_lease_comes_back_whole_from_its_znode_body_and_its_marker(lease):
    assert Lease.from_json(lease.to_json()) == lease
    name = lease.marker()
    assert name.startswith(MARKER_PREFIX) and Lease.from_marker(name) == lease
    assert name == (MARKER_PREFIX + "broker-host-7/4242/2026-11-28T05:20:01Z/"
                    + (lease.expires or "-") + "/feedfacecafe/0badc0de")


@pytest.mark.parametrize("name", ["leader.replication.throttled.rate", MARKER_PREFIX, MARKER_PREFIX + "h/1/x/-/p/t",
                                  MARKER_PREFIX + "h/one/2026-11-28T05:20:01Z/-/p/t",
                                  MARKER_PREFIX + "h/1/2026-11-28T05:20:01Z/-/p/t/extra",
                                  MARKER_PREFIX + "/1/2026-11-28T05:20:01Z/-/p/t"])
def test_a_config_name_that_is_no_marker_is_no_lease(name):
    assert Lease.from_marker(name) is None


@pytest.mark.parametrize("raw", [b"", b"{}", b"[1]", b"\xff", b'{"host": "h", "pid": true, "since": '
                                 b'"2026-11-28T05:20:01Z", "place": "p", "token": "t"}'])
def test_a_znode_body_that_is_no_lease_is_none(raw):
    assert Lease.from_json(raw) is None


def test_the_earlier_lease_holds_and_every_asker_orders_alike():
    later = dataclasses.replace(OTHER, since="2026-11-28T05:20:02Z", token="00000000")
    assert OTHER.precedes(later) and not later.precedes(OTHER)
    twin = dataclasses.replace(OTHER, token="ffffffff")  # same second, same process: the token decides
    assert OTHER.precedes(twin) != twin.precedes(OTHER)
    assert min([later, twin, OTHER], key=Lease.rank) == OTHER


def test_a_holder_is_gone_once_its_lease_expired_or_its_process_here_ended():
    expiring = dataclasses.replace(OTHER, expires="2026-11-28T05:21:31Z")
    at = Lease.from_marker(expiring.marker())
    t = 1_795_843_291.0  # 2026-11-28T05:21:31Z
    assert not holder_gone(at, t - 1, place="elsewhere", alive=lambda pid: True)
    assert holder_gone(at, t, place="elsewhere", alive=lambda pid: True)
    # No expiry (ZooKeeper's ephemeral znode): its pid decides, and only from its own place.
    assert not holder_gone(OTHER, t + 1e6, place="elsewhere", alive=lambda pid: False)
    assert holder_gone(OTHER, t, place=OTHER.place, alive=lambda pid: False)
    assert not holder_gone(OTHER, t, place=OTHER.place, alive=lambda pid: True)


def test_pid_alive_tells_a_running_process_from_an_ended_one():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=120)
    assert alive(os.getpid()) and not alive(child.pid)


def test_the_refusal_names_the_holder_and_what_ends_it():
    said = refusal(OTHER)
    assert said == ("another auto-throttle holds this cluster: host broker-host-7, pid 4242, since "
                    "2026-11-28T05:20:01Z (kit throttle run); stop it first (on broker-host-7: kill -TERM 4242); "
                    "nothing was changed")
    with_expiry = refusal(dataclasses.replace(OTHER, expires="2026-11-28T05:21:31Z"))
    assert "or wait until its lease expires (2026-11-28T05:21:31Z)" in with_expiry
    assert "host broker-host-7, pid 4242, since 2026-11-28T05:20:01Z" in lapsed(OTHER)


def test_a_lease_outlives_several_rounds_and_at_least_a_minute():
    assert ttl_for(0.5) == MIN_TTL and ttl_for(30) == 120


def test_a_marker_is_rewritten_only_when_half_its_life_is_gone():
    mine = Lease.mine(NOW)
    assert mine.due(120, NOW)
    renewed = mine.renewed(120, NOW)
    assert not renewed.due(120, NOW + 59) and renewed.due(120, NOW + 61)
