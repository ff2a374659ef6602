"""The synthetic traces in experiments/traces/ are what experiments/traces/generate.py writes, and
each loops at the average the script states (every line an opportunity of 1504 bytes, the last
time the period, as ckcd-link reads them: datapath/link/trace.h)."""

from __future__ import annotations

import os

import pytest

from experiments.traces import generate


@pytest.mark.parametrize("name", sorted(generate.TRACES))
def test_a_committed_trace_is_what_the_script_writes(name):
    """Rule: the committed file is the script's output (run it again after changing it)."""
    with open(os.path.join(generate.HERE, name)) as f:
        assert f.read() == generate.text(generate.TRACES[name]()), \
            f"{name} is stale: .venv/bin/python -m experiments.traces.generate"


def test_steps_become_opportunities_at_their_rate():
    """Rule: a step of k x 12.032 Mbit/s gives k opportunities a ms; rates between spread their
    opportunities over the step's ms (carried across steps), and the period is the last ms."""
    times = generate.steps_to_trace([(10, 2 * generate.OPP_BITS * 1000), (10, generate.OPP_BITS * 500)])
    assert times[:20] == [t for t in range(1, 11) for _ in range(2)]
    assert times[20:] == [12, 14, 16, 18, 20]
    assert generate.average_bps(times) == pytest.approx(25 * generate.OPP_BITS * 1000 / 20)
    assert generate.steps_to_trace([(5, 0.0)]) == [5]
