"""What every benchmark shares: the machine it ran on, results beside a committed baseline,
and a side-by-side table. Each bench_*.py writes bench/results/NAME.json (not committed)
and, with --update-baseline, bench/baseline/NAME.json (committed)."""

from __future__ import annotations

import datetime
import json
import os
import platform

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine() -> dict:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _write(path: str, doc: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def save(name: str, doc: dict, update_baseline: bool = False) -> dict:
    """Write the results; return the baseline they are compared with ({} if none yet)."""
    result = os.path.join(REPO, "bench", "results", f"{name}.json")
    baseline = os.path.join(REPO, "bench", "baseline", f"{name}.json")
    _write(result, doc)
    base = {}
    if os.path.exists(baseline):
        with open(baseline) as f:
            base = json.load(f)
    print(f"results: {os.path.relpath(result, REPO)}")
    if update_baseline:
        _write(baseline, doc)
        print(f"baseline updated: {os.path.relpath(baseline, REPO)}")
    return base


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def side_by_side(now: dict, base: dict, base_machine: dict | None = None, width: int = 34) -> None:
    """Print metric, now, baseline for flat {metric: value} dicts."""
    print(f"{'metric':{width}} {'now':>14} {'baseline':>14}")
    for key, value in now.items():
        print(f"{key:{width}} {fmt(value):>14} {fmt(base.get(key)):>14}")
    if base_machine:
        print(f"baseline machine: {base_machine.get('cpu_model')}, {base_machine.get('nproc')} cpus, "
              f"{base_machine.get('date')}")
