"""Scenario files and metrics, without a lab."""

import pytest

from experiments.analysis.stats import jain_index, mean_ci95, t_critical_95
from experiments.scenario.model import ScenarioError, spec_with_addresses
from experiments.scenario.catalog import builtin_names, parse_scenario, resolve

BASE = {"name": "t", "topology": "dumbbell", "duration_s": 10, "disciplines": ["droptail"],
        "link": {"rate_mbps": 50, "delay_ms": 10, "buffer_pkts": 80},
        "flows": [{"src": "h1", "dst": "h3", "cc": "cubic"}]}


def with_(**over):
    doc = {**BASE, **over}
    return doc


def test_every_builtin_scenario_parses():
    names = builtin_names()
    assert {"demo", "bbr_cubic", "bbr_cubic_reno", "mixed15", "intra_cubic", "intra_bbr"} <= set(names)
    for name in names:
        sc = resolve(name)
        assert sc.cases(), name


def test_seed000_scenarios_use_table_ii():
    """Rule: seed 000's scenarios run Table II's five disciplines first, in its order, then the
    Linux baselines, on the paper's 100 Mbit/s link with 80 packets: PIE and DualPI2 at their
    defaults and again with a target the 80 packets can reach."""
    sc = resolve("bbr_cubic")
    assert sc.link.rate_bps == 100_000_000 and sc.link.buffer_pkts == 80
    assert list(sc.disciplines) == ["droptail", "red", "codel", "choke", "ckcd", "fq_codel", "pie", "dualpi2",
                                    "pie_5ms", "dualpi2_5ms"]
    assert "target_ms=5" in sc.qdisc_spec("pie_5ms") and "target_ms=5" in sc.qdisc_spec("dualpi2_5ms")
    assert "rate_bps=100000000" in sc.qdisc_spec("ckcd")


@pytest.mark.parametrize("doc,key", [
    (with_(link={"rate_mbps": -5, "delay_ms": 10, "buffer_pkts": 80}), "link.rate_mbps"),
    (with_(flows=[{"src": "h1", "dst": "h3", "cc": "vegas"}]), "flows[0].cc"),
    (with_(flows=[{"src": "h9", "dst": "h3", "cc": "cubic"}]), "flows[0].src"),
    (with_(disciplines=["nosuch"]), "disciplines"),
    (with_(colour="red"), "colour"),
    (with_(duration_s="long"), "duration_s"),
    (with_(disciplines=["fast"], variants={"fast": {"discipline": "nosuch"}}), "variants.fast.discipline"),
    (with_(disciplines=["codel"], variants={"codel": {"discipline": "hdcodel"}}), "variants.codel"),
    (with_(disciplines=["s"], variants={"s": {"discipline": "hdcodel", "pp": 1}}), "variants.s"),
    (with_(disciplines=["s"], variants={"s": {"discipline": "hdcodel", "p": 2}}), "variants.s"),
    (with_(disciplines=["s"], variants={"s": {"discipline": "hdcodel", "mode": "static",
                                              "heavy_key": "h1>h7"}}), "variants.s"),
    (with_(sweep={"delay_ms": [1, 1]}), "sweep.delay_ms"),
    (with_(sweep={"delay_ms": [1, -2]}), "sweep.delay_ms: at the grid point delay_ms = -2"),
    (with_(sweep={"rate_mbps": [1]}), "sweep.rate_mbps"),
])
def test_bad_scenarios_name_the_key(doc, key):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "test.toml")
    assert key in str(err.value)


def test_variants_name_settings_of_one_discipline():
    """Seed 003 compares two settings of hdcodel (Static, Dynamic) in one scenario: a variant's
    parameters go over its discipline's [discipline_params], and it is a case of its own."""
    sc = parse_scenario(with_(disciplines=["codel", "static", "dynamic"],
                              discipline_params={"hdcodel": {"limit": 500, "p": 0.5}},
                              variants={"static": {"discipline": "hdcodel", "mode": "static",
                                                   "heavy_key": "h1>h3", "p": 0.25},
                                        "dynamic": {"discipline": "hdcodel"},
                                        "unused": {"discipline": "red"}}))
    assert [c.name for c in sc.cases()] == ["codel", "static", "dynamic"]
    assert sc.qdisc_spec("static") == "hdcodel limit=500 p=0.25 mode=static heavy_key=h1>h3"
    assert sc.qdisc_spec("dynamic") == "hdcodel limit=500 p=0.5"
    assert list(sc.variants) == ["static", "dynamic"]
    assert sc.restricted(["static"]).disciplines == ["static"]
    # The runner gives the hosts' addresses; ckcd-link turns the pair into its key.
    addresses = {"h1": "10.0.0.1", "h3": "10.0.0.3"}
    assert spec_with_addresses(sc.qdisc_spec("static"), addresses.get).endswith("heavy_key=10.0.0.1>10.0.0.3")
    assert spec_with_addresses("bands weights=1,1|hdcodel heavy_key=h1>h3|droptail", addresses.get) == \
        "bands weights=1,1|hdcodel heavy_key=10.0.0.1>10.0.0.3|droptail"


def test_a_delay_sweep_is_one_scenario_per_delay():
    sc = parse_scenario(with_(name="hd", title="T", sweep={"delay_ms": [0.5, 32]}))
    members = sc.expanded()
    assert [m.name for m in members] == ["hd_rtt1ms", "hd_rtt64ms"]
    assert [m.link.delay_ms for m in members] == [0.5, 32.0]
    assert members[1].title == "T, 64 ms RTT" and members[1].expanded() == [members[1]]
    assert sc.link.delay_ms == 10  # the file's own scenario is left as it was
    assert parse_scenario(BASE).expanded()[0].name == "t"


def test_mean_and_confidence_interval():
    r = mean_ci95([1.0, 2.0, 3.0])
    # t(2) = 4.303, s = 1, n = 3: half-width 4.303 / sqrt(3) = 2.484
    assert r["mean"] == pytest.approx(2.0) and r["ci95"] == pytest.approx(2.484, abs=1e-3)
    assert mean_ci95([5.0]) == {"mean": 5.0, "ci95": None, "n": 1}
    assert t_critical_95(1) == pytest.approx(12.706, abs=1e-3)


def test_jain_bounds():
    assert jain_index([1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0]) == pytest.approx(1 / 3)


def test_sack_and_access_delays_are_read_and_checked():
    """Seed 004's columns need TCP without SACK and flows of different RTTs."""
    sc = parse_scenario(with_(tcp_sack=False, access_delay_ms={"h2": 15}))
    assert (sc.tcp_sack, sc.access_delay_ms) == (False, {"h2": 15.0})
    assert parse_scenario(BASE).tcp_sack is True and parse_scenario(BASE).access_delay_ms == {}
    for doc, key in ((with_(tcp_sack="no"), "tcp_sack"), (with_(access_delay_ms={"h9": 5}), "access_delay_ms.h9"),
                     (with_(access_delay_ms={"h2": -1}), "access_delay_ms.h2")):
        with pytest.raises(ScenarioError, match=key.replace(".", r"\.")):
            parse_scenario(doc, "test.toml")


def test_hosts_per_side_names_the_dumbbells_hosts_and_base_rtts_add_access_delays():
    """Seed 004's nine paths: three senders, three receivers, a delay per host; a flow's base RTT
    is the link's both ways plus its sender's and its receiver's access delays."""
    doc = with_(hosts_per_side=3, access_delay_ms={"h1": 10, "h6": 40},
                flows=[{"src": "h1", "dst": "h6", "cc": "cubic"}, {"src": "h3", "dst": "h4", "cc": "cubic"}])
    sc = parse_scenario(doc)
    assert sc.hosts == {"senders": ("h1", "h2", "h3"), "receivers": ("h4", "h5", "h6")}
    far, near = sc.flows
    assert sc.base_rtt_ms(far.src, far.dst) == sc.link.rtt_ms + 10 + 40
    assert sc.base_rtt_ms(near.src, near.dst) == sc.link.rtt_ms
    for bad, key, why in ((with_(hosts_per_side=9), "hosts_per_side", "out of range"),
                          (with_(hosts_per_side=2.5), "hosts_per_side", "whole number"),
                          (with_(topology="twopaths", hosts_per_side=3), "hosts_per_side", "only the dumbbell"),
                          (with_(access_delay_ms={"h5": 1}), "access_delay_ms.h5", "not a host"),
                          (with_(tcp_info_interval_s=0.01), "tcp_info_interval_s", "out of range")):
        with pytest.raises(ScenarioError, match=key.replace(".", r"\.") + ".*" + why):
            parse_scenario(bad, "test.toml")


def test_short_flows_are_read_and_checked():
    """[[short_flows]]: sizes drawn per transfer, Poisson or fixed-interval arrivals, within the run;
    each group its own port, apart from the long flows' iperf3 ports."""
    doc = with_(short_flows=[{"src": "h2", "dst": "h4", "cc": "cubic", "sizes_kb": [50, 1000], "rate_per_s": 2},
                             {"src": "h1", "dst": "h3", "cc": "bbr", "sizes_kb": [10], "rate_per_s": 1,
                              "arrivals": "interval", "start_s": 2, "stop_s": 8, "label": "web"}])
    a, b = parse_scenario(doc).short_flows
    assert (a.label, a.sizes_kb, a.rate_per_s, a.poisson, a.start_s, a.stop_s) == \
        ("short-cubic-1", [50.0, 1000.0], 2.0, True, 0.0, 10.0)
    assert (b.label, b.poisson, b.start_s, b.stop_s) == ("web", False, 2.0, 8.0)
    assert a.port != b.port and {a.port, b.port}.isdisjoint(f.port for f in parse_scenario(doc).flows)
    sc = parse_scenario(doc)
    assert type(sc).from_dict(sc.to_dict()).short_flows == sc.short_flows  # run.json round trip
    one = {"src": "h2", "dst": "h4", "cc": "cubic", "sizes_kb": [50], "rate_per_s": 2}
    for bad, key in (({**one, "sizes_kb": []}, "sizes_kb"), ({**one, "sizes_kb": [0]}, "sizes_kb"),
                     ({**one, "sizes_kb": ["big"]}, "sizes_kb"), ({**one, "rate_per_s": 0}, "rate_per_s"),
                     ({**one, "arrivals": "bursty"}, "arrivals"), ({**one, "stop_s": 11}, "stop_s"),
                     ({**one, "dst": "h1"}, "dst"), ({**one, "size_kb": 5}, "size_kb")):
        with pytest.raises(ScenarioError, match=r"short_flows\[0\]\." + key):
            parse_scenario(with_(short_flows=[bad]), "test.toml")
    with pytest.raises(ScenarioError, match="labels must differ"):
        parse_scenario(with_(short_flows=[{**one, "label": "x"}, {**one, "label": "x"}]), "test.toml")


def test_release_lateness_is_a_link_key_of_0_to_10000_us_kept_through_run_json():
    """link.release_lateness_us, ckcd-link's --release-lateness (a test knob): 0 (off) unless
    given, any number in 0..10000 us (the daemon's 10 ms), refused outside it naming the key;
    a run record written without it (before it existed) reads as 0; a sweep over it names its
    members by the value."""
    assert parse_scenario(BASE).link.release_lateness_us == 0.0
    link = {**BASE["link"], "release_lateness_us": 250}
    sc = parse_scenario(with_(link=link))
    assert sc.link.release_lateness_us == 250.0 and sc.link.release_batch_us == 0.0
    assert type(sc).from_dict(sc.to_dict()).link == sc.link  # run.json round trip
    old = sc.to_dict()
    del old["link"]["release_lateness_us"]
    assert type(sc).from_dict(old).link.release_lateness_us == 0.0
    for value, why in ((-1, "out of range"), (10001, "out of range"), ("250us", "expected float")):
        with pytest.raises(ScenarioError, match=r"link\.release_lateness_us.*" + why):
            parse_scenario(with_(link={**BASE["link"], "release_lateness_us": value}), "test.toml")
    grid = parse_scenario(with_(sweep={"link": {"release_lateness_us": [0, 500]}})).expanded()
    assert [(m.name, m.link.release_lateness_us) for m in grid] == [
        ("t_release_lateness_us0", 0.0), ("t_release_lateness_us500", 500.0)]


@pytest.mark.parametrize("name", ["débit", "a/b", "..", "run 1"])
def test_a_name_every_reader_would_refuse_is_refused_when_the_file_is_read(name):
    """Rule: scenario and variant names follow the one path-name rule (experiments/names.py) that
    merge and the Flent export apply: a non-ASCII letter passed str.isalnum() here and was then
    refused by the export, after the lab had run."""
    from experiments.names import is_safe_name
    from experiments.output.flent import check_name
    assert not is_safe_name(name)
    with pytest.raises(ValueError):
        check_name(name, "scenario")
    with pytest.raises(ScenarioError, match="name: .* ASCII letters"):
        parse_scenario(with_(name=name))
    with pytest.raises(ScenarioError, match="variants.* ASCII letters"):
        parse_scenario(with_(disciplines=[name], variants={name: {"discipline": "red"}}))
    assert parse_scenario(with_(name="rtt20.5ms+x")).name == "rtt20.5ms+x"
