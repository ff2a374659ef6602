"""The synthetic delivery-opportunity traces in this directory, in Mahimahi's format (one line per
1504-byte opportunity: its time in ms from the trace's start, non-decreasing; the trace loops, its
last time being its period). Run it to write them again; the files are committed, and a test checks
that they are what this script writes.

    .venv/bin/python -m experiments.traces.generate

| trace | what | average |
|---|---|---|
| onoff.trace | 48 Mbit/s for 400 ms, then nothing for 100 ms (a handover, a fade) | 38.41 Mbit/s |
| sawtooth.trace | the rate climbs from 6 to 48 Mbit/s in 8 steps of 100 ms, then drops back | 27.00 Mbit/s |
| randomwalk.trace | every 20 ms the rate moves up or down by 6 Mbit/s (seeded), within 6..48 Mbit/s, over 10 s | 26.51 Mbit/s |

The averages are what the script prints (every line an opportunity, the last time the period, as
ckcd-link and Mahimahi loop a trace). One opportunity per ms is 1504 * 8 bit/ms = 12.032 Mbit/s; k opportunities in a ms give k times that.
Rates that are not whole opportunities per ms are spread over the ms of each step (Bresenham), so a
step's opportunities come as evenly as its ms allow.
"""

from __future__ import annotations

import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
OPP_BITS = 1504 * 8


def steps_to_trace(steps: list[tuple[int, float]]) -> list[int]:
    """(duration ms, rate bit/s) steps into opportunity times (ms). Each ms of a step gets the
    opportunities its rate has earned by its end (Bresenham, carried across steps); the last line
    is the period, so a trace whose last ms has no opportunity ends with one there anyway (it
    then carries one more than its rates)."""
    times: list[int] = []
    owed = 0.0
    t = 0
    for duration_ms, rate_bps in steps:
        for _ in range(duration_ms):
            t += 1
            owed += rate_bps / 1000 / OPP_BITS
            while owed >= 1.0:
                times.append(t)
                owed -= 1.0
    if not times or times[-1] != t:
        times.append(t)
    return times


def onoff() -> list[int]:
    return steps_to_trace([(400, 48e6), (100, 0.0)])


def sawtooth() -> list[int]:
    return steps_to_trace([(100, 6e6 * k) for k in range(1, 9)])


def randomwalk(seed: int = 4) -> list[int]:
    rng = random.Random(seed)
    rate, steps = 24e6, []
    for _ in range(500):
        steps.append((20, rate))
        rate = min(48e6, max(6e6, rate + rng.choice((-6e6, 6e6))))
    return steps_to_trace(steps)


TRACES = {"onoff.trace": onoff, "sawtooth.trace": sawtooth, "randomwalk.trace": randomwalk}


def average_bps(times: list[int]) -> float:
    """As ckcd-link and Mahimahi loop a trace: every line an opportunity, the last time the period."""
    return len(times) * OPP_BITS * 1000 / times[-1]


def text(times: list[int]) -> str:
    return "".join(f"{t}\n" for t in times)


def main() -> None:
    for name, make in TRACES.items():
        times = make()
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text(times))
        print(f"{name}: {len(times)} opportunities over {times[-1]} ms, average {average_bps(times) / 1e6:.2f} Mbit/s")


if __name__ == "__main__":
    main()
