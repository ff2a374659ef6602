"""Integration tests of ckcd-link with real kernel TCP between two network
namespaces (tests/link/linklab.py), at 50 Mbit/s and 10 ms one way.

Tolerances and why:
- ping: 10 ms each way gives a 20 ms RTT; the mean of 20 pings must be in
  20.0-23.0 ms (serialization of an 98-byte ICMP frame is 16 us each way,
  the daemon's release is ~30-300 us late on a loaded 2-core VM).
- one CUBIC flow: receiver goodput >= 90 % of the L2 goodput ceiling
  50 Mbit/s * 1448/1514 = 47.8 Mbit/s (1448 payload bytes per 1514-byte
  frame; the daemon serializes whole frames and counts no preamble/FCS).
- BBR vs CUBIC: a 40-packet droptail buffer is half a BDP; BBR must take the
  larger share there (seed 000's Fig. 1), and the CKCD discipline must give
  a higher Jain index (the test's docstring has the measurements). Both
  indexes are printed (pytest -s).
Each traffic assertion's message carries the host's CPU (busy, steal, the
daemon's share) over the measured run (tests/hostload.py).
Needs root, iperf3, ethtool; skips otherwise. Holds the lab lock for the
whole module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ovs_config.link_daemon import (DEFAULT_BINARY, LATENESS_COUNTS, LinkDaemon,  # noqa: E402
                                    LinkDaemonError, schedule_kept)
from linklab import DELAY_MS, HOST_A_IP, HOST_B_IP, RATE_BPS, NetLab, iperf_goodput_bps, jain  # noqa: E402
from tests.hostload import HostLoad, wait_for_quiet_host  # noqa: E402
from tests.waiting import eventually  # noqa: E402

# the lab and daemon_factory fixtures: conftest.py
L2_CEILING_BPS = RATE_BPS * 1448 / 1514
PING_RTT_MS = (20.0, 23.0)  # module docstring: 2 x 10 ms, plus up to 3 ms of late releases
# The daemon's counters move within a log interval of the traffic: waiting for a counter that
# traffic at 20-50 Mbit/s moves in well under a second, 5 s is many times that.
COUNTER_TIMEOUT_S = 5.0
CKCD_SPEC = "ckcd limit=80 rate_bps=50000000 rtt_ms=20"
CKCD_SPEC_HALF_BDP = "ckcd limit=40 rate_bps=50000000 rtt_ms=20"

pytestmark = [
    pytest.mark.lab,  # needs root: ckcd-link on veths in network namespaces
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)"),
    pytest.mark.skipif(not DEFAULT_BINARY.exists(),
                       reason="datapath/build/ckcd-link not built (make -C datapath)"),
]


def run_iperf(lab: NetLab, ccs: list[str], seconds: int, omit: int = 0) -> list[dict]:
    """Simultaneous iperf3 flows A->B, one per congestion control; JSON results."""
    ports = [lab.next_port() for _ in ccs]
    for port in ports:
        lab.iperf_server(port)
    clients = [lab.iperf_client(port, cc, seconds, omit=omit) for port, cc in zip(ports, ccs)]
    results = []
    for c in clients:
        out, err = c.communicate(timeout=seconds + omit + 30)
        res = json.loads(out) if out.strip() else {}
        assert c.returncode == 0 and "error" not in res, f"iperf3 failed: {err} {res.get('error')}"
        results.append(res)
    return results


def ab_stats_once(d: LinkDaemon, ok, what: str, timeout_s: float = COUNTER_TIMEOUT_S) -> dict:
    """The daemon's stats of direction ab, once ok(them) holds."""
    def check():
        ab = d.stats()["dirs"]["ab"]
        return ab if ok(ab) else None
    return eventually(check, timeout_s=timeout_s, what=what)


def ping_rtts_ms(lab: NetLab, count: int, interval: float = 0.1, src: str | None = None,
                 from_b: bool = False) -> list[float]:
    """RTTs of pings from host A to B (from_b: B to A's address src), optionally from A's
    address src."""
    where, args = (lab.ns_b, [src or HOST_A_IP]) if from_b else (lab.ns_a, (["-I", src] if src else []) + [HOST_B_IP])
    out = lab.ns(where, "ping", "-n", "-c", str(count), "-i", str(interval), *args, check=False).stdout
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]


# -- start-up validation ---------------------------------------------------------

BAD_START = [
    (["--rate", "0"], "rate"),
    (["--rate", "200gbit"], "rate"),
    (["--rate", "50mbit", "--delay", "11s"], "delay"),
    (["--rate", "50mbit", "--qdisc", "fifo limit=10"], "qdisc"),
    (["--rate", "50mbit", "--qdisc", "droptail limit=0"], "qdisc"),
    (["--rate", "50mbit", "--qdisc", "droptail limt=10"], "qdisc"),
    (["--rate", "50mbit", "--qdisc-ba", "codel target_ms=-1"], "qdisc-ba"),
    (["--rate", "50mbit", "--qdisc", "hdcodel mode=static heavy_key=10.0.0.1>h3"], "qdisc"),
    (["--rate", "50mbit", "--mtu", "10"], "mtu"),
    (["--delay", "10ms"], "rate"),
    (["--rate", "50mbit", "--release-batch", "11ms"], "release-batch"),
    (["--rate", "50mbit", "--release-batch", "soon"], "release-batch"),
    (["--rate", "50mbit", "--release-lateness", "11ms"], "release-lateness"),
    (["--rate", "50mbit", "--release-lateness", "-250us"], "release-lateness"),
    (["--rate", "50mbit", "--release-lateness", "late"], "release-lateness"),
    (["--rate", "50mbit", "--rx-io", "mmap"], "rx-io"),
    (["--rate", "50mbit", "--host-delay", "10.0.0.1"], "host-delay"),
    (["--rate", "50mbit", "--host-delay", "h1=5ms"], "host-delay"),
    (["--rate", "50mbit", "--host-delay", "10.0.0.1=5ms", "--host-delay", "10.0.0.1=6ms"], "host-delay"),
    (["--rate", "50mbit", "--release-batch", "1ms", "--single-thread"], "release-batch"),
    (["--rate", "50mbit", "--loss", "bernoulli p=2"], "loss"),
    (["--rate", "50mbit", "--loss-ba", "gilbert p=0.1"], "loss-ba"),
    (["--rate", "50mbit", "--loss", "uniform p=0.1"], "loss"),
    (["--rate", "50mbit", "--trace", "/nonexistent/ckcd-test.trace"], "trace"),
    (["--rate", "50mbit", "--trace-ba", "/dev/null"], "trace-ba"),
    (["--trace", "/dev/null"], "rate"),
]


@pytest.mark.parametrize("args,param", BAD_START, ids=[" ".join(a) for a, _ in BAD_START])
def test_bad_start_parameter_exits_2_naming_it(args, param):
    p = subprocess.run([str(DEFAULT_BINARY), "--if-a", "lo", "--if-b", "ckcd-none0", *args],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert f"--{param}:" in p.stderr, p.stderr


def test_unknown_interface_exits_2_naming_it():
    p = subprocess.run([str(DEFAULT_BINARY), "--if-a", "lo", "--if-b", "ckcd-none0",
                        "--rate", "50mbit", "--control", "/tmp/ckcd-link-test-none.sock"],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.stderr
    assert "--if-b:" in p.stderr and "ckcd-none0" in p.stderr


def test_client_raises_with_daemon_message():
    d = LinkDaemon("lo", "ckcd-none0", rate_bps=0)
    with pytest.raises(LinkDaemonError) as e:
        d.start()
    assert e.value.exit_code == 2 and e.value.param == "rate"
    assert "out of range" in str(e.value)


# -- emulation ---------------------------------------------------------------------

# "auto" reads through the receive ring on any kernel the lab runs on (it has had
# PACKET_RX_RING since 2.6); "recvmmsg" is the fallback, kept working by its own runs.
@pytest.mark.parametrize("mode", ["sender-threads", "single-thread", "recvmmsg"])
def test_ping_rtt_is_twice_the_delay(lab, daemon_factory, mode):
    extra = ["--single-thread"] if mode == "single-thread" else []
    d = daemon_factory(qdisc="droptail limit=100", extra_args=extra,
                       rx_io="recvmmsg" if mode == "recvmmsg" else "auto")
    want_io = "recvmmsg" if mode == "recvmmsg" else "ring"
    assert {dr["rx_io"] for dr in d.show()["dirs"].values()} == {want_io}
    ping_rtts_ms(lab, 1)  # ARP resolution costs one extra RTT: not measured
    with HostLoad(link_pids=[d.pid]) as load:
        rtts = ping_rtts_ms(lab, 20)
    mean = sum(rtts) / len(rtts)
    print(f"\nping RTT over ckcd-link ({mode}) 10 ms each way: mean {mean:.2f} ms, "
          f"min {min(rtts):.2f}, max {max(rtts):.2f} (n={len(rtts)}); {load}")
    assert len(rtts) == 20, f"{rtts}; {load}"
    low, high = PING_RTT_MS
    assert min(rtts) >= low, f"{rtts}; {load}"  # the delay line never releases early
    assert low <= mean <= high, f"mean {mean:.2f} ms; {load}"
    st = d.stop()
    assert st["dirs"]["ab"]["tx_frames"] >= 21 and st["dirs"]["ba"]["tx_frames"] >= 21
    assert st["dirs"]["ab"]["rx_io"] == want_io and st["dirs"]["ab"]["rx_kernel_drops"] == 0


# --host-delay ADDR=DUR: frames from ADDR wait DUR before the queue, so each source address has its
# own base RTT: 2 x 10 ms plus its delay, on pings from A (its echo requests are delayed) and from B
# (the replies from A's address are). Host A gets two more addresses for two more "hosts"; its own
# address, without a delay, is the baseline measured in the same run (ping over ckcd-link is
# 0.3-0.5 ms above 2 x 10 ms here: the hosts' stacks, two releases, ping's 0.1 ms resolution).
# Tolerance: never below 2 x 10 ms plus the delay (the delay line never releases early), and the
# median within 0.5 ms of the baseline's median plus the delay.
HOST_DELAYS_MS = {"10.77.0.11": 5.0, "10.77.0.12": 25.0}


def _median_rtt_ms(lab, src: str, from_b: bool, floor_ms: float) -> float:
    ping_rtts_ms(lab, 1, src=src, from_b=from_b)  # ARP: not measured
    rtts = sorted(ping_rtts_ms(lab, 20, src=src, from_b=from_b))
    what = f"ping {'B to' if from_b else 'from'} {src}: {rtts}"
    assert len(rtts) == 20, what
    assert rtts[0] >= floor_ms, what
    print(f"\n{what[:what.index(':')]}: min {rtts[0]:.3f}, median {rtts[10]:.3f} ms")
    return rtts[10]


def test_host_delay_gives_each_host_its_own_rtt(lab, daemon_factory):
    for addr in HOST_DELAYS_MS:
        lab.ns(lab.ns_a, "ip", "addr", "add", f"{addr}/24", "dev", lab.if_ha)
    try:
        d = daemon_factory(qdisc="droptail limit=100", host_delay_ms=HOST_DELAYS_MS)
        assert d.show()["host_delays"] == [{"addr": a, "delay_ms": ms} for a, ms in HOST_DELAYS_MS.items()]
        for from_b in (False, True):
            base = _median_rtt_ms(lab, HOST_A_IP, from_b, 2 * DELAY_MS)
            for src, extra_ms in HOST_DELAYS_MS.items():
                median = _median_rtt_ms(lab, src, from_b, 2 * DELAY_MS + extra_ms)
                assert abs(median - base - extra_ms) <= 0.5, (src, from_b, median, base)
        st = d.stats()["dirs"]
        assert st["ab"]["host_delay_pkts"] == 0 and st["ba"]["host_delay_pkts"] == 0
    finally:
        for addr in HOST_DELAYS_MS:
            lab.ns(lab.ns_a, "ip", "addr", "del", f"{addr}/24", "dev", lab.if_ha, check=False)


# --release-batch B: a sender's timed wake-ups are at least B apart (it sends what is due and then
# sleeps until the head is due or B after its last send, whichever is later), so over T seconds
# there are at most T / B + 1 of them; without it there is about one per frame. Frames leave up
# to B late, plus the wake-up's own lateness: the mean lateness is at least a tenth of B (about
# half of it is measured, bench/bench_link_release.py) and the rate still holds. At 50 Mbit/s a
# frame leaves every 242 us, so a 1 ms batch holds about four: more than two on average.
RELEASE_BATCH_US = 1000


def test_release_batch_bounds_the_senders_wake_ups(lab, daemon_factory):
    d = daemon_factory(qdisc="droptail limit=200", release_batch_us=RELEASE_BATCH_US)
    assert d.show()["release_batch_us"] == RELEASE_BATCH_US
    started = d.stats()["uptime_s"]
    with HostLoad(link_pids=[d.pid]) as load:
        (res,) = run_iperf(lab, ["cubic"], seconds=4)
    st = d.stop()
    elapsed_s = st["uptime_s"] - started
    ab = st["dirs"]["ab"]
    wakeups, releases = ab["tx_wake"]["wakeups"], ab["schedule"]["releases"]
    print(f"\n--release-batch {RELEASE_BATCH_US}us: {wakeups} timed wake-ups for {releases} releases "
          f"in {elapsed_s:.1f} s, late mean {ab['schedule']['late_mean_us']:.0f} us; {load}")
    assert wakeups <= elapsed_s * 1e6 / RELEASE_BATCH_US + 1, (wakeups, elapsed_s, load)
    assert releases > 2 * wakeups, (releases, wakeups)  # the batches hold several frames
    assert ab["schedule"]["late_mean_us"] >= RELEASE_BATCH_US / 10, ab["schedule"]
    assert iperf_goodput_bps(res) >= 0.90 * L2_CEILING_BPS, f"{iperf_goodput_bps(res) / 1e6:.2f} Mbit/s; {load}"


# --release-lateness D holds each frame a draw uniform in [0, 2D) past its release, in order, and
# the schedule statistics count the hold as lateness (datapath/link/pipe.c, draw_lateness).
RELEASE_LATENESS_US = 500


def _late(st: dict, key: str = "schedule") -> tuple[int, float, dict]:
    """Both directions' count, summed lateness (us) and histogram of `schedule`, `own` or
    `tx_wake`."""
    count = LATENESS_COUNTS[key]
    dirs = [d[key] for d in st["dirs"].values()]
    return (sum(h[count] for h in dirs), sum(h["late_mean_us"] * h[count] for h in dirs),
            {b: sum(h["late_hist_us"][b] for h in dirs) for b in dirs[0]["late_hist_us"]})


def test_release_lateness_reads_as_its_mean_in_the_schedule(lab, daemon_factory):
    """Rule: each release is late by its own draw, mean D, and late_mean_us says so. Pings 10 ms
    apart, both ways, are far more than 2D apart, so no frame waits for the one ahead: each is
    sent at a timed wake-up of its own, late by its draw plus that wake-up's lateness, which
    tx_wake measures (the daemon's own, 30-120 us here). So schedule's mean less tx_wake's is
    the draws' mean: D within 60 us (4 standard errors: 289 / sqrt(400) = 14 us; measured
    514-515 us with --seed 7). And it is jitter, not a constant: the draws fall on both sides
    of 500 us, half each, so each side holds >= 30 %."""
    d = daemon_factory(qdisc="droptail limit=100", release_lateness_us=RELEASE_LATENESS_US, seed=7)
    assert d.show()["release_lateness_us"] == RELEASE_LATENESS_US
    ping_rtts_ms(lab, 1)  # ARP: not in the measured window
    st0 = d.stats(max_flows=0)
    rtts = ping_rtts_ms(lab, 200, interval=0.01)
    st1 = d.stop()
    (n0, sum0, hist0), (n1, sum1, hist1) = _late(st0), _late(st1)
    (w0, wsum0, _), (w1, wsum1, _) = _late(st0, "tx_wake"), _late(st1, "tx_wake")
    n, mean_us, own_us = n1 - n0, (sum1 - sum0) / (n1 - n0), (wsum1 - wsum0) / (w1 - w0)
    hist = {b: hist1[b] - hist0[b] for b in hist1}
    below = sum(v for b, v in hist.items() if b in ("<10", "10-50", "50-100", "100-250", "250-500"))
    print(f"\n--release-lateness {RELEASE_LATENESS_US}us: {n} pings' frames late {mean_us:.0f} us on "
          f"average, {own_us:.0f} us of it the wake-ups' own; histogram {hist}; RTT min {min(rtts):.2f} ms")
    # One timed wake-up per frame; a stray frame (IPv6 neighbour discovery) may share one.
    assert len(rtts) == 200 and n >= 400 and abs(w1 - w0 - n) <= 2, (len(rtts), n, w1 - w0)
    assert min(rtts) >= 2 * DELAY_MS, rtts  # lateness only ever delays a frame
    assert abs(mean_us - own_us - RELEASE_LATENESS_US) <= 60, (mean_us, own_us, hist)
    assert mean_us >= RELEASE_LATENESS_US - 60, (mean_us, hist)
    assert below >= 0.3 * n and n - below >= 0.3 * n, hist


STALL_SHIM = Path(__file__).resolve().parent / "stall_shim.c"
STALL_US = 2000


@pytest.fixture(scope="module")
def stall_shim(tmp_path_factory) -> Path:
    """tests/link/stall_shim.c built: ckcd-link's main thread sleeps after each clock reading."""
    so = tmp_path_factory.mktemp("stall") / "stall_shim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(so), str(STALL_SHIM), "-ldl"],
                   check=True, capture_output=True, text=True)
    return so


ONEWAY = Path(__file__).resolve().parent / "oneway.py"


def one_way_delays_us(lab: NetLab, count: int, interval_s: float) -> list[int]:
    """One-way delays (us) of count datagrams from A to B, one every interval_s (oneway.py)."""
    port = lab.next_port()
    rx = lab.popen(lab.ns_b, sys.executable, str(ONEWAY), "recv", str(port), str(count), "3",
                   stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        lab.ns(lab.ns_a, sys.executable, str(ONEWAY), "send", HOST_B_IP, str(port), str(count), str(interval_s))
        out, _ = rx.communicate(timeout=30)
    finally:
        lab.stop(rx)
    return [int(x) for x in out.split()]


@pytest.mark.parametrize("rx_io", ["ring", "recvmmsg"])
def test_no_frame_leaves_before_its_delay_when_the_daemon_is_stalled(lab, daemon_factory, stall_shim,
                                                                     monkeypatch, rx_io):
    """Rule (docs/ckcd-link.md, "Emulation model"): a frame's arrival time is read after the frame
    arrived, so it never leaves before its delay, however late the daemon gets to it. With the
    main thread stalled 2 ms after every clock reading (the shim), datagrams every half
    millisecond from A to B still take 10 ms or more, one way (no tolerance: both ends read one
    clock, the sender before its send and the kernel after the arrival). Before: the ring's batch
    took its reading before walking the slots, and a frame the kernel wrote during the stall was
    stamped with it, up to 2 ms before it arrived (a flow's min RTT 1.6 ms under its base was seen
    in a run that a hypervisor stalled)."""
    monkeypatch.setenv("LD_PRELOAD", str(stall_shim))
    monkeypatch.setenv("CKCD_TEST_STALL_US", str(STALL_US))
    d = daemon_factory(qdisc="droptail limit=1000", rx_io=rx_io)
    monkeypatch.delenv("LD_PRELOAD")
    delays = one_way_delays_us(lab, 1000, 0.0005)
    assert d.show()["dirs"]["ab"]["rx_io"] == rx_io
    print(f"{rx_io}: {len(delays)} datagrams, one way min {min(delays, default=None)} us, "
          f"max {max(delays, default=None)} us")
    assert len(delays) >= 900, len(delays)  # the stalled daemon still carries them
    # The shim stalled it (a frame that arrives during a stall waits for it): else this proves nothing.
    assert max(delays) >= DELAY_MS * 1000 + STALL_US / 2, max(delays)
    assert min(delays) >= DELAY_MS * 1000, sorted(delays)[:10]


def test_release_lateness_keeps_the_rate(lab, daemon_factory):
    """Rule: the lateness moves releases, not the serializer, so a CUBIC flow still gets the
    rate the link gives without it (test_one_cubic_flow_fills_the_link's bounds: 90-102 % of
    the L2 ceiling), while every frame leaves at least its draw late: the mean lateness is at
    least D (over ~40 000 frames the draws' mean is within 1 % of D). Back to back, a frame
    every 242 us, some frames wait for a later-drawn one ahead, so the mean reads above D but
    a frame's hold never exceeds 2D: at most 2D plus the daemon's own lateness under load
    (150-220 us measured in experiments, docs/ckcd-link.md; 300 us allowed). Measured: 598-606
    us, and 100 % of the ceiling, as without the option. A run on a disturbed host (the
    hypervisor withheld the CPU: HostLoad.disturbed) measured the host, not the daemon (a CI
    run's mean was 1922 us with releases 10-50 ms late 830 times): it runs again once the
    host is quiet (at most 2 min of waiting each time), at most three times in all, as the
    kernel lab's measured steps: the hypervisor's steal comes in spells."""
    for attempt in (1, 2, 3):
        d = daemon_factory(qdisc="droptail limit=200", release_lateness_us=RELEASE_LATENESS_US, seed=7)
        with HostLoad(link_pids=[d.pid]) as load:
            (res,) = run_iperf(lab, ["cubic"], seconds=8, omit=2)
        sched = d.stop()["dirs"]["ab"]["schedule"]
        if not load.disturbed or attempt == 3:
            break
        quiet, waited = wait_for_quiet_host(120)
        print(f"try {attempt} on a disturbed host: late mean {sched['late_mean_us']:.0f} us; {load}; "
              f"{'quiet' if quiet else 'still disturbed'} after {waited:.0f} s")
    goodput = iperf_goodput_bps(res)
    print(f"\n--release-lateness {RELEASE_LATENESS_US}us: CUBIC {goodput / 1e6:.2f} Mbit/s = "
          f"{goodput / L2_CEILING_BPS:.1%} of the L2 ceiling; late mean {sched['late_mean_us']:.0f} us, "
          f"max {sched['late_max_us']:.0f} us over {sched['releases']} releases; {load}")
    assert 0.90 * L2_CEILING_BPS <= goodput <= 1.02 * L2_CEILING_BPS, f"{goodput / 1e6:.2f} Mbit/s; {load}"
    assert 0.99 * RELEASE_LATENESS_US <= sched["late_mean_us"] <= 2 * RELEASE_LATENESS_US + 300, (sched, str(load))


# `own`, per frame: its send time less the largest t_r + hold (pkt_send_at) of the frames sent so
# far in its direction (datapath/link/tx.c, count_late), so the daemon's own lateness, past the
# --release-lateness hold and the FIFO wait the hold causes. Counted for every frame by whichever
# thread sends, so with --single-thread too, where tx_wake (per wake-up) stays empty.
SEND_MODES = {"sender-threads": [], "single-thread": ["--single-thread"]}


@pytest.mark.parametrize("mode", SEND_MODES)
def test_own_lateness_is_the_schedule_without_a_hold(lab, daemon_factory, mode):
    """Rule: without --release-lateness a frame's earliest send is its own release time
    (release times only grow along the line while the delay stays), so `own` is `schedule`
    frame by frame: the same count, and from the same values the same mean (printed with the
    same rounding, %.6g), max and histogram. A CUBIC flow fills the line, so frames also leave
    in batches. Read from the final stats: the sending has stopped, so no record moves between
    the two reads."""
    d = daemon_factory(qdisc="droptail limit=200", extra_args=SEND_MODES[mode])
    with HostLoad(link_pids=[d.pid]) as load:
        run_iperf(lab, ["cubic"], seconds=3)
    st = d.stop()
    for name, dr in st["dirs"].items():
        sched, own = dr["schedule"], dr["own"]
        print(f"\n{mode} {name}: schedule {sched['releases']} releases, {sched['late_mean_us']} us; "
              f"own {own['releases']}, {own['late_mean_us']} us; {load}")
        assert own["releases"] == sched["releases"] > 1000, (name, sched, own)
        assert own["late_mean_us"] == sched["late_mean_us"], (name, sched, own)
        assert own == sched, (name, sched, own)


@pytest.mark.parametrize("mode", SEND_MODES)
def test_own_lateness_leaves_out_the_hold(lab, daemon_factory, mode):
    """Rule: with --release-lateness 500us `own` counts every frame `schedule` counts, but not
    the hold. Per frame, schedule - own = (the largest t_r + hold sent so far) - t_r, at least
    the frame's own draw: so own's max and its frames over 1 ms are at most schedule's, and
    the means differ by at least the draws' mean. Over a 4 s CUBIC flow's frames (both
    directions, ~25 000; 10 000 required) that is within 1 % of D (standard error 289 /
    sqrt(10 000) = 3 us), so 0.99 D is required; the FIFO waits add ~85 us more at 50 Mbit/s.
    What is left is the daemon's own lateness under load: 20-220 us on average
    (docs/ckcd-link.md), up to 300 us allowed as in that test, well under the schedule's mean
    (at least D). With --single-thread tx_wake is empty and own still counts every frame.
    Measured on a quiet host: own 19-20 us, schedule 596-598 us, both modes."""
    d = daemon_factory(qdisc="droptail limit=200", release_lateness_us=RELEASE_LATENESS_US, seed=7,
                       extra_args=SEND_MODES[mode])
    with HostLoad(link_pids=[d.pid]) as load:
        run_iperf(lab, ["cubic"], seconds=4)
    st = d.stop()
    (n, sched_sum, _), (own_n, own_sum, _) = _late(st, "schedule"), _late(st, "own")
    sched_us, own_us = sched_sum / n, own_sum / n
    print(f"\n--release-lateness {RELEASE_LATENESS_US}us, {mode}: {n} releases, schedule late "
          f"{sched_us:.0f} us on average, own {own_us:.0f} us; {load}")
    for name, dr in st["dirs"].items():
        sched, own = dr["schedule"], dr["own"]
        assert own["releases"] == sched["releases"], (name, sched, own)
        assert own["late_max_us"] <= sched["late_max_us"], (name, sched, own)
        assert own["late_over_1ms"] <= sched["late_over_1ms"], (name, sched, own)
        if mode == "single-thread":
            assert dr["tx_wake"]["wakeups"] == 0, dr["tx_wake"]
    assert own_n == n >= 10000, (own_n, n)
    assert sched_us - own_us >= 0.99 * RELEASE_LATENESS_US, (sched_us, own_us)
    assert own_us <= 300, (own_us, str(load))


def test_one_cubic_flow_fills_the_link(lab, daemon_factory):
    d = daemon_factory(qdisc="droptail limit=200")
    with HostLoad(link_pids=[d.pid]) as load:
        (res,) = run_iperf(lab, ["cubic"], seconds=8, omit=2)
    goodput = iperf_goodput_bps(res)
    st = d.stop()
    ab = st["dirs"]["ab"]
    print(f"\nCUBIC goodput {goodput / 1e6:.2f} Mbit/s = {goodput / L2_CEILING_BPS:.1%} of the "
          f"L2 ceiling {L2_CEILING_BPS / 1e6:.2f}; release late mean "
          f"{ab['schedule']['late_mean_us']:.0f} us, >1 ms {ab['schedule']['late_over_1ms']}"
          f"/{ab['schedule']['releases']}; {load}")
    assert goodput >= 0.90 * L2_CEILING_BPS, f"{goodput / 1e6:.2f} Mbit/s; {load}"
    # The rate limit holds: 2 % over the ceiling is iperf3's accounting at the edges of its
    # intervals, not a faster link.
    assert goodput <= 1.02 * L2_CEILING_BPS, f"{goodput / 1e6:.2f} Mbit/s; {load}"
    assert ab["rx_oversize"] == 0 and ab["rx_runt"] == 0


def _share_run(lab, daemon_factory, spec: str, seconds: int) -> tuple[float, float, dict, HostLoad]:
    d = daemon_factory(qdisc=spec)
    with HostLoad(link_pids=[d.pid]) as load:
        bbr, cubic = run_iperf(lab, ["bbr", "cubic"], seconds=seconds, omit=3)
    st = d.stop()
    lab.flush_tcp_metrics()
    return iperf_goodput_bps(bbr), iperf_goodput_bps(cubic), st, load


def _kept_share_run(lab, daemon_factory, spec: str, seconds: int) -> tuple[float, float, dict, HostLoad]:
    """_share_run, rerun (twice at most) while the daemon fell behind its schedule: the VM's
    host then withheld the vCPU (one such DropTail run in a make test gave BBR/CUBIC 23.4/9.9
    Mbit/s instead of ~7:1), and the shares say nothing about the discipline. Skips if all three were."""
    for _ in range(3):
        bbr, cubic, st, load = _share_run(lab, daemon_factory, spec, seconds)
        if schedule_kept(st):
            return bbr, cubic, st, load
        print(f"\n{spec}: ckcd-link fell behind its schedule (BBR {bbr / 1e6:.1f} / CUBIC {cubic / 1e6:.1f} "
              f"Mbit/s; {load}): rerun")
    pytest.skip(f"{spec}: ckcd-link fell behind its schedule in three runs (the VM's host withheld the CPU)")


def test_bbr_dominates_droptail_and_ckcd_is_fairer(lab, daemon_factory):
    """Seed 000's regime at half the rate: a buffer of half a BDP (40 packets; BDP = 50 Mbit/s
    x 20 ms = 83 packets), the same buffer for both disciplines so only the discipline differs.
    Measured here (3 runs each, 17 s): DropTail BBR 41.6 / CUBIC 5.6 Mbit/s, Jain 0.63; CKCD
    25.8 / 19.7, Jain 0.98. (At 80 packets, one BDP, DropTail alone gave Jain 0.85-0.98; at 20,
    CKCD's q_min clamps to 6 and it moved Jain only from 0.59 to 0.66: docs/ckcd-link.md.)"""
    bbr_dt, cubic_dt, st_dt, load_dt = _kept_share_run(lab, daemon_factory, "droptail limit=40", 17)
    bbr_ck, cubic_ck, st_ck, load_ck = _kept_share_run(lab, daemon_factory, CKCD_SPEC_HALF_BDP, 17)
    j_dt, j_ck = jain([bbr_dt, cubic_dt]), jain([bbr_ck, cubic_ck])
    print(f"\ndroptail limit=40: BBR {bbr_dt / 1e6:.1f} / CUBIC {cubic_dt / 1e6:.1f} Mbit/s, "
          f"Jain {j_dt:.3f}; {load_dt}")
    print(f"{CKCD_SPEC_HALF_BDP}: BBR {bbr_ck / 1e6:.1f} / CUBIC {cubic_ck / 1e6:.1f} Mbit/s, "
          f"Jain {j_ck:.3f}; drops {st_ck['dirs']['ab']['drops']}; {load_ck}")
    # BBR starves CUBIC behind DropTail: measured 7x; 3x is less than half of that and still
    # far from a fair 1x.
    assert bbr_dt > 3 * cubic_dt, f"BBR {bbr_dt / 1e6:.1f} / CUBIC {cubic_dt / 1e6:.1f}; {load_dt}"
    # Tolerances: half the measured gaps (Jain 0.63 -> 0.98; utilization 95 %).
    loads = f"droptail: {load_dt}; ckcd: {load_ck}"
    assert j_ck >= j_dt + 0.15, (j_dt, j_ck, loads)
    assert j_ck >= 0.85, (j_ck, str(load_ck))
    assert bbr_ck + cubic_ck >= 0.80 * L2_CEILING_BPS, f"CKCD keeps the link used; {load_ck}"


# -- control socket ----------------------------------------------------------------

# Malformed and refused commands, each with the parameter its error reply must name.
REFUSED_COMMANDS = {
    "this is not json": None,
    '{"cmd": "launch"}': "cmd",
    '{"cmd": "set_link", "rate_bps": 0}': "rate_bps",
    '{"cmd": "set_link", "delay_ms": 20000}': "delay_ms",
    '{"cmd": "set_link", "rate_bps": 5e7, "speed": 1}': "speed",
    '{"cmd": "set_qdisc", "dir": "ab", "spec": "nosuch limit=5"}': "spec",
    '{"cmd": "set_qdisc", "dir": "ab", "spec": "droptail limit=0"}': "spec",
    '{"cmd": "set_qdisc", "dir": "sideways", "spec": "droptail"}': "dir",
    '{"cmd": "stats", "max_flows": -1}': "max_flows",
    '{"cmd": "show", "x": {"nested": 1}}': None,
}


def check_refusals_change_nothing(d: LinkDaemon) -> None:
    """Every refused command gets an error reply naming its culprit; the link is as it was."""
    for line, param in REFUSED_COMMANDS.items():
        reply = d.request_raw(line)
        assert reply["ok"] is False, line
        assert reply["error"], line
        if param:
            assert reply.get("param") == param, (line, reply)
    assert "limit" in d.request_raw('{"cmd": "set_qdisc", "dir": "ab", "spec": "droptail limit=0"}')["error"]
    show = d.show()
    assert show["dirs"]["ab"]["rate_bps"] == RATE_BPS
    assert show["dirs"]["ab"]["qdisc"].startswith("droptail limit=100")
    with pytest.raises(LinkDaemonError) as e:
        d.set_link(rate_bps=0)
    assert e.value.param == "rate_bps"


def reconfigure_while_forwarding(d: LinkDaemon, before: dict) -> None:
    """The discipline, then the link, changed with packets in flight: forwarding goes on under
    each, nothing lost to the change."""
    r = d.set_qdisc("ab", CKCD_SPEC)
    assert r["qdisc"].startswith("ckcd")
    assert r["qlen_pkts"] <= 80  # carried over up to the new limit, the rest tail-dropped
    mid = ab_stats_once(d, lambda ab: ab["tx_frames"] > before["tx_frames"], "frames forwarded after set_qdisc")
    assert mid["drops"]["flush"] == 0
    d.set_link(rate_bps=20_000_000, delay_ms=5)
    assert d.show()["dirs"]["ba"]["delay_ms"] == 5
    ab_stats_once(d, lambda ab: ab["tx_frames"] > mid["tx_frames"], "frames forwarded after set_link")
    samples = d.samples("ab", 50)
    assert len(samples) == 50 and all(len(s) == 4 for s in samples)


def check_log_of_changes(log: Path, final: dict) -> None:
    """The log of the run: a line per interval and direction, adding up to the final stats, each
    carrying the discipline's state (droptail's queue, then CKCD's I, mu_f and per-flow mu_i /
    d_th / dropping, keyed by the decimal of the flow hash that `flows` gives in hex: how a
    run's plots join the two, docs/ckcd-link.md)."""
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert {x["dir"] for x in lines} == {"ab", "ba"}
    ab = [x for x in lines if x["dir"] == "ab"]
    # A line every 100 ms for the daemon's life (the 7 s flow and more): ~70. A late loop writes
    # one line for all the intervals it missed (datapath/link/main.c), so stalls on a loaded
    # host cost lines; 40 is 4 s of them.
    assert len(ab) >= 40, len(ab)
    for key in ("t", "qlen_pkts", "sojourn_us", "tx_bytes", "drops", "flows", "late_max_us"):
        assert key in ab[0]
    assert sum(x["tx_bytes"] for x in ab) == final["dirs"]["ab"]["tx_bytes"]
    assert any(f["key"].startswith("tcp 10.77.0.1:") for x in ab for f in x["flows"])
    assert ab[0]["xstats"].startswith("qlen_pkts=")
    joined = [x for x in ab if "active_flows=" in x["xstats"] and any(
        re.search(rf"\bflow\.{int(f['flow'], 16)}=mu_bps:\d+,dth_us:\d+,dropping:[01]", x["xstats"])
        for f in x["flows"] if f["key"].startswith("tcp 10.77.0.1:"))]
    assert joined, [x["xstats"] for x in ab[-3:]]


def test_runtime_changes_keep_forwarding(lab, daemon_factory, tmp_path):
    log = tmp_path / "link.jsonl"
    d = daemon_factory(qdisc="droptail limit=100", log_path=str(log), log_interval_ms=100)
    port = lab.next_port()
    lab.iperf_server(port)
    with HostLoad(link_pids=[d.pid]) as load:
        client = lab.iperf_client(port, "cubic", 7)
        try:
            # CUBIC is flowing: 1000 frames are 0.25 s at 50 Mbit/s.
            before = ab_stats_once(d, lambda ab: ab["tx_frames"] > 1000, "1000 frames of CUBIC through the link")
            check_refusals_change_nothing(d)
            reconfigure_while_forwarding(d, before)
        finally:
            out, err = client.communicate(timeout=30)
    assert client.returncode == 0, err
    intervals = [i["sum"]["bits_per_second"] for i in json.loads(out)["intervals"]]
    # Never stalled: every 1 s interval carried traffic (1 Mbit/s is 5 % of the slowest rate
    # set, 20 Mbit/s; a stall of most of a second falls below it), and the last ones follow the
    # new 20 Mbit/s rate (19.1 of goodput; the old rate was 50). These are the sender's
    # intervals (bytes handed to the socket), so one can overshoot when the socket buffer
    # drains in a burst (CI saw 21.9 after 18.8, 18.8, 18.8): judge the median of the last
    # three, below 21 (10 % over 19.1).
    assert min(intervals) > 1e6, (intervals, str(load))
    assert sorted(intervals[-3:])[1] < 21e6, (intervals, str(load))
    st = d.stop()
    assert st["final"] == "stats"
    check_log_of_changes(log, st)


def test_each_flow_logs_its_own_queueing_delay(lab, daemon_factory, tmp_path):
    """Rule: the log and stats give each flow its own queueing delay (`deq_pkts`,
    `sojourn_ns_sum`; `sojourn_us_mean`), which under a flow-isolating discipline is not the
    link's mean: behind fq_codel, pings in their own sparse flow wait at most a frame or two
    while the CUBIC flow beside them waits out CoDel's standing queue (docs/ckcd-link.md). The
    experiments' fidelity check explains ping's RTT by it. The per-flow sums add up to the
    link's: every dequeued frame is counted once, in its flow.

    Tolerances: a ping frame behind fq_codel waits for the frame being serialized and at most a
    quantum (1514 bytes, 0.24 ms at 50 Mbit/s); under 1 ms leaves room for a late loop. CUBIC
    against CoDel's 5 ms target keeps several ms (measured 3-5): over 1.5 ms, and three times
    ping's. The sums agree: the lines' per-flow counts add up to the final stats' exactly, and
    their sums (integer ns) to the rows' means x counts within those means' rounding (six
    significant digits)."""
    log = tmp_path / "link.jsonl"
    d = daemon_factory(qdisc="fq_codel limit=1000", log_path=str(log), log_interval_ms=100)
    port = lab.next_port()
    lab.iperf_server(port)
    with HostLoad(link_pids=[d.pid]) as load:
        client = lab.iperf_client(port, "cubic", 6)
        ab_stats_once(d, lambda ab: ab["tx_frames"] > 1000, "CUBIC through the link")
        ping_rtts_ms(lab, 40, interval=0.1)
        client.communicate(timeout=40)
    st = d.stop()
    ab_lines = [x for x in map(json.loads, log.read_text().splitlines()) if x["dir"] == "ab"]
    own: dict[str, list[float]] = {}
    for row in ab_lines:
        for f in row["flows"]:
            n_sum = own.setdefault(f.get("key", "other"), [0, 0.0])
            n_sum[0] += f["deq_pkts"]
            n_sum[1] += f["sojourn_ns_sum"] / 1000
    icmp = own[f"icmp {HOST_A_IP}>{HOST_B_IP}"]
    [tcp] = [v for k, v in own.items() if k.startswith(f"tcp {HOST_A_IP}:") and k.endswith(f":{port}")
             and v[0] > 1000]
    ping_us, tcp_us = icmp[1] / icmp[0], tcp[1] / tcp[0]
    print(f"\nbehind fq_codel: ping waited {ping_us:.0f} us, CUBIC {tcp_us:.0f} us; {load}")
    assert icmp[0] >= 40 and ping_us < 1000, (icmp, load)
    assert tcp_us > 1500 and tcp_us > 3 * ping_us, (tcp, icmp, str(load))
    frames = sum(r["sojourn_us"]["count"] for r in ab_lines if r["sojourn_us"].get("count"))
    total_us = sum(r["sojourn_us"]["mean"] * r["sojourn_us"]["count"] for r in ab_lines if r["sojourn_us"].get("count"))
    assert sum(v[0] for v in own.values()) == frames
    assert abs(sum(v[1] for v in own.values()) - total_us) <= 1e-5 * total_us  # the rows' %.6g means
    [final] = [f for f in st["dirs"]["ab"]["flows"] if f["key"] == f"icmp {HOST_A_IP}>{HOST_B_IP}"]
    assert final["deq_pkts"] == icmp[0] and abs(final["sojourn_us_mean"] - ping_us) < 1, (final, icmp)


def xstat(ab: dict, name: str) -> int:
    return int(re.search(rf"\b{name}=(\d+)", ab["xstats"]).group(1))


def test_hdcodel_static_names_its_heavy_host_pair_by_address(lab, daemon_factory):
    """Seed 003's Static baseline is given the most bandwidth-consuming connection, a host
    pair (Sec. II-H, IV-B). ckcd-link keys its host-pair hash per run, so the spec names the
    pair by address (heavy_key=SENDER>RECEIVER) and the daemon turns it into that hash
    (datapath/link/host_key.c). Checked on CoDel's drops of one CUBIC flow A->B through a
    200-packet, target 1 ms queue: named as the heavy pair, every drop decision on the flow's
    packets is carried out (heavy_drops only); the reverse pair (B->A, the ACKs' direction, not
    in this queue) leaves the flow a light connection whose decisions are thinned to p."""
    spec = "hdcodel mode=static heavy_key={} key=host limit=200 target_ms=1 interval_ms=20 p=0.5"
    d = daemon_factory(qdisc=spec.format(f"{HOST_A_IP}>{HOST_B_IP}"))
    assert re.search(r"heavy_key=\d+ ", d.show()["dirs"]["ab"]["qdisc"]), "the pair became its hash"
    port = lab.next_port()
    lab.iperf_server(port)
    # The heavy pair's 3 drops come within half a second. As a light connection, CUBIC
    # regrows its window after those drops and CoDel decides again only once the queue
    # stands above 1 ms for 20 ms: its first 6 decisions took 1.2-3.4 s here (a 2-core
    # host with both cores busy), and a CI run gave up at 5 s of an 8 s flow. So: 12 s
    # for them, and a flow that outlasts both waits.
    light_timeout_s = 12.0
    with HostLoad(link_pids=[d.pid]) as load:
        client = lab.iperf_client(port, "cubic", int(COUNTER_TIMEOUT_S + light_timeout_s))
        try:
            heavy = ab_stats_once(d, lambda ab: xstat(ab, "heavy_drops") >= 3, "CoDel drops of the heavy pair")
            assert xstat(heavy, "thinned_drops") == 0 and xstat(heavy, "spared") == 0, heavy["xstats"]
            assert heavy["drops"]["delay"] == xstat(heavy, "heavy_drops"), heavy

            d.set_qdisc("ab", spec.format(f"{HOST_B_IP}>{HOST_A_IP}"))
            # p = 0.5: some decisions carried out (thinned_drops), some spared; waiting for one
            # of each cannot pass a queue that spares none or drops all.
            light = ab_stats_once(d, lambda ab: xstat(ab, "spared") >= 1 and xstat(ab, "thinned_drops") >= 1,
                                  "a light connection's drop decisions, both spared and carried out",
                                  timeout_s=light_timeout_s)
            assert xstat(light, "heavy_drops") == 0, light["xstats"]
        finally:
            client.communicate(timeout=30)
    assert client.returncode == 0, str(load)


def rate_of(qdisc: str) -> int:
    return int(re.search(r"\brate_bps=(\d+)", qdisc).group(1))


def test_a_discipline_without_rate_bps_follows_the_link(lab, daemon_factory):
    """CKCD's fair share C / I and BDP (and RED's idle decay) need the rate the queue drains
    at: a spec that leaves rate_bps out takes the link's, at start and after set_link; one
    that sets it keeps it; a rate at which the spec is invalid is refused, nothing changed."""
    d = daemon_factory(qdisc="ckcd limit=80 qmin=30", qdisc_ba="red limit=80 rate_bps=7000000")
    show = d.show()["dirs"]
    assert rate_of(show["ab"]["qdisc"]) == RATE_BPS
    assert rate_of(show["ba"]["qdisc"]) == 7_000_000
    d.set_link(rate_bps=20_000_000)
    show = d.show()["dirs"]
    assert rate_of(show["ab"]["qdisc"]) == 20_000_000 and show["ab"]["rate_bps"] == 20_000_000
    assert rate_of(show["ba"]["qdisc"]) == 7_000_000  # set in its spec
    assert "fair_share_bps=20000000" in show["ab"]["xstats"]
    # 1 Mbit/s x 20 ms is 2 packets: q_max = 3 BDP = 6 falls below the spec's qmin=30.
    with pytest.raises(LinkDaemonError) as e:
        d.set_link(rate_bps=1_000_000)
    assert e.value.param == "rate_bps" and "qmin" in str(e.value)
    show = d.show()["dirs"]
    assert show["ab"]["rate_bps"] == 20_000_000 and rate_of(show["ab"]["qdisc"]) == 20_000_000
    # set_qdisc afterwards still follows the current link rate
    d.set_qdisc("ab", "choke limit=80")
    assert rate_of(d.show()["dirs"]["ab"]["qdisc"]) == 20_000_000


# -- frame validation ----------------------------------------------------------------

INJECT = textwrap.dedent("""
    import socket, sys
    ifname, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    frame = bytes.fromhex("ffffffffffff" "020000000001" "88b5") + bytes(size - 14)
    for _ in range(count):
        s.send(frame)
""")


@pytest.mark.parametrize("rx_io", ["ring", "recvmmsg"])
def test_oversized_frames_are_counted_and_dropped(lab, daemon_factory, rx_io):
    """Frames above --mtu are dropped and counted, whichever way they are
    read. (Runts cannot be sent through a veth at all - the kernel refuses
    frames shorter than an Ethernet header - so their check is covered by
    link-unit-test.)"""
    d = daemon_factory(qdisc="droptail limit=100", mtu=1000, rx_io=rx_io)
    lab.ns(lab.ns_a, sys.executable, "-c", INJECT, lab.if_ha, "5", "1200")
    lab.ns(lab.ns_a, sys.executable, "-c", INJECT, lab.if_ha, "3", "1014")  # exactly MTU

    def ours(ab) -> list:
        return [f for f in ab["flows"] if f["key"].startswith("eth 0x88b5")]

    ab = ab_stats_once(d, lambda ab: ab["rx_oversize"] >= 5 and ours(ab) and ours(ab)[0]["tx_pkts"] >= 3,
                       "the 8 injected frames counted")
    assert ab["rx_oversize"] == 5
    assert ab["rx_runt"] == 0
    assert ours(ab)[0]["tx_pkts"] == 3
    # Forwarding is unaffected.
    assert len(ping_rtts_ms(lab, 3)) == 3


# -- 802.1Q tags -----------------------------------------------------------------------
# The kernel takes a received frame's VLAN tag off its bytes (VLAN acceleration) and hands it
# beside them: in the ring's slot header, or as PACKET_AUXDATA to recvmsg. A wire keeps the tag,
# so the daemon must put it back before sending the frame on.

INJECT_TAGGED = textwrap.dedent("""
    import socket, sys
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((sys.argv[1], 0))
    # broadcast, from 02:..:01, 802.1Q tag priority 1 VLAN 5, then ethertype 0x88b6
    s.send(bytes.fromhex("ffffffffffff" "020000000001" "8100" "2005" "88b6") + bytes(46))
""")

# Prints "ready" once bound, then the first 0x88b6 frame's tag as JSON (tci, tpid; null when it
# came untagged), or "timeout" after 5 s.
RECEIVE_TAGGED = textwrap.dedent("""
    import json, socket, struct, sys
    SOL_PACKET, PACKET_AUXDATA, TP_STATUS_VLAN_VALID = 263, 8, 0x10
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((sys.argv[1], 0))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.settimeout(5.0)
    print("ready", flush=True)
    try:
        while True:
            data, anc, _, _ = s.recvmsg(2048, socket.CMSG_SPACE(20))
            tag = None
            for level, kind, raw in anc:
                if level == SOL_PACKET and kind == PACKET_AUXDATA:
                    status, _, _, _, _, tci, tpid = struct.unpack("IIIHHHH", raw[:20])
                    if status & TP_STATUS_VLAN_VALID:
                        tag = {"tci": tci, "tpid": tpid or 0x8100}
            if data[12:14] == b"\\x81\\x00":  # left in the bytes (no acceleration)
                tag, data = {"tci": int.from_bytes(data[14:16], "big"), "tpid": 0x8100}, data[:12] + data[16:]
            if data[12:14] == b"\\x88\\xb6":
                print(json.dumps(tag), flush=True)
                break
    except socket.timeout:
        print("timeout", flush=True)
""")


@pytest.mark.parametrize("rx_io", ["ring", "recvmmsg"])
def test_vlan_tags_cross_the_link(lab, daemon_factory, rx_io):
    d = daemon_factory(qdisc="droptail limit=100", rx_io=rx_io)
    recv = subprocess.Popen(["ip", "netns", "exec", lab.ns_b, sys.executable, "-c", RECEIVE_TAGGED,
                             lab.if_hb], stdout=subprocess.PIPE, text=True)
    try:
        assert recv.stdout.readline().strip() == "ready"
        lab.ns(lab.ns_a, sys.executable, "-c", INJECT_TAGGED, lab.if_ha)
        got = recv.stdout.readline().strip()
        recv.wait(timeout=10)
    finally:
        recv.kill()
    assert got != "timeout", "the tagged frame did not cross the link"
    assert json.loads(got) == {"tci": 0x2005, "tpid": 0x8100}, f"arrived as {got}"
    assert d.stats()["dirs"]["ab"]["rx_io"] == rx_io


# -- an interface going down ------------------------------------------------------------
# The kernel marks a packet socket with ENETDOWN when its interface goes down, and epoll reports
# that error until someone reads it. Reading through the ring makes no receive call that would, so
# the daemon reads SO_ERROR itself: without it, one down/up costs a core of busy-looping. Forwarding
# ten pings over a second the daemon uses well under 10 % of a core (it sleeps in epoll between
# them); a spinning one uses ~100 %.

def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("rx_io", ["ring", "recvmmsg"])
def test_interface_down_and_up_is_reported_and_does_not_spin(lab, daemon_factory, rx_io):
    d = daemon_factory(qdisc="droptail limit=100", rx_io=rx_io)
    lab.ns(lab.ns_m, "ip", "link", "set", lab.if_la, "down")
    lab.ns(lab.ns_m, "ip", "link", "set", lab.if_la, "up")
    ab = ab_stats_once(d, lambda ab: ab["rx_socket_errors"] >= 1, "the ENETDOWN counted")
    assert ab["rx_socket_errors"] == 1
    ping_rtts_ms(lab, 1)  # ARP again, if the down flushed it
    c0, t0 = _cpu_s(d.pid), time.monotonic()
    rtts = ping_rtts_ms(lab, 10)
    busy = (_cpu_s(d.pid) - c0) / (time.monotonic() - t0)
    assert len(rtts) == 10  # it forwards again
    assert busy < 0.10, f"daemon at {busy:.0%} of a core forwarding 10 pings after the interface came back"
