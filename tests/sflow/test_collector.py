"""coex.sflow_collector: the pure handle_datagram(), its counters and subscribers."""

from __future__ import annotations

import sflowgen as g
from coex.sflow import FlowKey
from coex.sflow_collector import SFlowCollector

REAL = g.captured()


def test_counts_samples_by_type_and_hands_them_out():
    col = SFlowCollector()
    flows, counters, dgs = [], [], []
    col.subscribe_flow_samples(lambda s, dg, now: flows.append((s.flow_key(), now)))
    col.subscribe_counter_samples(lambda s, dg, now: counters.append(s.source_id_index))
    col.subscribe_datagrams(lambda dg, now: dgs.append(dg.sequence_number))
    for i, d in enumerate(REAL):
        assert col.handle_datagram(d, 10.0 + i, "127.0.0.1") is not None
    st = col.stats()
    assert st["datagrams_ok"] == 6 and st["datagrams_malformed"] == 0
    assert st["samples_by_type"] == {"flow_sample": 24, "flow_sample_expanded": 0,
                                     "counters_sample": 11, "counters_sample_expanded": 0,
                                     "unknown": 0}
    assert st["bytes"] == sum(map(len, REAL))
    assert len(flows) == 24 and len(counters) == 11 and dgs == [1, 2, 3, 4, 6, 7]
    assert (FlowKey("10.0.0.1", "10.0.0.3", 6, 55284, 5201), 15.0) in flows
    # datagram 5 never reached the fixtures: one lost in the sequence
    assert st["agents"] == {"127.0.0.1/0": {"datagrams": 6, "last_sequence": 7, "lost": 1,
                                            "restarts": 0}}


def test_malformed_counted_by_reason_and_never_raised():
    col = SFlowCollector()
    assert col.handle_datagram(b"", 0.0) is None
    assert col.handle_datagram(REAL[0][:-3], 0.0) is None
    assert col.handle_datagram(g.datagram([], version=2), 0.0) is None
    assert col.handle_datagram(REAL[0] + b"\0" * 4, 0.0) is None
    assert col.handle_datagram(None, 0.0) is None
    st = col.stats()
    assert st["datagrams_malformed"] == 5 and st["datagrams_ok"] == 0
    assert st["malformed_by_reason"]["truncated"] == 3
    assert st["malformed_by_reason"]["unsupported_version"] == 1
    assert st["malformed_by_reason"]["trailing_bytes"] == 1


def test_a_failing_subscriber_is_counted_and_the_others_still_run():
    col = SFlowCollector()
    got = []
    col.subscribe_flow_samples(lambda s, dg, now: 1 / 0)
    col.subscribe_flow_samples(lambda s, dg, now: got.append(s))
    col.handle_datagram(REAL[-1], 1.0)
    assert len(got) == 6
    assert col.stats()["subscriber_errors"] == 6


def test_agent_restart_is_not_counted_as_loss():
    col = SFlowCollector()
    for seq in (10, 11, 1, 2, 5):
        col.handle_datagram(g.datagram([], seq=seq), 0.0)
    agent = col.stats()["agents"]["192.0.2.1/0"]
    assert agent == {"datagrams": 5, "last_sequence": 5, "lost": 2, "restarts": 1}


def test_reset_stats():
    col = SFlowCollector()
    col.handle_datagram(REAL[0], 0.0)
    col.reset_stats()
    assert col.stats()["datagrams_ok"] == 0 and col.stats()["agents"] == {}


def test_collection_start_is_the_previous_datagram_of_the_same_agent_if_recent():
    """An agent fills one datagram at a time and sends what it holds at least once a second
    (OVS's receiver tick), so a datagram's samples were taken after the previous datagram
    of the same agent and sub-agent; that bounds them only if it came within
    MAX_BATCH_DELAY_S, else (a quiet agent) the start is not known."""
    from coex.sflow_collector import MAX_BATCH_DELAY_S
    col = SFlowCollector()
    seen = []
    col.subscribe_flow_samples(lambda s, dg, now: seen.append((now, col.collection_start(dg))))
    def dg(agent, seq):
        frame = g.ethernet(g.ipv4(g.tcp()))
        return g.datagram([g.flow_sample([g.sampled_header(frame)])], agent=agent, seq=seq)

    a1, a2, b1, a3 = dg("10.0.0.1", 1), dg("10.0.0.1", 2), dg("10.0.0.2", 1), dg("10.0.0.1", 3)
    col.handle_datagram(a1, 10.0)
    col.handle_datagram(a2, 10.3)
    col.handle_datagram(b1, 10.4)   # another agent: its own batches
    col.handle_datagram(a3, 10.3 + MAX_BATCH_DELAY_S)   # quiet for a tick: not known
    assert seen == [(10.0, None), (10.3, 10.0), (10.4, None), (10.3 + MAX_BATCH_DELAY_S, None)]
