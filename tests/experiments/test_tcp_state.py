"""The flows' TCP state from `ss -tin` (experiments/run/probes/ss.py) and what the metrics make of
it: pacing and delivery rates, retransmissions and BBR's bandwidth estimate and state. The ss
line is recorded from a real BBR connection on this machine (loopback, iperf3 -C bbr); the CUBIC
line adds `retrans:0/7` as iproute2's ss prints tcpi_retrans/tcpi_total_retrans."""

from __future__ import annotations

from experiments.analysis.metrics import _tcp_state
from experiments.run.probes.ss import parse_ss

BBR_SS = ("0      0      127.0.0.1:46001 127.0.0.1:5999\n"
          "\t bbr wscale:9,9 rto:204 rtt:0.089/0.007 mss:65483 pmtu:65535 rcvmss:536 advmss:65483 cwnd:17 "
          "bytes_sent:3801125 bytes_acked:3801126 segs_out:95 segs_in:41 data_segs_out:93 "
          "bbr:(bw:149675419648bps,mrtt:0.005,pacing_gain:2.88672,cwnd_gain:2.88672) send 100063910112bps "
          "lastsnd:36 lastrcv:1508 lastack:36 pacing_rate 499438139056bps delivery_rate 104772800000bps "
          "delivered:94 busy:28ms rcv_space:43690 rcv_ssthresh:43690 minrtt:0.005 snd_wnd:808960\n")
CUBIC_SS = ("0      0      10.0.0.2:25202 10.0.0.4:5202\n"
            "\t cubic wscale:9,9 rto:224 rtt:21.5/0.4 mss:1448 cwnd:80 bytes_acked:9000000 "
            "pacing_rate 52000000bps delivery_rate 47000000bps busy:3000ms retrans:0/7 minrtt:20.1\n")


def test_ss_gives_the_rates_the_retransmissions_and_bbr_state():
    """Rule: pacing and delivery rates in bit/s, the total retransmitted, BBR's bw and gains;
    a socket without BBR has none of those, and one that never retransmitted reads 0."""
    [bbr] = parse_ss(BBR_SS)
    assert (bbr.pacing_rate_bps, bbr.delivery_rate_bps, bbr.bbr_bw_bps) == (499438139056, 104772800000, 149675419648)
    assert (bbr.bbr_pacing_gain, bbr.bbr_cwnd_gain, bbr.retrans_total) == (2.88672, 2.88672, 0)
    [cubic] = parse_ss(CUBIC_SS)
    assert (cubic.pacing_rate_bps, cubic.delivery_rate_bps, cubic.retrans_total) == (52_000_000, 47_000_000, 7)
    assert cubic.bbr_bw_bps is None and cubic.bbr_pacing_gain is None
    assert len(cubic.row(1.0)) == 13 and cubic.row(1.0)[:3] == [1.0, 21.5, 80]


def test_the_metrics_read_bbrs_states_from_its_pacing_gain():
    """Rule: each sample in the window goes to the BBR state whose gain is nearest; rates are
    in Mbit/s; retransmissions per second from the counter; records without the columns give
    None."""
    def row(t, gain, retrans):
        return [t, 20.0, 50, 20.0, 0, 0, 0, 50e6, 45e6, retrans, 48e6, gain, 2.0]
    rows = [row(1.0, 2.88672, 0), row(2.0, 1.25, 1), row(3.0, 0.75, 2), row(4.0, 1.0, 2), row(5.0, 1.0, 3),
            row(6.0, 1.0, 4)]
    state = _tcp_state(rows, 2.0, 6.0)
    assert state["bbr_states"] == {"cruise": 0.6, "probe_down": 0.2, "probe_up": 0.2}
    assert state["pacing_mbps"]["mean"] == 50.0 and state["bbr_bw_mbps"]["mean"] == 48.0
    assert state["retrans_per_s"] == 0.75
    cubic = [[t, 20.0, 50, 20.0, 0, 0, 0, 50e6, 45e6, 0, None, None, None] for t in (1.0, 2.0)]
    assert _tcp_state(cubic, 0.0, 2.0)["bbr_states"] is None
    assert _tcp_state([[1.0, 20.0, 50, 20.0, 0, 0, 0]], 0.0, 2.0) is None
