"""coex.counting: sFlow suspects, a switch counter confirms (issue 16: "sample to suspect,
count to confirm"), the steering flow's counter releases."""

from coex.counting import CONFIRM_WINDOW_S, RETRY_AFTER_S, SUSPECT_TIMEOUT_S, CountingBook

PORT = (1, 3)
HIGH, LOW = 15e6, 10.5e6


def thresholds(port):
    assert port == PORT
    return HIGH, LOW


def feed(book, key, rate_bps, start, until, steering=False, step=0.1, dpid=1):
    """Counter readings every `step` s of a flow at rate_bps from `start`; the verdicts on the way."""
    verdicts, t, n = [], start, 0
    while t <= until + 1e-9:
        book.reading(dpid, key, int(rate_bps / 8 * (t - start)), t, steering)
        verdicts += book.judge(t, thresholds, min_hold_s=1.0)
        n += 1
        t = start + n * step
    return verdicts


def test_a_suspect_at_twice_the_threshold_is_confirmed_after_the_confirm_window():
    book = CountingBook(max_per_switch=4)
    assert book.suspect(1, "big", PORT, 9e6, 0.5, now=1.0) == (True, [])
    [v] = feed(book, "big", 30e6, 1.0, 2.0)
    assert (v.what, v.key, v.port, v.estimate_bps, v.first_seen_s) == ("confirmed", "big", PORT, 9e6, 0.5)
    assert abs(v.rate_bps - 30e6) < 0.01 * 30e6  # a counter is exact: the rate is the flow's
    assert book.suspects == {} and book.confirmed_total == 1
    # confirmed at the first reading CONFIRM_WINDOW_S after the first one
    book.suspect(1, "b2", PORT, 9e6, None, now=5.0)
    [v] = feed(book, "b2", 30e6, 5.0, 6.0)
    assert book.confirmed_total == 2


def test_a_mouse_the_samples_made_look_big_is_dropped_and_not_counted_again_at_once():
    book = CountingBook(max_per_switch=4)
    book.suspect(1, "mouse", PORT, 9e6, None, now=0.0)
    [v] = feed(book, "mouse", 5e6, 0.0, SUSPECT_TIMEOUT_S + 0.2)
    assert v.what == "dropped" and abs(v.rate_bps - 5e6) < 0.05e6
    assert book.suspect(1, "mouse", PORT, 9e6, None, now=SUSPECT_TIMEOUT_S + 0.5) == (False, [])
    assert book.suspect(1, "mouse", PORT, 9e6, None, now=SUSPECT_TIMEOUT_S + RETRY_AFTER_S + 0.1) == (True, [])


def test_the_bound_keeps_the_largest_estimates():
    book = CountingBook(max_per_switch=2)
    assert book.suspect(1, "a", PORT, 8e6, None, 0.0) == (True, [])
    assert book.suspect(1, "b", PORT, 12e6, None, 0.0) == (True, [])
    assert book.suspect(1, "c", PORT, 7e6, None, 0.0) == (False, [])     # smaller than both: waits
    assert book.suspect(1, "d", PORT, 20e6, None, 0.0) == (True, [(1, "a")])  # displaces the smallest
    assert book.suspect(2, "e", (2, 1), 1e6, None, 0.0) == (True, [])   # another switch, its own bound
    assert sorted(k for _, k in book.suspects) == ["b", "d", "e"]
    assert (book.evicted_total, book.waited_total) == (1, 1)


def test_a_steered_flow_is_released_when_its_counted_rate_falls_below_the_low_threshold_after_the_hold():
    book = CountingBook(max_per_switch=4)
    book.steering(1, "big", PORT, now=0.0)
    assert feed(book, "big", 30e6, 0.0, 3.0, steering=True) == []
    # it slows to 5 Mbit/s at t=3: released once the last second's count is below LOW
    verdicts, t = [], 3.0
    base = int(30e6 / 8 * 3.0)
    while not verdicts and t < 6.0:
        t = round(t + 0.1, 1)
        book.reading(1, "big", base + int(5e6 / 8 * (t - 3.0)), t, steering=True)
        verdicts = book.judge(t, thresholds, min_hold_s=1.0)
    [v] = verdicts
    assert v.what == "release" and v.rate_bps < LOW and 3.4 <= t <= 4.1, (t, v)
    # the detector's window still holds its samples: not a suspect again at once
    assert book.suspect(1, "big", PORT, 20e6, None, now=t + 0.1) == (False, [])


def test_a_counter_that_restarts_is_read_afresh():
    """A switch that reconnects gets its flows again with zero counters: no negative rate."""
    book = CountingBook(max_per_switch=4)
    book.steering(1, "big", PORT, now=0.0)
    book.reading(1, "big", 10_000_000, 1.0, steering=True)
    book.reading(1, "big", 100, 1.5, steering=True)
    assert book.counted_bps(1, "big") is None
    book.reading(1, "big", 100 + 1_875_000, 2.0, steering=True)
    assert book.counted_bps(1, "big") == 30e6

