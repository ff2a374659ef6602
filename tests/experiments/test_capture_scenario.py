"""The scenario's packet capture keys and what the runner gives ckcd-link for them, without a lab
(the lab test is test_capture_lab.py)."""

import pytest

from experiments.run.probes.capture import capture_options, capture_record
from experiments.scenario.catalog import parse_scenario
from experiments.scenario.model import ScenarioError
from tests.experiments.test_capture_reader import FRAME, epb, header, ifid

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["droptail"],
        "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}]}
LINK = {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80}


def link(**over):
    return parse_scenario({**BASE, "link": {**LINK, **over}}, "t.toml").link


def test_capture_is_off_by_default_and_its_snap_length_is_checked():
    """Rule: no capture unless asked; capture_snaplen 64..65535 and only with capture, refused
    naming the key."""
    assert capture_options(link(), "/r", "l0") == {}
    assert capture_options(link(capture=True), "/r", "l0") == {"capture": "/r/capture-l0.pcapng", "snaplen": 128}
    assert capture_options(link(capture=True, capture_snaplen=200), "/r", "l0")["snaplen"] == 200
    for over in ({"capture_snaplen": 100}, {"capture": True, "capture_snaplen": 63},
                 {"capture": True, "capture_snaplen": 65536}):
        with pytest.raises(ScenarioError, match="link.capture_snaplen"):
            link(**over)


def test_a_missing_or_malformed_capture_is_an_error_in_the_record_not_a_failed_run(tmp_path):
    """Rule: a capture that cannot be read leaves its reason in the link's record."""
    assert "No such file" in capture_record(str(tmp_path), "l0", 0.0, (0.0, 10.0))["error"]
    (tmp_path / "capture-l0.pcapng").write_bytes(b"\x00" * 64)
    assert capture_record(str(tmp_path), "l0", 0.0, (0.0, 10.0))["error"]


def test_the_sojourns_come_from_the_capture_in_the_window_and_a_broken_tail_keeps_what_precedes_it(tmp_path):
    """Rule: each forward dequeue matched to its enqueue gives one sojourn, counted when its
    dequeue falls in the window (seconds since wall0); events are counted per direction; a file
    that breaks off mid-block (a daemon killed while writing) keeps the records before the break
    and names the break as the error."""
    wall0 = 1_000.0
    frames = [FRAME[:-1] + bytes([k]) for k in range(3)]
    t = int(wall0 * 1e9)
    body = header() + b"".join(
        epb(ifid("ab.enqueue"), t + k * 10**9, f) + epb(ifid("ab.dequeue"), t + k * 10**9 + (k + 1) * 2_000_000, f)
        for k, f in enumerate(frames)) + epb(ifid("ab.drop"), t + 5, FRAME, comment="reason=overflow")
    path = tmp_path / "capture-l0.pcapng"
    path.write_bytes(body)
    rec = capture_record(str(tmp_path), "l0", wall0, (0.5, 10.0))  # the first dequeue (0.002 s) is outside
    assert rec["error"] is None and rec["events"]["ab"]["drop"] == 1 and rec["events"]["ab"]["dequeue"] == 3
    assert rec["sojourn_ms"]["n"] == 2 and rec["sojourn_ms"]["mean"] == pytest.approx(5.0)
    path.write_bytes(body[:-7])  # the last block cut short
    broken = capture_record(str(tmp_path), "l0", wall0, (0.5, 10.0))
    assert broken["error"] and broken["events"]["ab"]["dequeue"] == 3 and broken["sojourn_ms"]["n"] == 2
