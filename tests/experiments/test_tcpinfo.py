"""Reading flows' TCP state from `ss -tinH` (experiments/run/probes/ss.py). The fixture is real output
of Debian 12's ss (iproute2 6.1) for an iperf3 3.12 BBR flow on loopback: its control connection
and its data connection to the same server port, recorded on this project's machine."""

import os
import subprocess
import threading

from experiments.run.probes.ss import TcpInfoSampler, parse_ss

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ss", "iperf3_bbr.txt")


def test_parse_ss_reads_addresses_rtt_cwnd_and_min_rtt():
    control, data = parse_ss(open(FIXTURE).read())
    assert (data.local, data.local_port, data.peer, data.peer_port) == ("127.0.0.1", 53806, "127.0.0.1", 5998)
    assert (data.srtt_ms, data.cwnd, data.min_rtt_ms, data.bytes_acked) == (0.147, 32, 0.004, 1545338918)
    assert (data.busy_ms, data.rwnd_limited_ms) == (1004, 8)
    assert (control.busy_ms, control.rwnd_limited_ms) == (None, None)  # idle control connection: no busy time
    assert (control.local_port, control.cwnd, control.min_rtt_ms) == (53804, 13, 0.011)


class RecordedHost:
    """Stands in for a Mininet host: whatever it is asked to run, it prints the recorded ss output
    (a real process, so the sampler's pipes, timeout and exit status are the real ones)."""

    def __init__(self, status: int = 0):
        self.status = status

    def popen(self, cmd, **kw):
        assert cmd[0] == "ss"
        return subprocess.Popen(["sh", "-c", f'cat "$1"; exit {self.status}', "sh", FIXTURE], **kw)


def test_the_sampler_reads_each_flow_by_its_data_connections_port():
    # iperf3's control connection (53804) goes to the same server port: only --cport's 53806 counts
    stop = threading.Event()
    sampler = TcpInfoSampler({"h1": RecordedHost()}, {"h1": {53806: 5998}}, t0=0.0, interval_s=0.1, stop=stop)
    sampler._sample("h1", {53806: 5998})
    [[_, srtt, cwnd, min_rtt, acked, _busy, _rwnd, *_]] = sampler.series[5998]
    assert (srtt, cwnd, min_rtt, acked) == (0.147, 32, 0.004, 1545338918) and sampler.errors == []


def test_a_failing_ss_is_recorded_not_sampled():
    sampler = TcpInfoSampler({"h1": RecordedHost(status=1)}, {"h1": {53806: 5998}}, 0.0, 0.1, threading.Event())
    sampler._sample("h1", {53806: 5998})
    sampler._sample("h1", {53806: 5998})
    assert sampler.series[5998] == [] and sampler.errors == ["h1: ss exited 1: "]


def test_sockets_without_an_info_line_or_fields_are_kept_apart():
    text = ("0 0 10.0.0.1:40000 10.0.0.3:5201\n"
            "0 0 [fd00::1]:40001 [fd00::3]:5202\n\t cubic rtt:20.5/1.0 cwnd:10\n")
    [s] = parse_ss(text)  # the first has no info line: skipped, not merged with the second's
    assert (s.local, s.peer_port, s.srtt_ms, s.cwnd, s.min_rtt_ms) == ("fd00::1", 5202, 20.5, 10, None)
