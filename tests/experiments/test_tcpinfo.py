"""Reading flows' TCP state from `ss -tinH` (experiments/tcpinfo.py). The fixture is real output
of Debian 12's ss (iproute2 6.1) for an iperf3 3.12 BBR flow on loopback: its control connection
and its data connection to the same server port, recorded on this project's machine."""

import os

from experiments.tcpinfo import data_sockets, parse_ss

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ss", "iperf3_bbr.txt")


def test_parse_ss_reads_addresses_rtt_cwnd_and_min_rtt():
    control, data = parse_ss(open(FIXTURE).read())
    assert (data.local, data.local_port, data.peer, data.peer_port) == ("127.0.0.1", 53806, "127.0.0.1", 5998)
    assert (data.srtt_ms, data.cwnd, data.min_rtt_ms, data.bytes_acked) == (0.147, 32, 0.004, 1545338918)
    assert (control.cwnd, control.min_rtt_ms, control.bytes_acked) == (13, 0.011, 165)


def test_the_data_connection_is_the_one_with_most_bytes_acked():
    # iperf3's control connection goes to the same port: it must not stand for the flow
    assert data_sockets(parse_ss(open(FIXTURE).read()))[5998].local_port == 53806


def test_sockets_without_an_info_line_or_fields_are_kept_apart():
    text = ("0 0 10.0.0.1:40000 10.0.0.3:5201\n"
            "0 0 [fd00::1]:40001 [fd00::3]:5202\n\t cubic rtt:20.5/1.0 cwnd:10\n")
    [s] = parse_ss(text)  # the first has no info line: skipped, not merged with the second's
    assert (s.local, s.peer_port, s.srtt_ms, s.cwnd, s.min_rtt_ms, s.bytes_acked) == \
        ("fd00::1", 5202, 20.5, 10, None, 0)
