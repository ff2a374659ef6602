"""When a run's numbers are not to be trusted, and why: the machine did not keep up (CPU,
the hypervisor), ckcd-link fell behind its schedule or lost frames outside its queue, ping waited
outside the emulated link, a flow failed or was held back by its receiver, or the goodput read
above what TCP can carry. Each rule gives its reason in words a user acts on; the limits are
here, with the measurements they come from (docs/experiments.md, "Fidelity").
"""

from __future__ import annotations

from ovs_config.link_daemon import lateness, schedule_kept


CPU_SATURATED_PCT = 90.0        # a sample above this is saturated ...
CPU_SATURATED_MAX_FRACTION = 0.10  # ... and more than this fraction of them makes the run untrusted

# Mean VM steal at which a late ckcd-link is blamed on the hypervisor: its vCPU was not
# running, so no setting of ours could have kept the schedule (measured: 21 % steal gave
# 9.4 % of releases over 1 ms late, 4 % steal gave 2.0 % in the same fidelity scenario).
STEAL_HIGH_PCT = 10.0

# How late ckcd-link may release frames on average: the largest lateness that moved neither
# Jain's index nor utilization of seed 000's BBR + CUBIC case (DropTail and CKCD) by more than
# their run-to-run CI, in the built-in grid `emulator_lateness` (three trusted 60 s runs a point).
# Its published table `lateness` (docs/experiments.md, "How late may the emulator be") reruns the
# grid: nothing moves at this lateness, and DropTail's Jain is the first to move, at several times it.
SCHEDULE_MAX_LATE_MEAN_US = 130.0
# ... and at most this fraction of releases over 1 ms late: a tail check (exact releases had
# 0.5-1.4 %; a stalled vCPU gives 2-9 %), not from the curve.
SCHEDULE_MAX_OVER_1MS_FRACTION = 0.05

# Ping's mean RTT may exceed what the emulated link explains (2 x delay + the queueing delay
# ping's own frames met there) by this much before the run is untrusted: the rest was spent
# outside ckcd-link (vswitchd, the hosts, a stalled vCPU). From the same curve: what trusted runs
# with exact or harmlessly late releases left unexplained (0.26-0.85 ms), plus what the harmless
# lateness adds to a round trip beyond exact releases' (2 x (130 - 30) us). The curve's runs
# (seed 000's BBR + CUBIC under DropTail and CKCD) had one queue, which ping shares with the
# flows: there its own wait is the link's mean, which those runs were judged by, so the limit
# holds for the per-flow rule as well.
RTT_EXCESS_MAX_MS = 1.1
# An echo request or reply of ping's default 56 bytes: Ethernet 14, IPv4 20, ICMP 8.
PING_FRAME_BYTES = 98

# The most TCP payload an Ethernet link of rate R carries: R x 1448/1514 with 1500-byte frames
# (MSS 1448 with timestamps, 66 bytes of Ethernet, IP and TCP headers; the link counts frames,
# not preamble or gap). A run reading more than this plus the tolerance measured something wrong:
# goodput from the bytes the sender saw acknowledged matched the wire's payload within 0.3 Mbit/s
# at 100 Mbit/s (intra_bbr, three trusted runs).
GOODPUT_CEILING = 1448 / 1514
CEILING_TOLERANCE = 0.005

# A flow held back by its receiver's window for more than this fraction of its busy time in the
# window was limited by the receiving host (its iperf3 fell behind reading), not by the network.
RWND_LIMITED_MAX_FRACTION = 0.05

# Frames a ckcd-link lost before any emulated queue saw them, by its stats' counter: no
# discipline decided these losses, so a run with any is untrusted.
LOST_OUTSIDE_QUEUE = {
    "rx_kernel_drops": "the kernel dropped {n} frames before ckcd-link read them (its receive ring was full: "
                       "the daemon fell behind{blame})",
    "rx_no_buffer": "ckcd-link had no buffer for {n} arrivals (its frame pool was empty)",
    "host_delay_drops": "{n} frames of a host with an access delay found its line full (an unresponsive sender)",
}


def lost_before_link(final: dict | None) -> dict | None:
    """LOST_OUTSIDE_QUEUE's counters summed over both directions; a counter the ckcd-link that
    ran did not give is left out. None without final stats."""
    if not final or "dirs" not in final:
        return None
    dirs = list(final["dirs"].values())
    return {k: sum(d[k] for d in dirs) for k in LOST_OUTSIDE_QUEUE if all(k in d for d in dirs)}


def link_extra_ms(link) -> float:
    """What the emulated link adds to ping's round trip beyond 2 x its forward delay: the reverse
    direction's own delay where it differs ([link.reverse]), and the serialization of ping's own
    frames at each direction's fixed rate (98 bytes: 16 us at 50 Mbit/s, 0.8 ms at 1 Mbit/s; a
    direction that follows a trace serves them within an opportunity it waited for in the queue)."""
    reverse = link.reverse
    extra = (link.delay_ms if reverse.delay_ms is None else reverse.delay_ms) - link.delay_ms
    for rate_bps, trace in ((link.rate_bps, link.trace), (reverse.rate_bps or link.rate_bps, reverse.trace)):
        if not trace:
            extra += PING_FRAME_BYTES * 8 / rate_bps * 1000
    return extra


def untrusted_reasons(cpu: dict, links: dict, rtt: dict, delay_ms: float, flows: list[dict],
                       ping_access_ms: float = 0.0, link_ms: float = 0.0) -> list[str]:
    """Why the run's numbers should not be trusted, in this order: a saturated CPU, links that
    fell behind their schedule, ping waiting outside the emulated link, failed flows."""
    blame = _blame(cpu)
    return (_cpu_reasons(cpu["saturated_fraction"]) + _schedule_reasons(links, blame)
            + _rtt_reasons(rtt["mean"], delay_ms, links, blame, ping_access_ms, link_ms)
            + [f"flow {f['label']}: {f['error']}" for f in flows if f["error"]]
            + [f"flow {f['label']} was held back by its receiver's window {100 * f['rwnd_limited_fraction']:.0f} % of "
               f"its busy time (limit {100 * RWND_LIMITED_MAX_FRACTION:.0f} %): its receiving iperf3 fell behind "
               f"reading{blame}" for f in flows
               if (f.get("rwnd_limited_fraction") or 0) > RWND_LIMITED_MAX_FRACTION])


def _blame(cpu: dict) -> str:
    """Timing faults (a late link, delay outside it) are blamed on the hypervisor, with the
    advice to rerun, when it held back the vCPU; otherwise they are ours to explain."""
    steal = cpu["steal_mean_pct"] or 0.0
    return f"; the hypervisor took {steal:.0f} % of the CPU (steal): rerun" if steal >= STEAL_HIGH_PCT else ""


def group_ping_reasons(label: str, cpu: dict, rtt_mean: float | None, delay_ms: float, links: dict,
                       access_ms: float, link_ms: float) -> list[str]:
    """The RTT check of an RTT group's ping (links: with that ping's own queueing delay), as the
    main ping's, its reason named by the ping."""
    return [f"{label}: {why}" for why in _rtt_reasons(rtt_mean, delay_ms, links, _blame(cpu), access_ms, link_ms)]


def ceiling_reasons(utilization: float, flows: list[dict], direction: str = "") -> list[str]:
    """direction: "" for the forward link, "reverse " for the reverse flows' own."""
    if utilization <= GOODPUT_CEILING + CEILING_TOLERANCE:
        return []
    sources = sorted({f["goodput_source"] for f in flows})
    return [f"{direction}utilization {100 * utilization:.1f} % is above TCP's goodput ceiling of "
            f"{100 * GOODPUT_CEILING:.1f} % "
            f"(+ {100 * CEILING_TOLERANCE:g} points of tolerance): the throughput measured from "
            f"{' and '.join(sources)} is wrong for this run"]


def _cpu_reasons(saturated: float) -> list[str]:
    if saturated <= CPU_SATURATED_MAX_FRACTION:
        return []
    return [f"CPU above {CPU_SATURATED_PCT:.0f} % in {100 * saturated:.0f} % of the seconds "
            f"(limit {100 * CPU_SATURATED_MAX_FRACTION:.0f} %)"]


def _schedule_reasons(links: dict, blame: str) -> list[str]:
    reasons = []
    for name, link in links.items():
        s = link["schedule"]
        if s["kept"] is None:
            reasons.append(f"{name}: no final stats from ckcd-link")
        elif not s["kept"]:
            reasons.append(f"{name}: ckcd-link fell behind its schedule ({100 * s['late_over_1ms_fraction']:.1f} % "
                           f"of releases > 1 ms late, mean {s['late_mean_us']:.0f} us{blame})")
        for counter, n in (link.get("lost_before_link") or {}).items():
            if n:
                reasons.append(f"{name}: " + LOST_OUTSIDE_QUEUE[counter].format(n=n, blame=blame))
    return reasons


def _rtt_reasons(rtt_mean: float | None, delay_ms: float, links: dict, blame: str,
                 access_ms: float = 0.0, link_ms: float = 0.0) -> list[str]:
    """access_ms: the ping hosts' access delays (their frames wait them in ckcd-link too);
    link_ms: link_extra_ms."""
    excess = unexplained_rtt_ms(rtt_mean, delay_ms, links, access_ms, link_ms)
    if excess is None or excess <= RTT_EXCESS_MAX_MS:
        return []
    access = f" + {access_ms:g} ms of access delays" if access_ms else ""
    if link_ms >= 0.05:
        access += f" + {link_ms:.1f} ms of the link's reverse delay and serialization"
    queue_ms, own = _queue_explained_ms(links)
    queue = (f"{queue_ms:.1f} ms that ping's own frames waited in its queues" if own
             else f"the links' largest mean queueing delay, {queue_ms:.1f} ms")
    return [f"ping RTT {rtt_mean:.1f} ms is {excess:.1f} ms above what the emulated link explains "
            f"(2 x {delay_ms:g} ms{access} + {queue}; limit "
            f"{RTT_EXCESS_MAX_MS:g} ms): packets waited outside ckcd-link{blame}"]


def unexplained_rtt_ms(rtt_mean: float | None, delay_ms: float, links: dict, access_ms: float = 0.0,
                       link_ms: float = 0.0) -> float | None:
    """What of ping's mean RTT the emulated link does not explain (_rtt_excess_ms, less the ping
    hosts' access delays, which their frames wait in ckcd-link too, and link_extra_ms)."""
    excess = _rtt_excess_ms(rtt_mean, delay_ms, links)
    return None if excess is None else excess - access_ms - link_ms


def _rtt_excess_ms(rtt_mean: float | None, delay_ms: float, links: dict) -> float | None:
    """Ping's mean RTT minus the base RTT, what ping's frames waited in the links' queues
    (_queue_explained_ms) and any lateness put there on purpose."""
    queue_ms, _ = _queue_explained_ms(links)
    if rtt_mean is None or queue_ms is None:
        return None
    intended = max(link.get("intended_late_rtt_ms", 0.0) for link in links.values())
    return rtt_mean - 2 * delay_ms - queue_ms - intended


def _queue_explained_ms(links: dict) -> tuple[float | None, bool]:
    """(What ping's frames waited in the links' queues, whether it is their own wait).

    Their own: ckcd-link logs each flow's sojourn, and ping's echo requests and replies are a
    flow of their own in each direction (ping_queue_delay_ms, summed over the links it crossed).
    A discipline with several queues makes ping's wait differ from the link's mean: behind
    DualPI2, Not-ECT ping waits in the classic queue while the mean also counts the L queue's
    near-zero; behind fq_codel it waits in its own sparse flow.

    Records from before per-flow sojourn fall back to the largest mean queueing delay of the
    links (ping takes one of them). Ping samples the queue in time, so there the queue's mean is
    taken over time too, and the larger of it and the per-frame mean is what can be explained:
    when the rate halves, each frame waits twice as long but half as many frames are counted
    (seed 002's cocoa_halve: 77.4 ms over time, 68.6 per frame)."""
    own = [link["ping_queue_delay_ms"] for link in links.values() if link.get("ping_queue_delay_ms") is not None]
    if own:
        return sum(own), True
    queues = [max(v for v in (link["queue_delay_ms"]["mean"], link.get("queue_delay_time_mean_ms"))
                  if v is not None)
              for link in links.values() if link["queue_delay_ms"]["mean"] is not None]
    return (max(queues) if queues else None), False


def own_lateness_part(final: dict | None) -> str:
    """The record of ckcd-link's own lateness when a lateness was added on purpose: `own` (each
    frame against its intended release, after the hold and the FIFO wait it causes), or for a
    daemon that did not report it, `tx_wake` (the sender's wake-ups against their deadlines)."""
    dirs = list((final or {}).get("dirs", {}).values())
    return "own" if dirs and all("own" in d for d in dirs) else "tx_wake"


def judged_part(final: dict | None, release_batch_us: float, release_lateness_us: float) -> str:
    """Which of ckcd-link's lateness records the schedule check judges. Its releases against the
    schedule, unless the scenario makes them late on purpose. With link.release_batch_us every
    frame waits up to a batch for the sender's next wake-up, a wait that `own` does not take
    out (it follows the frames' send times, not the wake-ups the batch sets): the wake-ups
    against their deadlines (`tx_wake`), which the batch sets. With link.release_lateness_us
    alone, own_lateness_part."""
    if release_batch_us:
        return "tx_wake"
    return own_lateness_part(final) if release_lateness_us else "schedule"


def intended_late_ms(final: dict | None, part: str | None = None) -> float:
    """What an intended lateness (or a release batch) added to a round trip: in each direction,
    the releases' mean lateness beyond ckcd-link's own (`part`, by default own_lateness_part)."""
    part = part or own_lateness_part(final)
    dirs = (final or {}).get("dirs", {}).values()
    return sum(max(0.0, d["schedule"]["late_mean_us"] - d[part]["late_mean_us"]) for d in dirs) / 1000


def link_schedule(final: dict | None, part: str = "schedule") -> dict:
    """How late ckcd-link was: its releases against the schedule, or with an intended lateness
    or a release batch (judged_part) its sender's own wake-ups, which neither moves."""
    if not final or "dirs" not in final:
        return {"kept": None, "late_mean_us": None, "late_over_1ms_fraction": None}
    count, over, mean_us = lateness(final, part)
    return {"kept": schedule_kept(final, SCHEDULE_MAX_OVER_1MS_FRACTION, SCHEDULE_MAX_LATE_MEAN_US, part),
            "late_mean_us": mean_us, "late_over_1ms_fraction": over / count if count else 0.0, "measured": part}
