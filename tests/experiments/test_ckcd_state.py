"""CKCD's state from ckcd-link's log lines (experiments/run/probes/ckcd_state.py): the line format is the
daemon's (tests/link/test_link_daemon.py checks the daemon writes it)."""

from experiments.run.probes.ckcd_state import CkcdStateReader

BBR, CUBIC = "tcp 10.0.0.1:40000>10.0.0.3:5201", "tcp 10.0.0.2:40002>10.0.0.4:5202"


def line(flows, xstats):
    return {"dir": "ab", "flows": flows, "xstats": xstats}


def test_points_join_the_flows_state_to_their_5_tuples():
    r = CkcdStateReader()
    r.add(0.1, line([], "qlen_pkts=0 qlen_bytes=0"))  # droptail before a set_qdisc: no point
    r.add(0.2, line([{"flow": "0x0000000a", "key": BBR}, {"flow": "0x0000000b", "key": CUBIC}],
                    "q_avg=3.5 active_flows=3 fair_share_bps=33333333 flow.10=mu_bps:80000000,dth_us:500,"
                    "dropping:1,queued:40,delay_drops:7 flow.11=mu_bps:9000000,dth_us:50000,dropping:0,"
                    "queued:2,delay_drops:0 flow.12=mu_bps:1000,dth_us:50000,dropping:0,queued:0,delay_drops:0"))
    # CUBIC sent nothing in this interval, so it is not in `flows`: its key is remembered.
    r.add(0.3, line([{"flow": "0x0000000a", "key": BBR}],
                    "active_flows=2 fair_share_bps=50000000 flow.11=mu_bps:0,dth_us:50000,dropping:0,queued:0,"
                    "delay_drops:0"))
    assert r.points == [
        # flow 12 (a ping, say) counts in I but has no 5-tuple from any line: left out
        {"t": 0.2, "active": 3, "fair_mbps": 33.333, "flows": {BBR: [80.0, 0.5, 1], CUBIC: [9.0, 50.0, 0]}},
        {"t": 0.3, "active": 2, "fair_mbps": 50.0, "flows": {CUBIC: [0.0, 50.0, 0]}},
    ]
