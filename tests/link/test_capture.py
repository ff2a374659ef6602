"""ckcd-link's packet capture (--capture; docs/ckcd-link.md, "Packet capture") on real traffic between
two network namespaces (tests/link/linklab.py), read back with tshark (Debian 12's 4.0): one record
per event the daemon counts, cut to the snap length, timed so that a frame's dequeue less its
enqueue is its sojourn to the ns; off by default; the files it refuses, and the refused options.

The flood is iperf3's UDP at 60 Mbit/s into a 50 Mbit/s link with a 20-frame DropTail buffer, so the
queue stands and drops, as test_link_models.py floods its links. Counts are compared exactly: every
record is written before the daemon prints its final stats. The traffic tests need root, iperf3 and
tshark, and hold the lab lock for the module (the lab and daemon_factory fixtures: conftest.py); the
refused options need only the built daemon.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter, defaultdict, deque
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from experiments.analysis.capture import read_capture, sojourns  # noqa: E402
from ovs_config.link_daemon import DEFAULT_BINARY, LinkDaemonError  # noqa: E402
from test_link_daemon import INJECT  # noqa: E402  (raw frames of a given size from host A)
from test_link_models import FRAME, udp_flood  # noqa: E402
from tests.waiting import eventually  # noqa: E402

SNAPLEN = 128
built = pytest.mark.skipif(not DEFAULT_BINARY.exists(), reason="datapath/build/ckcd-link not built (make -C datapath)")
lab_only = [
    pytest.mark.lab,  # needs root: ckcd-link on veths in network namespaces
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    built,
]


def tshark(*args: str) -> str:
    p = subprocess.run(["tshark", *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def epoch_ns(text: str) -> int:
    """frame.time_epoch ("1795802788.534532756") as integer ns, without a float's rounding."""
    sec, _, frac = text.partition(".")
    return int(sec) * 10**9 + int(frac.ljust(9, "0")[:9])


def tshark_records(path: Path) -> list[dict]:
    """Every record as tshark reads it, in the file's order: interface name, time in ns, captured
    and original length, comment, and the captured bytes (a second pass: -T fields cannot give
    them, the EK output's frame_raw can)."""
    rows = tshark("-r", str(path), "-T", "fields", "-E", "separator=\t", "-E", "occurrence=f",
                  "-e", "frame.interface_name", "-e", "frame.time_epoch", "-e", "frame.cap_len",
                  "-e", "frame.len", "-e", "frame.comment").splitlines()
    raws = [json.loads(line)["layers"]["frame_raw"]
            for line in tshark("-r", str(path), "-T", "ek", "-x", "-j", "frame").splitlines()
            if line.startswith('{"timestamp"')]
    assert len(raws) == len(rows), (len(raws), len(rows))
    recs = []
    for row, raw in zip(rows, raws):
        name, t, caplen, length, comment = (row.split("\t") + [""] * 5)[:5]
        recs.append({"if": name, "t_ns": epoch_ns(t), "caplen": int(caplen), "len": int(length),
                     "comment": comment, "data": raw})
    return recs


def words(comment: str) -> dict:
    return dict(w.split("=", 1) for w in comment.split() if "=" in w)


def open_files(pid: int) -> set:
    """The regular files a process holds open."""
    fds = Path(f"/proc/{pid}/fd")
    return {t for t in (os.readlink(fd) for fd in fds.iterdir()) if t.startswith("/") and not t.startswith("/dev/")}


def thread_names(pid: int) -> set:
    return {(t / "comm").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir()}


def lab_test(fn):
    for mark in lab_only:
        fn = mark(fn)
    return fn


@lab_test
def test_capture_records_each_event_the_daemon_counts(lab, daemon_factory, tmp_path):
    """Rule: one record per counted event. Per direction, tshark's count of `<dir>.enqueue`
    records is the queue's enq_pkts, of `<dir>.drop` its drops (by reason, as the comments say),
    of `<dir>.dequeue` its deq_pkts and of `<dir>.lost` the loss model's `lost`; the capture's own
    counts in the final stats agree, with nothing skipped, overrun or failed, and the file's size
    is its `bytes`. Every record is cut to the snap length while frame.len is the frame's (1442
    bytes for the flood's). Every dequeue, matched to the first unmatched enqueue of the same
    captured bytes, is its sojourn_ns comment after it, to the ns. While it runs the daemon has its
    writer thread and holds the file (what the off-by-default test checks is absent). The reader
    (experiments/analysis/capture.py) reads the same records and the same sojourns."""
    path = tmp_path / "flood.pcapng"
    d = daemon_factory(qdisc="droptail limit=20", loss="bernoulli p=0.01", seed=5, capture=str(path),
                       snaplen=SNAPLEN, capture_max_mb=64)
    assert d.show()["capture"] == {"file": str(path), "snaplen": SNAPLEN, "max_mb": 64}
    udp_flood(lab, 60e6, 3).wait(timeout=30)
    assert "ckcd-capture" in thread_names(d.pid) and str(path) in open_files(d.pid)
    st = d.stop()
    cap, recs = st["capture"], tshark_records(path)
    counts = Counter(r["if"] for r in recs)
    for name, dst in st["dirs"].items():
        want = {"enqueue": dst["queue"]["enq_pkts"], "drop": sum(dst["drops"].values()),
                "dequeue": dst["queue"]["deq_pkts"], "lost": dst["lost"], "mark": 0, "discard": 0}
        assert {ev: counts[f"{name}.{ev}"] for ev in want} == want, (name, counts)
        assert cap["records"][name] == want, cap
        reasons = Counter(words(r["comment"])["reason"] for r in recs if r["if"] == f"{name}.drop")
        assert reasons == {k: v for k, v in dst["drops"].items() if v}, reasons
    ab = st["dirs"]["ab"]
    assert ab["drops"]["overflow"] > 100 and ab["lost"] > 10 and ab["sojourn_us"]["max"] > 1000, ab
    assert (cap["skipped"], cap["overrun"], cap["failed"], cap["error"]) == (0, 0, 0, None)
    assert cap["bytes"] == path.stat().st_size
    assert all(r["caplen"] == min(r["len"], SNAPLEN) for r in recs)
    assert max(r["len"] for r in recs) == FRAME and len(bytes.fromhex(recs[-1]["data"])) == recs[-1]["caplen"]

    queued, checked = defaultdict(deque), 0
    for r in recs:
        if r["if"] == "ab.enqueue":
            queued[r["data"]].append(r["t_ns"])
        elif r["if"] == "ab.dequeue":
            assert r["t_ns"] - queued[r["data"]].popleft() == int(words(r["comment"])["sojourn_ns"]), r
            checked += 1
    assert checked == ab["queue"]["deq_pkts"]

    ours = list(read_capture(path))
    assert Counter(f"{r.direction}.{r.event}" for r in ours) == counts
    soj = sojourns(ours)["ab"]
    assert len(soj.packets) == checked and soj.unmatched_dequeues == 0 and soj.still_queued == ab["qlen_pkts"]
    assert all(p.sojourn_ns == p.reported_ns for p in soj.packets)


@lab_test
def test_capture_is_off_by_default(lab, daemon_factory):
    """Rule: without --capture nothing is captured: no writer thread, no file open but the daemon's
    own stdout and stderr while frames pass, `capture` null in show and absent from the stats."""
    d = daemon_factory(qdisc="droptail limit=20")
    flood = udp_flood(lab, 20e6, 2)
    eventually(lambda: d.stats()["dirs"]["ab"]["queue"]["deq_pkts"] > 100, timeout_s=5, what="frames passing")
    assert "ckcd-capture" not in thread_names(d.pid)
    assert open_files(d.pid) == {d.stdout_path, d.stderr_path}
    assert d.show()["capture"] is None and "capture" not in d.stats()
    flood.wait(timeout=30)
    assert "capture" not in d.stop()


@lab_test
def test_frames_discarded_before_the_queue_are_captured_with_their_reason(lab, daemon_factory, tmp_path):
    """Rule: a frame discarded before the queue is an `ab.discard` record whose reason is the counter
    it is in: five 1200-byte frames over --mtu 1000 are five `reason=rx_oversize` records of
    frame.len 1200 cut to the snap length, as many as `rx_oversize`; the three of exactly the MTU
    pass, each an enqueue and a dequeue record."""
    path = tmp_path / "oversize.pcapng"
    d = daemon_factory(qdisc="droptail limit=100", mtu=1000, capture=str(path), snaplen=64)
    lab.ns(lab.ns_a, sys.executable, "-c", INJECT, lab.if_ha, "5", "1200")
    lab.ns(lab.ns_a, sys.executable, "-c", INJECT, lab.if_ha, "3", "1014")
    eventually(lambda: d.stats()["dirs"]["ab"]["rx_oversize"] >= 5, timeout_s=5, what="the oversize frames")
    st = d.stop()
    recs = [r for r in tshark_records(path) if r["data"][24:28] == "88b5"]  # the injected frames' ethertype
    discards = [r for r in recs if r["if"] == "ab.discard"]
    assert st["dirs"]["ab"]["rx_oversize"] == len(discards) == 5
    assert all((r["comment"], r["len"], r["caplen"]) == ("reason=rx_oversize", 1200, 64) for r in discards)
    assert Counter(r["if"] for r in recs if r["len"] == 1014) == {"ab.enqueue": 3, "ab.dequeue": 3}
    assert st["capture"]["records"]["ab"]["discard"] == 5


@lab_test
def test_an_existing_file_or_a_link_is_refused(lab, daemon_factory, tmp_path):
    """Rule: the daemon runs as root and never overwrites or follows: an existing file is refused at
    start (exit 2, naming --capture) and keeps its bytes; so is a symbolic link, even to a file that
    does not exist, which is not created."""
    old = tmp_path / "old.pcapng"
    old.write_bytes(b"precious")
    with pytest.raises(LinkDaemonError) as e:
        daemon_factory(capture=str(old))
    assert (e.value.exit_code, e.value.param) == (2, "capture") and "already exists" in str(e.value)
    assert old.read_bytes() == b"precious"
    link, target = tmp_path / "link.pcapng", tmp_path / "target"
    link.symlink_to(target)
    with pytest.raises(LinkDaemonError) as e:
        daemon_factory(capture=str(link))
    assert (e.value.exit_code, e.value.param) == (2, "capture") and not target.exists()


BAD_OPTIONS = [
    (["--snaplen", "63"], "snaplen", "63 is out of range (64..65535)"),
    (["--snaplen", "65536"], "snaplen", "65536 is out of range (64..65535)"),
    (["--snaplen", "128k"], "snaplen", "'128k' is not a number"),
    (["--capture-max-mb", "0"], "capture-max-mb", "0 is out of range (1..1048576)"),
    (["--capture-max-mb", "1048577"], "capture-max-mb", "1048577 is out of range (1..1048576)"),
]


@built
@pytest.mark.parametrize("args,param,message", BAD_OPTIONS, ids=[" ".join(a) for a, _, _ in BAD_OPTIONS])
def test_bad_capture_options_are_refused_naming_them(tmp_path, args, param, message):
    """Rule: a snap length outside 64..65535 or a size limit outside 1..1048576 MiB is refused before
    anything starts (exit 2), the message naming the option and the range, and no file is made."""
    path = tmp_path / "never.pcapng"
    p = subprocess.run([str(DEFAULT_BINARY), "--if-a", "lo", "--if-b", "ckcd-none0", "--rate", "50mbit",
                        "--capture", str(path), *args], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert f"ckcd-link: --{param}: {message}" in p.stderr, p.stderr
    assert not path.exists()


@built
@pytest.mark.parametrize("option", ["--snaplen", "--capture-max-mb"])
def test_capture_options_without_a_capture_are_refused(option):
    """Rule: --snaplen or --capture-max-mb without --capture is refused (exit 2, naming it), not
    silently unused: it would look like a capture that is not there."""
    p = subprocess.run([str(DEFAULT_BINARY), "--if-a", "lo", "--if-b", "ckcd-none0", "--rate", "50mbit",
                        option, "100"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 2 and f"ckcd-link: {option}: only with --capture FILE" in p.stderr, p.stderr

