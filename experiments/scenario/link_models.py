"""The scenario side of ckcd-link's link models (docs/ckcd-link.md, "Traces and loss"): a trace named
in a scenario is found in experiments/traces/ and read as ckcd-link reads it (its average is the
link's rate for everything that needs one: the disciplines, utilization, the controller's
capacity), and a loss spec is checked as ckcd-link checks it, so a scenario is refused whole before
a lab starts.

Only names: a scenario's `trace = "onoff"` is experiments/traces/onoff.trace, never a path it
chooses (the lab runs as root). Put a public Mahimahi trace there (`name.trace`) to use it.
"""

from __future__ import annotations

import os
import re

from experiments.names import named_file

TRACES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces")
# as datapath/link/trace.h
OPP_BYTES = 1504
MAX_OPPS = 1 << 22
MAX_PERIOD_MS = 86_400_000
_TIME = re.compile(r"[ \t\r]*([0-9]+)[ \t\r]*")
_PROB = re.compile(r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")


def trace_path(name: str) -> str:
    """experiments/traces/<name>.trace; ValueError for a name that is not one, or no such file."""
    return named_file(TRACES_DIR, name, ".trace", "trace")


def trace_average_bps(path: str) -> float:
    """The trace's average rate as ckcd-link loops it (every line a 1504-byte opportunity, the
    last time the period); ValueError naming the line ckcd-link would refuse."""
    times, last = 0, 0
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            m = _TIME.fullmatch(line.rstrip("\n"))
            if not m or int(m[1]) > MAX_PERIOD_MS:
                raise ValueError(f"{path}: line {lineno}: not a time in ms (0..{MAX_PERIOD_MS})")
            if int(m[1]) < last:
                raise ValueError(f"{path}: line {lineno}: earlier than the line before")
            last, times = int(m[1]), times + 1
            if times > MAX_OPPS:
                raise ValueError(f"{path}: more than {MAX_OPPS} opportunities")
    if last == 0:
        raise ValueError(f"{path}: no opportunity after time 0: the trace's last time is its period")
    return times * OPP_BYTES * 8 * 1000 / last


def check_loss(spec: str) -> str:
    """A loss model as ckcd-link's --loss takes it: `none`, `bernoulli p=P` or `gilbert p=P r=R
    [bad=B] [good=G]`, probabilities 0 or 1e-9..1, r above 0. Returns it; ValueError saying what is wrong."""
    words = spec.split() if isinstance(spec, str) else []
    if words == ["none"]:
        return "none"
    if not words or words[0] not in ("bernoulli", "gilbert"):
        raise ValueError(f"{spec!r}: the model must be bernoulli or gilbert (e.g. \"bernoulli p=0.01\")")
    allowed = ("p",) if words[0] == "bernoulli" else ("p", "r", "bad", "good")
    values = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if key not in allowed or not eq or key in values:
            raise ValueError(f"{spec!r}: {word!r}: {words[0]} takes {', '.join(allowed)}, each once")
        if not _PROB.fullmatch(value) or not (float(value) == 0 or 1e-9 <= float(value) <= 1):
            raise ValueError(f"{spec!r}: {key} must be a probability 0..1 (0, or at least 1e-9), got {value!r}")
        values[key] = float(value)
    needed = ("p",) if words[0] == "bernoulli" else ("p", "r")
    if any(k not in values for k in needed):
        raise ValueError(f"{spec!r}: {words[0]} needs {' and '.join(needed)}")
    if words[0] == "gilbert" and values["r"] == 0:
        raise ValueError(f"{spec!r}: r must be above 0 (a chain that never leaves the bad state)")
    return " ".join(words)


def daemon_options(link, reverse_spec: str | None = None) -> dict:
    """What ckcd-link is given for a scenario's [link] beyond its rate, delay and discipline
    (ovs_config.link_daemon.LinkDaemon's keywords): the traces by path, the loss models, and
    the reverse direction's own rate, delay and buffer; its discipline is reverse_spec when
    flows are sent back (Scenario.reverse_qdisc_spec), else a droptail queue."""
    reverse = link.reverse
    droptail = f"droptail limit={reverse.buffer_pkts}" if reverse.buffer_pkts else None
    out = {"trace": trace_path(link.trace) if link.trace else None, "loss": link.loss,
           "trace_ba": trace_path(reverse.trace) if reverse.trace else None, "loss_ba": reverse.loss,
           "rate_ba_bps": reverse.rate_bps, "delay_ba_ms": reverse.delay_ms,
           "qdisc_ba": reverse_spec or droptail}
    return {k: v for k, v in out.items() if v is not None}
