"""ckcd-link's packet capture in a run (`[link] capture = true`): each emulated link writes
capture-<link>.pcapng into the run's directory, a record of every event a frame meets (enqueue,
drop, mark, dequeue, loss; its first capture_snaplen bytes; docs/ckcd-link.md, "Packet capture"),
and the run record keeps what the report needs of it: the events per direction, and the forward
frames' sojourns measured from the capture itself (each dequeue matched to its enqueue,
experiments/analysis/capture.py) over the measurement window, beside ckcd-link's own numbers.
The file stays in the run's directory for tshark and Wireshark (and, one event's records written
as classic pcap by tshark, for tcptrace: docs/experiments.md); it is read once, as a
stream (a 60 s run at 50 Mbit/s holds about a million records)."""

from __future__ import annotations

import os

from experiments.analysis.capture import DIRECTIONS, EVENTS, CaptureError, read_capture, sojourns
from experiments.analysis.stats import percentile


def capture_file(link: str) -> str:
    return f"capture-{link}.pcapng"


def capture_options(link_model, run_dir: str, link: str) -> dict:
    """LinkDaemon's keywords for the link's capture, none when the scenario asks for none."""
    if not link_model.capture:
        return {}
    return {"capture": os.path.join(run_dir, capture_file(link)), "snaplen": link_model.capture_snaplen}


def capture_record(run_dir: str, link: str, wall0: float, window: tuple[float, float]) -> dict:
    """Events per direction and the forward frames' sojourn (ms: mean, p50, p95, p99, n) over
    the window, in seconds since the run's t0 (wall0 on the wall clock, the capture's time). A
    file that breaks off (a daemon killed while writing) gives what precedes the break, with
    the break as `error`; one that cannot be read at all gives only the error."""
    events = {d: {e: 0 for e in EVENTS} for d in DIRECTIONS}
    broken: list[str] = []

    def counted(records):
        try:
            for rec in records:
                events[rec.direction][rec.event] += 1
                yield rec
        except CaptureError as err:
            broken.append(str(err))
    try:
        ab = sojourns(counted(read_capture(os.path.join(run_dir, capture_file(link)))))["ab"]
    except OSError as err:
        return {"file": capture_file(link), "error": str(err)}
    if broken and not any(n for d in events.values() for n in d.values()):
        return {"file": capture_file(link), "error": broken[0]}
    w0, w1 = window
    ms = [p.sojourn_ns / 1e6 for p in ab.packets if w0 <= p.dequeue_ns / 1e9 - wall0 <= w1]
    return {"file": capture_file(link), "error": broken[0] if broken else None, "events": events,
            "unmatched_dequeues": ab.unmatched_dequeues,
            "sojourn_ms": {"mean": sum(ms) / len(ms) if ms else None, "n": len(ms),
                           **{f"p{q}": percentile(ms, q) if ms else None for q in (50, 95, 99)}}}
