"""ovs_config.counter_refresh against the private OVS's real database: the controller shortens
OVS's revalidator interval while counting confirms heavy hitters (the counted rate
decides, so the counter must be fresh), and never loses an operator's own setting."""

from __future__ import annotations

import pytest

from ovs_config.counter_refresh import KEY, MARK, WAS, current_ms, ensure_counter_refresh
from ovs_config.ovsdb import LOCAL

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM


def other(key: str):
    return LOCAL.get("Open_vSwitch", ".", f"other_config:{key}")


def ext(key: str):
    return LOCAL.get("Open_vSwitch", ".", f"external_ids:{key}")


@pytest.fixture
def db(private_ovs):
    LOCAL.vsctl("remove", "Open_vSwitch", ".", "other_config", KEY, "--",
                "remove", "Open_vSwitch", ".", "external_ids", MARK, "--",
                "remove", "Open_vSwitch", ".", "external_ids", WAS)
    yield LOCAL
    LOCAL.vsctl("remove", "Open_vSwitch", ".", "other_config", KEY)


def test_set_while_counting_and_taken_back(db):
    assert ensure_counter_refresh(db, 100) is True
    assert (current_ms(db), ext(MARK)) == (100, "100")
    assert ensure_counter_refresh(db, 100) is False  # already so: nothing written
    assert ensure_counter_refresh(db, None) is True
    assert (other(KEY), ext(MARK)) == (None, None)   # OVS's default again
    assert ensure_counter_refresh(db, None) is False


def test_an_operators_shorter_interval_is_left_and_a_longer_one_restored(db):
    db.vsctl("set", "Open_vSwitch", ".", f"other_config:{KEY}=50")
    assert ensure_counter_refresh(db, 100) is False and current_ms(db) == 50 and ext(MARK) is None
    assert ensure_counter_refresh(db, None) is False and current_ms(db) == 50
    db.vsctl("set", "Open_vSwitch", ".", f"other_config:{KEY}=1000")
    assert ensure_counter_refresh(db, 100) is True and current_ms(db) == 100 and ext(WAS) == "1000"
    assert ensure_counter_refresh(db, None) is True
    assert (current_ms(db), ext(MARK), ext(WAS)) == (1000, None, None)


def test_never_slower_than_what_the_host_would_run_at_without_us(db):
    # Unset, OVS runs at 500 ms: a longer interval is not written.
    assert ensure_counter_refresh(db, 1000) is False and other(KEY) is None
    # The policy lengthens ours past the operator's 150 it replaced: theirs comes back, unmarked.
    db.vsctl("set", "Open_vSwitch", ".", f"other_config:{KEY}=150")
    assert ensure_counter_refresh(db, 100) is True and (current_ms(db), ext(WAS)) == (100, "150")
    assert ensure_counter_refresh(db, 200) is True
    assert (current_ms(db), ext(MARK), ext(WAS)) == (150, None, None)
    # ... and past OVS's default when none was set: unset again.
    db.vsctl("remove", "Open_vSwitch", ".", "other_config", KEY)
    assert ensure_counter_refresh(db, 100) is True and ext(WAS) is None
    assert ensure_counter_refresh(db, 800) is True and (other(KEY), ext(MARK)) == (None, None)


def test_a_value_changed_by_someone_else_since_is_theirs(db):
    ensure_counter_refresh(db, 100)
    db.vsctl("set", "Open_vSwitch", ".", f"other_config:{KEY}=300")
    assert ensure_counter_refresh(db, None) is True  # only our mark goes
    assert (current_ms(db), ext(MARK)) == (300, None)


@pytest.mark.parametrize("bad", [0, 5, 10_001, 1.5, True, "100"])
def test_bad_intervals_are_refused_before_anything_is_written(db, bad):
    with pytest.raises(ValueError, match="counter refresh"):
        ensure_counter_refresh(db, bad)
    assert other(KEY) is None
