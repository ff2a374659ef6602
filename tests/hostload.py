"""The host's CPU during a traffic measurement, for the failure message of its assertion.

A rate measured on a 2-core VM that other work (or the hypervisor: steal) kept busy says as
much about the host as about the product. The experiments record this with
experiments.run.probes.cpu.CpuSampler and judge a run by it; the lab tests take the same samples around
their measured window and put them in the message of the assertion that checks the rate, so
a failure on a loaded host says so:

    with HostLoad() as load:
        bulk = goodput_bps(iperf3(h1, h3, "cubic", duration_s=8))
    assert low <= bulk <= high, f"metered CUBIC at {bulk / 1e6:.1f} Mbit/s; {load}"
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

from experiments.analysis.fidelity import CPU_SATURATED_MAX_FRACTION, CPU_SATURATED_PCT, STEAL_HIGH_PCT
from experiments.run.probes.cpu import CpuSampler

SAMPLE_PERIOD_S = 0.5  # two samples a second: a 1 s iperf3 run still gets one


def vswitchd_pid() -> int | None:
    """The private OVS's ovs-vswitchd (ovs_config.private_ovs sets OVS_RUNDIR), or None."""
    try:
        with open(os.path.join(os.environ["OVS_RUNDIR"], "ovs-vswitchd.pid")) as f:
            return int(f.read().strip())
    except (KeyError, OSError, ValueError):
        return None


class HostLoad:
    """Samples /proc/stat (busy and steal % of all cores) and, when known, ovs-vswitchd's and
    the link daemons' share of a core, from __enter__ to __exit__; str() summarizes them."""

    def __init__(self, link_pids=(), period_s: float = SAMPLE_PERIOD_S):
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._sampler = CpuSampler(self._t0, [vswitchd_pid(), os.getpid(), *link_pids], self._stop,
                                   period_s=period_s)
        self._thread = threading.Thread(target=self._sampler.run, name="hostload", daemon=True)
        self.window_s = 0.0

    def __enter__(self) -> "HostLoad":
        self._t0 = self._sampler.t0 = time.monotonic()
        self._thread.start()
        return self

    @property
    def t0(self) -> float:
        """The monotonic time the samples' t_s count from."""
        return self._t0

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.window_s = time.monotonic() - self._t0

    @property
    def samples(self):
        return list(self._sampler.series)

    def steal_pct(self, since_s: float = 0.0, until_s: float = float("inf")) -> float | None:
        """Mean steal over the samples taken between since_s and until_s (seconds after t0);
        None if none was."""
        steal = [s.steal_pct for s in self.samples if since_s <= s.t_s <= until_s]
        return sum(steal) / len(steal) if steal else None

    @property
    def disturbed(self) -> bool:
        """The hypervisor withheld the CPU for the measurement: mean steal at or above the
        experiments' STEAL_HIGH_PCT, at which they do not trust a run either."""
        return is_disturbed(self.steal_pct())

    def __str__(self) -> str:
        samples = self.samples
        if not samples:
            return f"host CPU: no sample in the {self.window_s:.1f} s measured"
        busy = [s.busy_pct for s in samples]
        steal = [s.steal_pct for s in samples]
        text = (f"host CPU over the {self.window_s:.1f} s measured: busy {sum(busy) / len(busy):.0f} % "
                f"(max {max(busy):.0f}), steal {sum(steal) / len(steal):.1f} % (max {max(steal):.1f})")
        vswitchd = [s.vswitchd_core_pct for s in samples if s.vswitchd_core_pct]
        if vswitchd:
            text += f", ovs-vswitchd {max(vswitchd):.0f} % of a core at most"
        links = [s.links_core_pct for s in samples if s.links_core_pct]
        if links:
            text += f", link daemons {max(links):.0f} % of a core at most"
        # The experiments' limits (experiments/analysis/metrics.py) for a run not to be trusted.
        saturated = sum(1 for b in busy if b > CPU_SATURATED_PCT) / len(busy)
        if sum(steal) / len(steal) >= STEAL_HIGH_PCT:
            text += f" - LOADED: steal at or above {STEAL_HIGH_PCT:g} %, the hypervisor withheld the CPU"
        elif saturated > CPU_SATURATED_MAX_FRACTION:
            text += f" - LOADED: above {CPU_SATURATED_PCT:g} % busy in {saturated:.0%} of the samples"
        return text


def is_disturbed(steal_pct: float | None) -> bool:
    return steal_pct is not None and steal_pct >= STEAL_HIGH_PCT


QUIET_PROBE_S = 2.0     # each look at the host: this long with every core busy
QUIET_PERIOD_S = 10.0   # and this long between looks


def steal_under_load(seconds: float = QUIET_PROBE_S) -> float:
    """The hypervisor's steal (% of all cores) while a busy loop runs on every core for
    `seconds`. Steal shows only while the VM wants its CPU, so an idle moment cannot tell a
    quiet host from one whose hypervisor is giving the CPU to others."""
    burners = []
    try:
        all0, _, steal0 = CpuSampler.totals()
        burners = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 1)]
        time.sleep(seconds)
        all1, _, steal1 = CpuSampler.totals()
    finally:
        for p in burners:  # by PID: nothing else is ours to stop
            p.kill()
            p.wait()
    return 100.0 * (steal1 - steal0) / max(1, all1 - all0)


def wait_for_quiet_host(max_wait_s: float) -> tuple[bool, float]:
    """Look at the host (steal_under_load) every QUIET_PERIOD_S until its steal is under
    STEAL_HIGH_PCT or max_wait_s has passed; (quiet, seconds waited). The hypervisor's steal
    comes in spells of minutes on our shared machines (docs/kernel.md): a measurement that met
    one is worth repeating after it, not at once."""
    t0 = time.monotonic()
    while True:
        if not is_disturbed(steal_under_load()):
            return True, time.monotonic() - t0
        if time.monotonic() - t0 + QUIET_PERIOD_S > max_wait_s:
            return False, time.monotonic() - t0
        time.sleep(QUIET_PERIOD_S)


def proc_ticks(pid) -> int:
    """User + system clock ticks the process has used (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return int(rest[11]) + int(rest[12])
    except (OSError, IndexError, ValueError, TypeError):
        return 0


class ProcCpu:
    """Each named process's share of one core between __enter__ and __exit__ (/proc/PID/stat)."""

    def __init__(self, pids: dict):
        self.pids = pids
        self.core_pct: dict = {}

    def __enter__(self):
        self.t0 = time.monotonic()
        self.ticks = {name: proc_ticks(pid) for name, pid in self.pids.items()}
        return self

    def __exit__(self, *exc):
        dt = time.monotonic() - self.t0
        hz = os.sysconf("SC_CLK_TCK")
        self.core_pct = {name: round(100.0 * (proc_ticks(pid) - self.ticks[name]) / hz / dt, 1)
                         for name, pid in self.pids.items()}
