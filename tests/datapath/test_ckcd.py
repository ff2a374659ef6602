"""CKCD (seed 000): per-flow delay thresholds from eq. 9 penalize flows above
their fair share and spare flows below it.

Rates are open-loop (Poisson) senders through ckcd-replay at 100 Mbit/s, the
paper's bottleneck. The first 0.5 s (rate windows and q_avg warming up) is
left out of every measurement.
"""

from __future__ import annotations

import math

import pytest

from replaylib import MS, SEC, cbr, merge, poisson, run

C = 100_000_000
T = 3 * SEC
WARM = SEC // 2


def unresponsive_vs_light(qdisc: str, seed: int = 1):
    heavy = poisson(1, 150e6, 0, T, seed=seed)  # 3x the fair share C/2
    light = poisson(2, 40e6, 0, T, seed=seed)  # below the fair share
    r = run(merge(heavy, light), qdisc, rate_bps=C, seed=seed)
    return r, r.rate_bps(1, WARM, T), r.rate_bps(2, WARM, T), r.rate_bps(2, WARM, T, delivered=False)


@pytest.mark.parametrize("seed", [1, 2])
def test_unresponsive_flow_at_3x_fair_share_is_penalized(seed):
    r, heavy, light, light_offered = unresponsive_vs_light("ckcd", seed)
    fair = C / 2
    # Tolerance: the heavy flow may take what the light one leaves (work
    # conservation: 100 - 40 = 60 Mbit/s), never more than 1.5x its share.
    assert heavy <= 1.5 * fair, (heavy, fair)
    # The light flow sends below its share: it keeps >= 80 % of what it sends.
    assert light >= 0.8 * light_offered, (light, light_offered)
    drops = r.stats["total"]["drops"]
    heavy_drops = sum(r.flows[1]["drops"].values())
    light_drops = sum(r.flows[2]["drops"].values())
    assert drops["delay"] > 0
    assert heavy_drops > 20 * max(light_drops, 1)
    # the link stays busy: CKCD does not buy fairness with idle capacity
    assert heavy + light >= 0.95 * C


def test_droptail_does_not_protect_the_light_flow():
    """The same load under DropTail: the light flow loses about half (this
    is what makes the CKCD assertion above meaningful)."""
    _, heavy, light, light_offered = unresponsive_vs_light("droptail limit=80")
    assert light < 0.7 * light_offered
    assert heavy > 1.5 * (C / 2)


def test_unresponsive_among_four_flows():
    """I = 4, fair share 25 Mbit/s: a 75 Mbit/s sender (3x) against three 20 Mbit/s."""
    tr = merge(poisson(1, 75e6, 0, T, seed=3), *(poisson(f, 20e6, 0, T, seed=3) for f in (2, 3, 4)))
    r = run(tr, "ckcd", rate_bps=C, seed=3)
    fair = C / 4
    # leftover for the heavy flow: 100 - 3*20 = 40 = 1.6 x fair; allow +5 %
    assert r.rate_bps(1, WARM, T) <= 1.65 * fair
    for f in (2, 3, 4):
        assert r.rate_bps(f, WARM, T) >= 0.8 * r.rate_bps(f, WARM, T, delivered=False)


def eq9_dth_us(mu_bps, active, d_ms=5.0, k=100.0, dth_min_ms=0.5, dth_max_ms=50.0):
    """docs/ckcd.md: d_th = K (mu_i/mu_f)^-2 + Q, Q = -1/(kI), K = D - Q."""
    mu_f = C / active
    q = -1.0 / (k * active)
    big_k = d_ms / 1000 - q
    d = big_k * (mu_bps / mu_f) ** -2 + q
    return 1e6 * min(max(d, dth_min_ms / 1000), dth_max_ms / 1000)


def test_dth_falls_as_admitted_rate_over_fair_share_grows():
    # four constant-rate flows, 95 Mbit/s in total on 100: nothing is dropped,
    # so the admitted rate mu_i is the sending rate; I = 4, mu_f = 25 Mbit/s.
    rates = {1: 12.5e6, 2: 22.5e6, 3: 27.5e6, 4: 32.5e6}  # mu_i/mu_f = 0.5 0.9 1.1 1.3
    tr = merge(*(cbr(f, r, 0, 2 * SEC, length=1000 + 100 * f) for f, r in rates.items()))
    r = run(tr, "ckcd", rate_bps=C, extra=["--xstats-every-ms", "250"])
    t, xs = next((t, x) for t, x in r.xstats if t >= 1 * SEC)
    assert int(xs["active_flows"]) == 4
    flows = xs["flows"]
    dth = [flows[f]["dth_us"] for f in sorted(rates)]
    assert dth == sorted(dth, reverse=True) and len(set(dth)) == 4, dth
    for f, rate in rates.items():
        mu = flows[f]["mu_bps"]
        assert mu == pytest.approx(rate, rel=0.02)
        assert flows[f]["dth_us"] == pytest.approx(eq9_dth_us(mu, 4), rel=0.02, abs=2)


@pytest.mark.parametrize("active_min_bytes, counted", [(3000, 2), (0, 4)])
def test_active_flows_i_counts_flows_not_pings(active_min_bytes, counted):
    """Algorithm 1's I is the number of flows sharing the link. A ping every 200 ms and a
    1-packet-a-second LLDP-like flow are not: with the default active_min_bytes (3000 bytes
    in a 100 ms window) only the two 40 Mbit/s flows count, and mu_f = C / 2; with 0 (the
    paper's text read literally: any flow that sent a packet) all four do in the window in
    which all four sent (1.0-1.1 s: the ping at 1.05 s, the LLDP frame at 1.01 s). docs/ckcd.md, "Watching the mechanism", has what the extra count cost."""
    tr = merge(cbr(1, 40e6, 0, 2 * SEC, length=1500), cbr(2, 40e6, 0, 2 * SEC, length=1500),
               cbr(3, 98 * 8 / 0.2, 50 * MS, 2 * SEC, length=98),   # ping: 98 bytes every 200 ms
               [(1010 * MS, 4, 60, 0)])                              # an LLDP frame
    r = run(tr, f"ckcd active_min_bytes={active_min_bytes}", rate_bps=C, extra=["--xstats-every-ms", "10"])
    # just after the window in which all four sent (the LLDP frame at 1.01 s), I is the
    # larger of this window's and the last one's count
    xs = next(x for t, x in r.xstats if t >= 1150 * MS)
    assert (xs["active_flows"], xs["fair_share_bps"]) == (str(counted), str(C // counted))


def test_dth_of_a_flow_at_its_fair_share_is_d():
    """docs/ckcd.md section 6: K = D - Q, so d_th = D exactly when mu_i = mu_f = C/I."""
    # four flows of 1250-byte packets every 400 us: 25 Mbit/s each, exactly
    # 250 packets in every 100 ms window (the first arrival, at 0.2 ms, starts
    # the window grid), so mu_i = C/4 exactly; together they fill the link.
    tr = merge(*(cbr(f, 25e6, 200_000 + 100_000 * f, SEC, length=1250) for f in range(4)))
    r = run(tr, "ckcd d_ms=5", rate_bps=C, extra=["--xstats-every-ms", "500"])
    xs = r.xstats[0][1]
    assert (xs["active_flows"], xs["fair_share_bps"]) == ("4", str(C // 4))
    assert r.stats["total"]["drops"] == dict.fromkeys(r.stats["total"]["drops"], 0)
    for f in range(4):
        assert xs["flows"][f]["mu_bps"] == C // 4
        assert xs["flows"][f]["dth_us"] == 5000


def test_dth_is_clamped():
    # one flow at 1 % of the link: d_th would be ~50 s; it is clamped to dth_max_ms
    tr = merge(cbr(1, 1e6, 0, SEC), cbr(2, 90e6, 0, SEC))
    r = run(tr, "ckcd dth_max_ms=40 dth_min_ms=1", rate_bps=C, extra=["--xstats-every-ms", "500"])
    flows = r.xstats[0][1]["flows"]
    assert flows[1]["dth_us"] == 40_000
    assert flows[2]["dth_us"] == 1_000  # 1.8x the fair share: eq. 9 goes negative


@pytest.mark.parametrize("new_dth, dth_us", [(0, 50_000), (1, 5_000)])
def test_a_flow_without_an_admitted_rate_yet_starts_at_dth_max_or_at_d(new_dth, dth_us):
    """docs/ckcd.md section 7: mu_i = 0 (a new flow, before its first complete window) gives
    dth_max_ms (eq. 9's limit; the default) or, with new_dth=1, D (Algorithm 1 line 1)."""
    tr = merge(cbr(1, 40e6, 0, SEC), cbr(2, 40e6, 505 * MS, SEC))
    r = run(tr, f"ckcd d_ms=5 dth_max_ms=50 new_dth={new_dth}", rate_bps=C, extra=["--xstats-every-ms", "50"])
    xs = next(x for t, x in r.xstats if t >= 550 * MS)
    assert xs["flows"][2]["mu_bps"] == 0 and xs["flows"][2]["dth_us"] == dth_us
    later = next(x for t, x in r.xstats if t >= 750 * MS)  # a complete window: eq. 9 from mu_i
    assert later["flows"][2]["mu_bps"] > 0 and later["flows"][2]["dth_us"] not in (0, 50_000)


def test_enqueue_phase_compares_and_drops_pairs_when_qavg_above_qmin():
    # explicit thresholds low enough that q_avg passes q_min: the CHOKe-like
    # comparison runs and matched pairs are dropped together
    tr = merge(poisson(1, 150e6, 0, SEC, seed=5), poisson(2, 30e6, 0, SEC, seed=5))
    r = run(tr, "ckcd qmin=5 qmax=60 delta_ms=1000", rate_bps=C)
    matches = r.dropped("choke-match")
    assert matches and len(matches) % 2 == 0
    assert int(r.xstats[-1][1]["matched"]) * 2 == len(matches)
    heavy = sum(1 for p in matches if p["flow"] == 1)
    assert heavy > 0.8 * len(matches)  # the flow holding most of the buffer is hit


def test_qmin_qmax_clamped_to_buffer_when_bdp_does_not_fit():
    # 100 Mbit/s x 20 ms = 167 packets > 80: q_max = limit, q_min = limit/3
    r = run(cbr(1, 1e6, 0, 10 * MS), "ckcd limit=80 rate_bps=100000000 rtt_ms=20")
    xs = r.xstats[-1][1]
    assert (xs["bdp_pkts"], xs["qmin_eff"], xs["qmax_eff"]) == ("167", "26", "80")
    # a small BDP fits: the paper's q_min = BDP, q_max = 3 BDP
    r = run(cbr(1, 1e6, 0, 10 * MS), "ckcd limit=80 rate_bps=10000000 rtt_ms=20")
    xs = r.xstats[-1][1]
    assert (xs["bdp_pkts"], xs["qmin_eff"], xs["qmax_eff"]) == ("17", "17", "51")


# ---- the Delta rules and I, packet by packet -------------------------------
# d_th is pinned to 2 ms (dth_min_ms = dth_max_ms) so that "above d_th" is
# "sojourn >= 2 ms" whatever mu_i and I are, and q_min/q_max are raised out of
# reach of these queues so the enqueue phase drops nothing.
DTH = 2 * MS
DELTA = 50 * MS
PINNED = "ckcd limit=80 qmin=70 qmax=80 delta_ms=50 dth_min_ms=2 dth_max_ms=2"
PKT_NS = 1500 * 8 * SEC // C  # one 1500-byte packet on the 100 Mbit/s link


def burst(flow: int, t_ns: int, n: int, length: int = 1500):
    return [(t_ns, flow, length, 0)] * n


def by_time(r, flow: int) -> list[dict]:
    return sorted((p for p in r.packets if p["flow"] == flow), key=lambda p: p["t_ns"])


@pytest.mark.parametrize("restart", [False, True])
def test_first_delay_drop_only_after_sojourn_above_dth_for_delta(restart):
    """docs/ckcd.md section 8: a flow enters the dropping state only when its sojourn has been >= d_th for Delta."""
    # 40 packets at once, then arrivals at the link rate: a standing queue of
    # 40 packets (4.8 ms). With restart, the queue drains at 30 ms and a new
    # burst at 36 ms starts with packets below d_th, which restart the clock.
    if restart:
        tr = merge(burst(1, MS, 40), cbr(1, C, MS + 1, 30 * MS), burst(1, 36 * MS, 40), cbr(1, C, 36 * MS + 1, 150 * MS))
    else:
        tr = merge(burst(1, MS, 40), cbr(1, C, MS + 1, 120 * MS))
    r = run(tr, PINNED, rate_bps=C)
    pk = by_time(r, 1)
    first_drop = next(p for p in pk if p["reason"] == "delay")
    before = [p for p in pk if p["t_ns"] < first_drop["t_ns"]]
    assert all(p["verdict"] == "sent" for p in before)
    # the clock starts at the first packet above d_th after the last one below
    last_below = max(i for i, p in enumerate(before) if p["sojourn_ns"] < DTH)
    started = before[last_below + 1]
    assert started["sojourn_ns"] >= DTH
    waited = first_drop["t_ns"] - started["t_ns"]
    assert DELTA <= waited < DELTA + 2 * PKT_NS, waited
    first_above = next(p for p in pk if p["sojourn_ns"] >= DTH)
    if restart:  # the clock was restarted: the first run above d_th did not count
        assert started["t_ns"] - first_above["t_ns"] > 30 * MS
    else:
        assert started is first_above


@pytest.mark.parametrize("below_ms", [40, 60])
def test_dropping_state_left_only_after_sojourn_below_dth_for_delta(below_ms):
    """docs/ckcd.md section 8: a dropping flow leaves the state only when its sojourn has stayed below d_th for Delta."""
    # 0-100 ms: a standing queue at 110 Mbit/s, the flow is put in the dropping
    # state; then below_ms at 20 Mbit/s (the queue drains: sojourn ~0); then a
    # burst of 40 packets whose later ones are above d_th again.
    t2 = 100 * MS
    t3 = t2 + below_ms * MS
    tr = merge(burst(1, MS, 40), cbr(1, 110e6, MS + 1, t2), cbr(1, 20e6, t2, t3), burst(1, t3, 40),
               cbr(1, 20e6, t3 + 1, t3 + 20 * MS))
    r = run(tr, PINNED, rate_bps=C, extra=["--xstats-every-ms", "1"])
    pk = by_time(r, 1)
    assert any(p["reason"] == "delay" for p in pk if p["t_ns"] < t2)  # it was dropping
    last_above = max(p["t_ns"] for p in pk if p["t_ns"] < t3 and p["sojourn_ns"] >= DTH)
    below_since = min(p["t_ns"] for p in pk if p["t_ns"] > last_above)
    back_above = next(p for p in pk if p["t_arr_ns"] >= t3 and p["sojourn_ns"] >= DTH)
    stayed_below_for_delta = back_above["t_ns"] - below_since > DELTA
    assert stayed_below_for_delta == (below_ms > 50)
    # still dropping: the first packet above d_th again is dropped at once;
    # left: it is forwarded (and the entry clock starts afresh)
    assert back_above["reason"] == (None if stayed_below_for_delta else "delay")
    # the state as xstats shows it, sampled every ms
    state = [(t, x["flows"][1]["dropping"]) for t, x in r.xstats if 1 in x.get("flows", {})]
    left = [t for (t, d), (_, d0) in zip(state[1:], state) if d0 == 1 and d == 0]
    if stayed_below_for_delta:
        assert len(left) == 1 and below_since + DELTA <= left[0] <= below_since + DELTA + 2 * MS, left
    else:
        assert not left
        assert all(d == 1 for t, d in state if below_since <= t < back_above["t_ns"])


def test_spacing_1_spaces_drops_by_codels_law_in_the_dropping_state():
    """docs/ckcd.md section 8, spacing=1 (the paper's "similar to CoDel"): once dropping, the
    k-th next drop is due Delta/sqrt(k) after the one before (counted from when it was due, as
    RFC 8289's drop_next), not at every late packet as spacing=0 drops."""
    # A standing queue fed at 110 Mbit/s over the 100 Mbit/s link for 300 ms: every packet
    # is late (sojourn >= d_th = 2 ms) once the first 40 are queued.
    tr = merge(burst(1, MS, 40), cbr(1, 110e6, MS + 1, 300 * MS))
    literal = [p for p in by_time(run(tr, PINNED, rate_bps=C), 1) if p["reason"] == "delay"]
    spaced = [p["t_ns"] for p in by_time(run(tr, PINNED + " spacing=1", rate_bps=C), 1)
              if p["reason"] == "delay"]
    assert len(literal) > 10 * len(spaced) > 0, (len(literal), len(spaced))
    due = spaced[0]
    for k, t in enumerate(spaced[1:], start=2):
        due += DELTA / math.sqrt(k - 1)  # the entry drop set count 1: Delta, Delta/sqrt(2), ...
        # dropped at the first dequeue once due: within one packet time (0.12 ms), plus the
        # 256 ns the fixed-point law rounds off per step
        assert due - k * 256 <= t < due + PKT_NS + k * 256, (k, t - spaced[0], due - spaced[0])
    assert len(spaced) >= 5


@pytest.mark.parametrize("spacing", [0, 1])
def test_spacing_1_leaves_the_dropping_state_at_the_first_packet_below_dth(spacing):
    """spacing=1 leaves at the first packet below d_th (RFC 8289); spacing=0 only after Delta below."""
    t2 = 100 * MS
    t3 = t2 + 40 * MS  # 40 ms below d_th: less than Delta (50 ms)
    tr = merge(burst(1, MS, 40), cbr(1, 110e6, MS + 1, t2), cbr(1, 20e6, t2, t3), burst(1, t3, 40),
               cbr(1, 20e6, t3 + 1, t3 + 20 * MS))
    r = run(tr, PINNED + f" spacing={spacing}", rate_bps=C, extra=["--xstats-every-ms", "1"])
    pk = by_time(r, 1)
    assert any(p["reason"] == "delay" for p in pk if p["t_ns"] < t2)  # it was dropping
    first_below = min(p["t_ns"] for p in pk if t2 <= p["t_ns"] < t3 and p["sojourn_ns"] < DTH)
    state = [(t, x["flows"][1]["dropping"]) for t, x in r.xstats if 1 in x.get("flows", {})]
    left = [t for (t, d), (_, d0) in zip(state[1:], state) if d0 == 1 and d == 0]
    if spacing:
        assert left and first_below <= left[0] <= first_below + 2 * MS, (left, first_below)
    else:
        assert not [t for t in left if t < t3], left


def test_active_flow_count_forgets_a_silent_flow_after_one_full_window():
    """docs/ckcd.md section 5: I counts flows that arrived in this or the last complete window, so mu_f = C/I grows after."""
    window = 100 * MS
    stop = 251 * MS  # flow 4's last arrival
    tr = merge(*(cbr(f, 20e6, MS + 10_000 * f, stop if f == 4 else 600 * MS) for f in (1, 2, 3, 4)))
    r = run(tr, "ckcd window_ms=100", rate_bps=C, extra=["--xstats-every-ms", "10"])
    first = min(t for t, *_ in tr)  # starts the window grid
    last4 = max(t for t, f, *_ in tr if f == 4)
    # flow 4 still counts through the window after the one it last arrived in
    forgotten = first + ((last4 - first) // window + 2) * window
    assert 400 * MS < forgotten < 410 * MS
    seen = {}
    for t, xs in r.xstats[:-1]:
        if 10 * MS <= t < forgotten:
            assert (xs["active_flows"], xs["fair_share_bps"]) == ("4", str(C // 4)), t
            seen["4"] = xs
        elif t >= forgotten + MS:
            assert (xs["active_flows"], xs["fair_share_bps"]) == ("3", str(C // 3)), t
            assert 4 not in xs["flows"]
            seen["3"] = xs
    # at 20 of 25 and then 20 of 33.3 Mbit/s the remaining flows' d_th rises
    # (both values inside the clamps, so eq. 9 decides them)
    for f in (1, 2, 3):
        before, after = seen["4"]["flows"][f]["dth_us"], seen["3"]["flows"][f]["dth_us"]
        assert 500 < before < after < 50_000, (before, after)


@pytest.mark.parametrize("table", [16, 64])
def test_more_flows_than_table_entries_evicts_and_keeps_forwarding(table):
    """docs/ckcd.md section 9: with more flows than entries, entries are evicted (counted) and every flow is still served."""
    # 40 flows at 3 Mbit/s: 120 Mbit/s into 100, so the AQM acts meanwhile
    tr = merge(*(poisson(f, 3e6, 0, SEC, seed=11) for f in range(1, 41)))
    r = run(tr, f"ckcd flows={table}", rate_bps=C, extra=["--xstats-every-ms", "100"])
    xs = r.xstats[-1][1]
    if table == 16:
        assert xs["flows_used"] == "16"
        assert int(xs["evictions"]) > 40
    else:  # room for all: nothing evicted (the counter means something)
        assert (xs["flows_used"], xs["evictions"]) == ("40", "0")
    assert len(r.packets) == len(tr) and r.stats["qlen_pkts"] == 0  # every packet has one fate
    assert sum(p["len"] for p in r.sent(None, 100 * MS, SEC)) * 8 * SEC / (0.9 * SEC) >= 0.95 * C
    for f in range(1, 41):
        assert r.sent(f, 900 * MS, SEC), f  # still forwarded at the end


def test_mu_net_counts_the_bytes_a_flow_is_served_not_admitted():
    """docs/ckcd.md section 4, mu_net: mu_i is the flow's "virtual
    arrival rate". With mu_net=0 (default) it is the admitted rate, so a flow whose
    admitted packets are dropped again at dequeue (delay drops, match victims) still
    looks as fast as it arrives; with mu_net=1 those bytes leave mu_i, which then follows
    the rate the flow is served at. Flow 1 (80 Mbit/s beside 40 on a 100 Mbit/s link)
    is served about 57-60 Mbit/s. Tolerance 3 %: mu_i is sampled every 100 ms over 3 s,
    and packets queued across a window edge count in the window they arrived in."""
    tr = merge(poisson(1, 80e6, 0, 4 * SEC, seed=1), poisson(2, 40e6, 0, 4 * SEC, seed=2))
    for net in (0, 1):
        r = run(tr, f"ckcd mu_net={net}", rate_bps=C, extra=["--xstats-every-ms", "100"])
        mus = [x["flows"][1]["mu_bps"] for t, x in r.xstats if SEC <= t < 4 * SEC]
        mean_mu = sum(mus) / len(mus)
        f = r.flows[1]
        arrival_drops = f["drops"]["early"] + f["drops"]["overflow"] + f["drops"]["choke-match"] / 2
        admitted = (f["arr_pkts"] - arrival_drops) * 1500 * 8 / 4
        served = r.rate_bps(1, SEC, 4 * SEC)
        assert mean_mu == pytest.approx(served if net else admitted, rel=0.03), (net, mean_mu, served, admitted)
        assert served < 0.8 * admitted or net  # the two readings differ by far more than the tolerance


def test_mu_gain_smooths_mu_i_from_window_to_window():
    """docs/ckcd.md section 4, mu_gain: mu_i <- mu_i + gain (last
    window's rate - mu_i). gain 1 (default, the paper's one window) jumps to a step at
    once; gain 0.25 moves a quarter of the way each window: 20 -> 30 -> 37.5 Mbit/s."""
    tr = merge(cbr(1, 20e6, 0, SEC, length=1250), cbr(1, 60e6, SEC, 2 * SEC, length=1250))
    seen = {}
    for gain in ("1", "0.25"):
        r = run(tr, f"ckcd mu_gain={gain}", rate_bps=C, extra=["--xstats-every-ms", "50"])
        mus = [x["flows"][1]["mu_bps"] for t, x in r.xstats if 900 * MS <= t <= 1400 * MS]
        seen[gain] = sorted(set(round(m / 1e5) / 10 for m in mus))  # Mbit/s, 0.1 resolution
    assert seen["1"] == [20.0, 60.0]
    assert seen["0.25"][:3] == [20.0, 30.0, 37.5]
