import pytest

from experiments.analysis.stats import jain_index


def test_equal_shares_are_perfectly_fair():
    assert jain_index([5.0, 5.0, 5.0]) == pytest.approx(1.0)


def test_one_flow_taking_everything_gives_one_over_n():
    assert jain_index([10.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_paper_scale_example():
    # BBR 84.1 / CUBIC 9.9 Mbit/s (docs/architecture.md, the bare forwarder at DropTail B=80): 94^2 / (2 * 14341.64) = 0.6161
    assert jain_index([84.1, 9.9]) == pytest.approx(0.6161, abs=1e-4)


def test_no_flows_is_an_error():
    with pytest.raises(ValueError):
        jain_index([])
