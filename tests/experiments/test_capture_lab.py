"""A run with ckcd-link's packet capture (`[link] capture = true`) in the real lab (private OVS,
ryu-manager, Mininet, ckcd-link, iperf3): the capture is written into the run's directory,
tshark reads it with the run's own drop count, and the sojourns measured from it are the link's."""

import re
import subprocess

import pytest

from experiments.run.orchestrate import run_batch
from experiments.scenario.catalog import parse_scenario

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link

# Two CUBIC flows into a 20-packet DropTail buffer: the queue stands and drops all run long.
SCENARIO = {"name": "capture_lab", "topology": "dumbbell", "duration_s": 10, "warmup_s": 2,
            "disciplines": ["droptail"], "link": {"rate_mbps": 20, "delay_ms": 5, "buffer_pkts": 20,
                                                  "capture": True, "capture_snaplen": 96},
            "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}, {"src": "h2", "dst": "h4", "cc": "cubic"}]}


@pytest.fixture(scope="module")
def run(private_ovs, tmp_path_factory):
    out = tmp_path_factory.mktemp("capture")
    [record] = run_batch([parse_scenario(SCENARIO, "test")], str(out))
    assert record["error"] is None, record["error"]
    [run_dir] = list(out.glob("runs/capture_lab/droptail/rep1"))
    return record, run_dir


def test_tshark_reads_the_runs_capture_with_the_runs_drop_count(run):
    """Rule: every drop ckcd-link counted in the forward direction over the run is one ab.drop
    record tshark reads from capture-l0.pcapng, and no record is longer than the snap length.
    Exact: the daemon writes every record before it reports its final counters."""
    record, run_dir = run
    path = run_dir / "capture-l0.pcapng"
    drops = sum(record["links"]["l0"]["final"]["dirs"]["ab"]["drops"].values())
    assert drops > 0, "the 20-packet buffer should have dropped"
    names = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.interface_name",
                            "-e", "frame.cap_len"], capture_output=True, text=True, timeout=300, check=True)
    rows = [line.split("\t") for line in names.stdout.splitlines()]
    assert sum(1 for name, _ in rows if name == "ab.drop") == drops
    assert max(int(caplen) for _, caplen in rows) <= 96
    assert record["links"]["l0"]["capture"]["events"]["ab"]["drop"] == drops
    # one event's records as classic pcap, for the readers of that format only (tcptrace)
    dequeues = run_dir / "ab-dequeue.pcap"
    subprocess.run(["tshark", "-r", str(path), "-Y", 'frame.interface_name == "ab.dequeue"', "-F", "pcap",
                    "-w", str(dequeues)], capture_output=True, timeout=300, check=True)
    magic = dequeues.read_bytes()[:4].hex()
    assert magic in ("a1b2c3d4", "d4c3b2a1", "a1b23c4d", "4d3cb2a1"), magic  # classic pcap, us or ns stamps
    info = subprocess.run(["capinfos", "-c", "-M", str(dequeues)], capture_output=True, text=True, check=True)
    [count] = re.findall(r"Number of packets:\s+(\d+)", info.stdout)
    assert int(count) == record["links"]["l0"]["capture"]["events"]["ab"]["dequeue"]


def test_the_sojourn_measured_from_the_capture_is_the_links_own(run):
    """Rule: each forward frame's dequeue less its enqueue, from the capture, gives the window's
    mean sojourn ckcd-link itself logged. Tolerance: 5 % or 0.2 ms (the log's 100 ms rows and
    the capture's frames cover the window's edges differently)."""
    record, _ = run
    cap = record["metrics"]["capture"]["l0"]
    assert cap["error"] is None and cap["sojourn_ms"]["n"] > 1000
    own = record["metrics"]["queue_delay_ms"]["mean"]
    assert cap["sojourn_ms"]["mean"] == pytest.approx(own, rel=0.05, abs=0.2)
