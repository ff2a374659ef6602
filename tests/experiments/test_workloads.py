"""experiments/scenario/workloads.py: short-flow sizes from a list, an empirical CDF or a bounded
Pareto, drawn as the probe draws them, and reported by size class."""

from __future__ import annotations

import statistics

import pytest

from experiments.scenario import workloads


def test_the_shipped_cdfs_read_and_have_their_stated_means():
    """Rule: both shipped workloads load; the web-search one's mean is the 1.71 MB its file says
    (each segment's probability at its midpoint, as the interpolated draws have it)."""
    web = workloads.read_cdf(workloads.cdf_path("websearch"))
    assert web[-1] == (30e6, 1.0) and workloads.cdf_mean(web) == pytest.approx(1.71125e6)
    mining = workloads.read_cdf(workloads.cdf_path("datamining"))
    assert mining[-1] == (1e9, 1.0)


def test_draws_follow_the_cdf():
    """Rule: a draw at u is interpolated between the points around u; 200 000 draws have the
    CDF's mean within 3 % (the web-search sizes' sd is 3.97 MB: 5 standard errors are 2.6 %)
    and its median (80 KB at 0.53 lies just above it) within its segment."""
    web = workloads.read_cdf(workloads.cdf_path("websearch"))
    assert workloads.cdf_draw(web, 0.0) == 0 and workloads.cdf_draw(web, 0.075) == pytest.approx(5000)
    assert workloads.cdf_draw(web, 0.999999) == pytest.approx(30e6, rel=1e-3)
    draws = workloads.SizeDraws(7, cdf=web)
    sizes = [draws.next() for _ in range(200_000)]
    assert statistics.fmean(sizes) == pytest.approx(workloads.cdf_mean(web), rel=0.03)
    assert 50_000 < statistics.median(sizes) < 80_000
    assert min(sizes) >= 1


def test_a_cap_and_a_bounded_pareto_stay_in_their_bounds():
    """Rule: size_max_kb caps every draw; a bounded Pareto stays in [min, max] with the heavy tail
    its shape gives (at shape 1.2 from 10 KB, P(X > 100 KB) is about (10/100)^1.2 = 6.3 %)."""
    mining = workloads.read_cdf(workloads.cdf_path("datamining"))
    capped = workloads.SizeDraws(3, cdf=mining, max_kb=10_000)
    assert max(capped.next() for _ in range(10_000)) == 10_000_000
    pareto = workloads.SizeDraws(5, pareto=(1.2, 10, 10_000))
    sizes = [pareto.next() for _ in range(100_000)]
    assert 10_000 <= min(sizes) and max(sizes) <= 10_000_000
    assert sum(s > 100_000 for s in sizes) / len(sizes) == pytest.approx(0.063, abs=0.005)


def test_a_list_draws_as_before():
    """Rule: sizes_kb draws uniformly with the seed's stream (Random(seed).choice), as the probe
    always did, so a scenario with a list runs the same transfers."""
    import random
    rng = random.Random(8)
    draws = workloads.SizeDraws(8, sizes_kb=[50, 200, 1000])
    assert [draws.next() for _ in range(50)] == [rng.choice([50_000, 200_000, 1_000_000]) for _ in range(50)]


@pytest.mark.parametrize("size, label", [(1, "0-100"), (100_000, "0-100"), (100_001, "100-10000"),
                                         (10_000_000, "100-10000"), (10_000_001, "10000+")])
def test_size_classes(size, label):
    """Rule: (0, 100 KB], (100 KB, 10 MB], above; labels sort by their lower edge."""
    assert workloads.size_bin(size) == label
    assert sorted(["10000+", "0-100", "100-10000"], key=workloads.size_key) == ["0-100", "100-10000", "10000+"]


def test_a_cdf_that_is_not_one_is_refused(tmp_path):
    """Rule: a CDF file's sizes and probabilities never decrease and it ends at 1; the line that
    breaks it is named."""
    for text, line in (("0 0\n10 0.5\n5 1\n", "line 3"), ("0 0\n10 x\n", "line 2"), ("0 0\n10 0.9\n", "last point")):
        path = tmp_path / "w.cdf"
        path.write_text(text)
        with pytest.raises(ValueError, match=line):
            workloads.read_cdf(str(path))
