"""coex.recent.Recent: the controller's once-per-second flood and probe memory."""

from coex.recent import Recent


def test_a_key_is_new_again_only_after_the_window():
    recent = Recent(1.0)
    assert recent.add_if_new(b"frame", 0.0)
    assert not recent.add_if_new(b"frame", 0.5)   # a copy that came back around
    assert not recent.add_if_new(b"frame", 0.99)
    assert recent.add_if_new(b"frame", 1.0)


def test_expiry_forgets_the_oldest_and_keeps_the_window():
    recent = Recent(1.0)
    for i in range(10_000):  # a storm: 10 000 distinct frames within a second
        assert recent.add_if_new(i, i / 10_000)
    assert len(recent) == 10_000
    recent.expire(1.5)
    assert len(recent) == 4_999 and not recent.add_if_new(9_999, 1.5)  # seen after 0.5 s
