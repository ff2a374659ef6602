"""The short-flow server and client (experiments/run/probes/shortflows.py) over real kernel TCP on loopback,
and the arrival process they follow. No lab: one process, the loopback interface."""

import asyncio
import json
import socket
import statistics

import pytest

from experiments.run.probes import shortflows
from experiments.scenario.workloads import SizeDraws


def test_poisson_arrivals_have_the_asked_rate_and_fixed_ones_are_even():
    times = shortflows.arrival_times(rate=5.0, duration=400.0, seed=3)
    gaps = [b - a for a, b in zip([0.0] + times, times)]
    # ~2000 exponential gaps of mean 0.2 s: the sample mean within 9 % (4 standard errors: 4 x 0.2 / sqrt(2000) = 0.018 s)
    assert statistics.mean(gaps) == pytest.approx(0.2, rel=0.09)
    assert statistics.stdev(gaps) == pytest.approx(0.2, rel=0.15)  # exponential: stdev = mean
    assert times == shortflows.arrival_times(rate=5.0, duration=400.0, seed=3)  # seeded
    assert shortflows.arrival_times(rate=2.0, duration=2.1, seed=3, poisson=False) == [0.5, 1.0, 1.5, 2.0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_transfers_complete_with_their_sizes_and_times(capsys):
    """Three transfers of 20 KB and 2 MB at fixed intervals through a real server: each reports
    its size and a completion time; a 2 MB transfer takes longer than a 20 KB one would, and
    every line is one JSON object."""
    port = _free_port()

    async def run():
        server = asyncio.ensure_future(shortflows.serve(port, "cubic"))
        await asyncio.sleep(0.2)
        await shortflows.fetch_all("127.0.0.1", port, SizeDraws(2, sizes_kb=[20, 2000]), rate=10.0, duration=0.35, seed=1,
                                   poisson=False)
        server.cancel()

    asyncio.run(run())
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"listening": port, "cc": "cubic"}
    transfers = lines[1:]
    assert len(transfers) == 3 and all(x["ok"] for x in transfers), transfers
    assert [round(x["t"], 1) for x in sorted(transfers, key=lambda x: x["t"])] == [0.1, 0.2, 0.3]
    assert {x["size"] for x in transfers} <= {20_000, 2_000_000}
    assert all(x["fct_ms"] > 0 for x in transfers)


def test_a_refused_connection_is_a_failed_transfer(capsys):
    port = _free_port()  # nothing listens
    asyncio.run(shortflows.fetch_all("127.0.0.1", port, SizeDraws(2, sizes_kb=[1]), rate=10.0, duration=0.15, seed=1, poisson=False))
    [x] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert x["ok"] is False and "errno 111" in x["error"].lower()  # ECONNREFUSED
