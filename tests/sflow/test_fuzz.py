"""Property tests: whatever bytes arrive, the decoder raises nothing but SFlowDecodeError and
the collector counts and carries on. Inputs are the real OVS datagrams mutated, truncated and
spliced, plus arbitrary bytes."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sflowgen as g
from coex.sflow import REASONS, SFlowDecodeError, decode_datagram
from coex.sflow_collector import SFlowCollector

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "sflow")
REAL = [open(os.path.join(FIXTURES, n), "rb").read()
        for n in sorted(os.listdir(FIXTURES)) if n.endswith(".bin")]
SYNTH = [g.datagram([g.flow_sample([g.sampled_header(g.ethernet(g.ipv4(g.tcp())), 1518),
                                    g.sampled_ipv6("2001:db8::1", "2001:db8::2", 6, 1, 2)],
                                   expanded=True),
                     g.counters_sample([g.if_counters()], expanded=True)], agent="2001:db8::9")]
SEEDS = REAL + SYNTH


def decode_or_reason(data: bytes):
    try:
        return decode_datagram(data)
    except SFlowDecodeError as err:
        assert err.reason in REASONS
        return err.reason


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "u32", "truncate", "insert", "delete"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "u32":  # overwrite an aligned word: lengths, counts, formats
            i &= ~3
            data[i:i + 4] = draw(st.sampled_from(
                [b"\0\0\0\0", b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\0\0\0\x01",
                 b"\0\0\x10\0", b"\0\0\0\x03"]))
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[i:i + draw(st.integers(1, 16))]
    return bytes(data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_datagrams_only_raise_the_typed_error(data):
    decode_or_reason(data)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_only_raise_the_typed_error(data):
    decode_or_reason(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SEEDS), st.data())
def test_every_truncation_is_rejected(seed, data):
    cut = data.draw(st.integers(0, len(seed) - 1))
    assert isinstance(decode_or_reason(seed[:cut]), str)


@settings(max_examples=300, deadline=None)
@given(st.lists(mutated(), min_size=1, max_size=20))
def test_collector_counts_and_skips(datagrams):
    col = SFlowCollector()
    seen = []
    col.subscribe_flow_samples(lambda s, dg, now: seen.append(s))
    ok = 0
    for i, d in enumerate(datagrams + REAL):
        if col.handle_datagram(d, float(i)) is not None:
            ok += 1
    st_ = col.stats()
    assert st_["datagrams_ok"] == ok
    assert st_["datagrams_ok"] + st_["datagrams_malformed"] == len(datagrams) + len(REAL)
    assert sum(st_["malformed_by_reason"].values()) == st_["datagrams_malformed"]
    assert st_["malformed_by_reason"].get("internal_error", 0) == 0
    assert ok >= len(REAL)  # the real ones after the garbage still decode
