"""Hedged Cassandra reads without a cluster: the hedge delay follows the reads' latencies, and a
replica that lost a hedge (another answered first) is asked last for a while, then first again.
tests/hosts/test_cassandra_hosts.py runs them against a 3-node cluster with a node cut off."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stoker.storage.remote._cassandra_connection import QuietReplicas, ReadLatencies

pytest.importorskip("cassandra")


def test_the_hedge_delay_is_three_medians_of_the_last_reads_above_a_floor() -> None:
    latencies = ReadLatencies(floor=0.05)
    assert latencies.delay() == 1.0, "no read answered yet: wait a second before a copy"
    for seconds in (0.02, 0.03, 0.04):
        latencies.add(seconds)
    assert latencies.delay() == pytest.approx(0.09)
    for _ in range(64):
        latencies.add(0.001)
    assert latencies.delay() == 0.05, "the floor, and only the last 64 reads count"


def hosts() -> list:
    from cassandra.connection import DefaultEndPoint
    from cassandra.policies import SimpleConvictionPolicy
    from cassandra.pool import Host

    return [Host(DefaultEndPoint(f"10.0.0.{number}"), SimpleConvictionPolicy, datacenter=None, rack=None) for number in (1, 2, 3)]


def test_a_replica_that_lost_a_hedge_is_asked_last_until_its_time_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("stoker.storage.remote._cassandra_connection.time.monotonic", lambda: now[0])
    first, second, third = hosts()
    quiet = QuietReplicas(seconds=5.0)
    policy = quiet.policy()
    policy.populate(
        SimpleNamespace(metadata=None, control_connection=None, endpoints_resolved=[host.endpoint for host in (first, second, third)]),
        [first, second, third],
    )
    quiet.answered(SimpleNamespace(attempted_hosts=[first], coordinator_host=first))
    assert quiet.demotions == 0 and not quiet.is_quiet(first), "the first replica answered: nothing to learn"
    plans = [list(policy.make_query_plan()) for _ in range(3)]
    quiet.answered(SimpleNamespace(attempted_hosts=[second, third], coordinator_host=third))
    assert quiet.is_quiet(second) and not quiet.is_quiet(third)
    for _ in range(3):
        plan = list(policy.make_query_plan())
        assert sorted(map(id, plan)) == sorted(map(id, plans[0])), "every replica still in the plan"
        assert plan[-1] is second, "the quiet one last"
    now[0] += 5.1
    assert not quiet.is_quiet(second)
    assert any(list(policy.make_query_plan())[0] is second for _ in range(3)), "asked first again in its turn"
