"""aqm_band_xstats through ckcd-replay: each xstats line carries the typed state of the
queue ("state") and of each band ("band_state"), and a band's typed state is what the
text says after its band=<i> token (a `bands | ckcd | ckcd` spec)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile

import pytest

from replaylib import REPLAY, SEC, merge, poisson

C = 100_000_000


def band_texts(text: str) -> list[dict]:
    groups: list[dict] = []
    for tok in text.split():
        k, _, v = tok.partition("=")
        if k == "band":
            groups.append({})
        elif groups and not k.startswith("flow."):
            groups[-1][k] = v
    return groups


def xstats_lines(trace, spec: str, every_ms: int) -> list[dict]:
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write("".join(" ".join(map(str, p)) + "\n" for p in trace))
        path = f.name
    try:
        cp = subprocess.run([REPLAY, "--qdisc", spec, "--rate-bps", str(C), "--no-packets",
                             "--xstats-every-ms", str(every_ms), path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    assert cp.returncode == 0, cp.stderr
    return [o for o in map(json.loads, cp.stdout.splitlines()) if o["type"] == "xstats"]


def test_bands_of_ckcd_give_each_bands_typed_state():
    # three flows in band 0 (DSCP 0), two in band 1 (DSCP 46), all overloading
    tr = merge(*(poisson(f, 60e6, 0, SEC, dscp=0, seed=4) for f in (1, 2, 3)),
               *(poisson(f, 60e6, 0, SEC, dscp=46, seed=4) for f in (4, 5)))
    lines = xstats_lines(tr, "bands weights=1,1 map=46:1 | ckcd limit=200 | ckcd limit=200", 250)
    assert len(lines) >= 4
    for o in lines:
        bands, texts = o["band_state"], band_texts(o["xstats"])
        assert len(bands) == len(texts) == 2
        for typed, text in zip(bands, texts):
            assert set(typed) == {"active_flows", "fair_share_bps", "q_avg"}
            assert typed["active_flows"] == int(text["active_flows"])
            assert typed["fair_share_bps"] == int(text["fair_share_bps"])
            assert typed["q_avg"] == pytest.approx(float(text["q_avg"]), abs=1e-3)
        # the queue's: the bands' flows summed, the smallest fair share
        assert o["state"] == {"active_flows": sum(b["active_flows"] for b in bands),
                              "fair_share_bps": min(b["fair_share_bps"] for b in bands)}
    mid = lines[1]["band_state"]
    assert (mid[0]["active_flows"], mid[1]["active_flows"]) == (3, 2)
    assert (mid[0]["fair_share_bps"], mid[1]["fair_share_bps"]) == (C // 3, C // 2)


def test_a_plain_discipline_is_its_own_band_0():
    lines = xstats_lines(poisson(1, 150e6, 0, SEC // 2, seed=5), "ckcd limit=100", 200)
    for o in lines:
        assert o["band_state"] == [o["state"]]
        assert set(o["state"]) == {"active_flows", "fair_share_bps", "q_avg"}
    droptail = xstats_lines(poisson(1, 50e6, 0, SEC // 4, seed=5), "droptail", 100)
    assert all(o["state"] == {} and o["band_state"] == [{}] for o in droptail)
