"""Start, drive and stop the userspace bottleneck link daemon ``ckcd-link``.

The daemon (datapath/link/, documented in docs/ckcd-link.md) owns two
interfaces and emulates a link between them: rate, one-way delay and a queue
discipline per direction ("ab": A->B, "ba": B->A). It is controlled over a
UNIX socket with one JSON request per line and one JSON reply per line; this
module is the Python side of that protocol. Stdlib only.

    with LinkDaemon("la", "lb", rate_bps=50_000_000, delay_ms=10,
                    qdisc="ckcd limit=80", netns="lab") as link:
        link.set_qdisc("ab", "droptail limit=20")
        print(link.stats()["dirs"]["ab"]["drops"])
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = REPO_ROOT / "datapath" / "build" / "ckcd-link"

# Exit status of the daemon when a start parameter is refused.
EXIT_BAD_PARAMETER = 2


class LinkDaemonError(RuntimeError):
    """The daemon refused a parameter or a command, or could not start.

    ``param`` names the refused parameter when the daemon said which one;
    ``exit_code`` is set when the daemon exited.
    """

    def __init__(self, message: str, param: Optional[str] = None,
                 exit_code: Optional[int] = None):
        super().__init__(message)
        self.param = param
        self.exit_code = exit_code


def _rate_arg(rate_bps: int) -> str:
    return str(int(rate_bps))


def _delay_arg(delay_ms: float) -> str:
    return f"{float(delay_ms) * 1000.0:.3f}us"


class LinkControl:
    """The control socket of a running ckcd-link, whoever started it (the lab, a test,
    an operator): one JSON request per line, one JSON reply per line."""

    def __init__(self, control_path: str):
        self.control_path = control_path


    def request(self, req: dict, timeout_s: float = 5.0) -> dict:
        """Send one request, return the reply; raise LinkDaemonError on
        {"ok": false}."""
        return self._check(self.request_raw(json.dumps(req), timeout_s))

    def request_raw(self, line: str, timeout_s: float = 5.0) -> dict:
        """Send one raw line (no validation), return the parsed reply."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(self.control_path)
            s.sendall(line.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        if not buf:
            raise LinkDaemonError("ckcd-link closed the control connection without a reply")
        try:
            return json.loads(buf)
        except ValueError:  # UnicodeDecodeError too: not what ckcd-link writes
            raise LinkDaemonError(f"ckcd-link's reply is not JSON: {buf[:200]!r}") from None

    @staticmethod
    def _check(reply: dict) -> dict:
        if not reply.get("ok"):
            raise LinkDaemonError(reply.get("error", "request refused"), param=reply.get("param"))
        return reply

    def ping(self) -> dict:
        return self.request({"cmd": "ping"})

    def show(self) -> dict:
        """Configuration: interfaces, rate, delay and discipline per direction."""
        return self.request({"cmd": "show"})

    def set_qdisc(self, direction: str, spec: str) -> dict:
        """Change the discipline of "ab" or "ba" at run time; queued packets
        are kept."""
        return self.request({"cmd": "set_qdisc", "dir": direction, "spec": spec})

    def set_link(self, rate_bps: Optional[int] = None, delay_ms: Optional[float] = None,
                 direction: str = "both") -> dict:
        req: dict[str, Any] = {"cmd": "set_link", "dir": direction}
        if rate_bps is not None:
            req["rate_bps"] = int(rate_bps)
        if delay_ms is not None:
            req["delay_ms"] = float(delay_ms)
        return self.request(req)

    def stats(self, direction: str = "both", max_flows: int = 64) -> dict:
        """Counters per direction, the discipline's stats, per-flow stats,
        sojourn percentiles and how well the daemon kept its schedule."""
        return self.request({"cmd": "stats", "dir": direction, "max_flows": int(max_flows)})

    def samples(self, direction: str = "ab", n: int = 100) -> list:
        """The last n dequeues: [t_s, sojourn_us, qlen_pkts, len] each."""
        return self.request({"cmd": "samples", "dir": direction, "n": int(n)})["samples"]


class LinkDaemon(LinkControl):
    """One ckcd-link process serving the interfaces if_a and if_b.

    rate_bps/delay_ms apply to both directions unless rate_ba_bps/delay_ba_ms
    are given (trace/trace_ba: a direction follows a delivery-opportunity trace file
    instead; loss/loss_ba: a loss model, "bernoulli p=0.01"); qdisc is the A->B discipline spec, qdisc_ba the B->A one (the
    daemon defaults to a large droptail). capture writes every frame's events to that pcapng
    file (which must not exist), the first snaplen bytes of each frame, up to capture_max_mb
    MiB (the daemon's defaults: 128 bytes, 1024 MiB; docs/ckcd-link.md, "Packet capture").
    netns runs the daemon through ``ip netns exec``. The constructor only prepares; start() (or ``with``)
    runs the daemon and returns once its control socket answers.
    """

    def __init__(self, if_a: str, if_b: str, *, rate_bps: int, delay_ms: float = 0.0,
                 qdisc: Optional[str] = None, qdisc_ba: Optional[str] = None,
                 rate_ba_bps: Optional[int] = None, delay_ba_ms: Optional[float] = None,
                 netns: Optional[str] = None, mtu: Optional[int] = None,
                 log_path: Optional[str] = None, log_interval_ms: Optional[int] = None,
                 seed: Optional[int] = None, control_path: Optional[str] = None,
                 release_batch_us: float = 0.0, release_lateness_us: float = 0.0, rx_io: str = "auto",
                 host_delay_ms: Optional[dict[str, float]] = None,
                 trace: Optional[str] = None, trace_ba: Optional[str] = None,
                 loss: Optional[str] = None, loss_ba: Optional[str] = None,
                 capture: Optional[str] = None, snaplen: Optional[int] = None,
                 capture_max_mb: Optional[int] = None,
                 binary: Optional[str] = None, extra_args: Optional[list[str]] = None):
        self.if_a, self.if_b = if_a, if_b
        self.netns = netns
        self.binary = str(binary or os.environ.get("CKCD_LINK_BIN", DEFAULT_BINARY))
        self._workdir = tempfile.mkdtemp(prefix="ckcd-link-")
        self.control_path = control_path or os.path.join(self._workdir, "control.sock")
        self.stdout_path = os.path.join(self._workdir, "stdout")
        self.stderr_path = os.path.join(self._workdir, "stderr")
        args = [self.binary, "--if-a", if_a, "--if-b", if_b,
                "--rate", _rate_arg(rate_bps), "--delay", _delay_arg(delay_ms),
                "--control", self.control_path]
        if rate_ba_bps is not None:
            args += ["--rate-ba", _rate_arg(rate_ba_bps)]
        if delay_ba_ms is not None:
            args += ["--delay-ba", _delay_arg(delay_ba_ms)]
        if qdisc is not None:
            args += ["--qdisc", qdisc]
        if qdisc_ba is not None:
            args += ["--qdisc-ba", qdisc_ba]
        if mtu is not None:
            args += ["--mtu", str(int(mtu))]
        if log_path is not None:
            args += ["--log", str(log_path)]
        if log_interval_ms is not None:
            args += ["--log-interval", str(int(log_interval_ms))]
        if seed is not None:
            args += ["--seed", str(int(seed))]
        if release_batch_us:  # 0, the default, is left out: every frame at its release time
            args += ["--release-batch", f"{int(round(release_batch_us))}us"]
        if release_lateness_us:  # 0, the default, is left out: no artificial lateness
            args += ["--release-lateness", f"{int(round(release_lateness_us))}us"]
        for addr, ms in (host_delay_ms or {}).items():  # frames from addr wait ms before the queue
            args += ["--host-delay", f"{addr}={int(round(ms * 1000))}us"]
        # a direction whose service follows a delivery-opportunity trace, random loss on the link
        # after the queue (docs/ckcd-link.md, "Traces and loss") and the packet capture ("Packet
        # capture"; the daemon refuses --snaplen or --capture-max-mb without --capture)
        for option, value in (("--trace", trace), ("--trace-ba", trace_ba), ("--loss", loss), ("--loss-ba", loss_ba),
                              ("--capture", capture), ("--snaplen", snaplen), ("--capture-max-mb", capture_max_mb)):
            if value is not None:
                args += [option, str(value)]
        if rx_io != "auto":  # ring or recvmmsg: ckcd-link refuses anything else, naming --rx-io
            args += ["--rx-io", rx_io]
        args += list(extra_args or [])
        if netns:
            args = ["ip", "netns", "exec", netns] + args
        self.argv = args
        self.proc: Optional[subprocess.Popen] = None
        self.final_stats: Optional[dict] = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def start(self, timeout_s: float = 5.0) -> "LinkDaemon":
        """Run the daemon; return when its control socket answers a ping.

        Raises LinkDaemonError with the daemon's own message if it exits
        (exit_code 2: a refused parameter, named in the message and in
        ``param``).
        """
        if self.proc is not None:
            raise RuntimeError("already started")
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            # `ip netns exec` execs the daemon: self.proc.pid is the daemon.
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, close_fds=True)
        deadline = time.monotonic() + timeout_s
        while True:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                error = self._exit_error(code)
                self._cleanup()
                raise error
            try:
                self.request({"cmd": "ping"}, timeout_s=1.0)
                return self
            except (OSError, LinkDaemonError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise LinkDaemonError(f"ckcd-link did not answer on {self.control_path} "
                                      f"within {timeout_s:.1f} s: {self.stderr()}")
            time.sleep(0.02)

    def _exit_error(self, code: int) -> LinkDaemonError:
        msg = self.stderr().strip() or f"ckcd-link exited with status {code}"
        param = None
        # "ckcd-link: --rate: ..." names the parameter.
        for line in msg.splitlines():
            if line.startswith("ckcd-link: --"):
                param = line[len("ckcd-link: --"):].split(":", 1)[0]
                break
        return LinkDaemonError(msg, param=param, exit_code=code)

    def stderr(self) -> str:
        """What the daemon wrote to stderr (start-up line, warnings, refusals)."""
        if not os.path.isdir(self._workdir):
            return getattr(self, "stderr_text", "")
        try:
            return Path(self.stderr_path).read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout_s: float = 5.0) -> Optional[dict]:
        """SIGTERM the daemon, wait for it, return its final stats."""
        if self.proc is None:
            return self.final_stats
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            for line in Path(self.stdout_path).read_text().splitlines():
                if line.startswith("{"):
                    self.final_stats = json.loads(line)
        except (OSError, ValueError):
            pass
        self._cleanup()
        return self.final_stats

    def _cleanup(self) -> None:
        self.stderr_text = self.stderr()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL without waiting for final stats (cleanup after failures)."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            self._cleanup()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> "LinkDaemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# The lateness records of a direction's stats and what each counts: `schedule`, every frame's
# release against its computed time (with --release-lateness, the hold counts); `own`, every
# frame against the earliest the hold and the FIFO order let it leave (the daemon's own
# lateness; equal to `schedule` without a hold); `tx_wake`, the sender's wake-ups against their
# deadlines (per wake-up, empty with --single-thread).
LATENESS_COUNTS = {"schedule": "releases", "own": "releases", "tx_wake": "wakeups"}


def lateness(stats: dict, part: str = "schedule") -> tuple[int, int, float]:
    """Over both directions of a stats() reply or final stats: how many events the `part`
    record counted, how many were more than 1 ms late, and their mean lateness in us."""
    count = over = 0
    late_sum_us = 0.0
    for d in stats.get("dirs", {}).values():
        rec = d[part]
        count += rec[LATENESS_COUNTS[part]]
        over += rec["late_over_1ms"]
        late_sum_us += rec["late_mean_us"] * rec[LATENESS_COUNTS[part]]
    return count, over, late_sum_us / count if count else 0.0


def schedule_kept(stats: dict, max_over_1ms_fraction: float = 0.05,
                  max_late_mean_us: float = 1000.0, part: str = "schedule") -> bool:
    """Did the daemon keep its schedule? stats is a stats() reply or the
    final stats from stop().

    A late release adds to that packet's delay only (departure times come
    from the link state, so lateness never accumulates into a lower rate),
    so the rule is about delay jitter: at most max_over_1ms_fraction of the
    events (both directions) more than 1 ms late, and a mean lateness of
    at most max_late_mean_us. Experiment runs that fail it are marked
    untrusted (experiments/analysis/metrics.py sets the limits)."""
    count, over, mean_us = lateness(stats, part)
    return count == 0 or (over <= max_over_1ms_fraction * count and mean_us <= max_late_mean_us)
