"""NetworkMap: links, host learning and shortest paths, without a switch."""

import pytest

from coex.topology import Hop, NetworkMap, NoPath


def two_path_map() -> NetworkMap:
    """The two-path testbed: s1 -(3)- s2 -(2)- s4 and s1 -(4)- s3 -(2)- s4."""
    m = NetworkMap()
    for dpid in (1, 2, 3, 4):
        m.add_switch(dpid, [1, 2, 3, 4])
    for a, b in [((1, 3), (2, 1)), ((2, 2), (4, 3)), ((1, 4), (3, 1)), ((3, 2), (4, 4))]:
        m.add_link(a, b, now=0.0)
        m.add_link(b, a, now=0.0)
    return m


def test_shortest_path_is_deterministic_among_equal_paths():
    m = two_path_map()
    assert m.switch_path(1, 4) == [1, 2, 4]  # both are 2 hops; lowest dpids win
    assert m.switch_path(4, 1) == [4, 2, 1]


def test_host_path_gives_ports_at_every_hop():
    m = two_path_map()
    m.learn_host("00:00:00:00:00:01", "10.0.0.1", 1, 1, now=0.0)
    m.learn_host("00:00:00:00:00:03", "10.0.0.3", 4, 1, now=0.0)
    hops = m.host_path(m.host_by_ip("10.0.0.1"), m.host_by_ip("10.0.0.3"))
    assert hops == [Hop(1, 1, 3), Hop(2, 1, 2), Hop(4, 3, 1)]


def test_host_path_along_a_given_switch_path():
    m = two_path_map()
    m.learn_host("a", "10.0.0.1", 1, 1, now=0.0)
    m.learn_host("b", "10.0.0.3", 4, 1, now=0.0)
    hops = m.host_path(m.host_by_ip("10.0.0.1"), m.host_by_ip("10.0.0.3"), switches=[1, 3, 4])
    assert hops == [Hop(1, 1, 4), Hop(3, 1, 2), Hop(4, 4, 1)]


def test_same_switch_path_is_one_hop():
    m = two_path_map()
    m.learn_host("a", "10.0.0.1", 1, 1, now=0.0)
    m.learn_host("b", "10.0.0.2", 1, 2, now=0.0)
    assert m.host_path(m.hosts["a"], m.hosts["b"]) == [Hop(1, 1, 2)]


def test_link_loss_moves_the_path_to_the_other_branch():
    m = two_path_map()
    gone = m.remove_port(2, 1)  # s1-s2 goes down
    assert ((1, 3), (2, 1)) in gone and ((2, 1), (1, 3)) in gone
    assert m.switch_path(1, 4) == [1, 3, 4]


def test_links_expire_when_lldp_stops():
    m = two_path_map()
    m.add_link((1, 4), (3, 1), now=10.0)
    m.add_link((3, 1), (1, 4), now=10.0)
    m.add_link((3, 2), (4, 4), now=10.0)
    m.add_link((4, 4), (3, 2), now=10.0)
    gone = m.expire_links(now=11.0)  # s1-s2-s4 links last seen at 0, the others at 10
    assert {tuple(sorted(l)) for l in gone} == {((1, 3), (2, 1)), ((2, 2), (4, 3))}
    assert m.switch_path(1, 4) == [1, 3, 4]


def test_a_link_heard_in_one_direction_stays():
    """LLDP lost in the congested direction only (a bottleneck overloaded at twice its rate
    drops every other frame) is not a failed link: the other direction proves it."""
    def refresh_s1_s3_s4(now):
        for a, b in [((1, 4), (3, 1)), ((3, 2), (4, 4))]:
            m.add_link(a, b, now=now)
            m.add_link(b, a, now=now)

    m = two_path_map()
    refresh_s1_s3_s4(10.0)
    m.add_link((1, 3), (2, 1), now=10.0)  # s1 -> s2 refreshed; s2 -> s1 last seen at 0
    assert m.expire_links(now=11.0) == [((2, 2), (4, 3)), ((4, 3), (2, 2))]  # heard in neither
    assert m.switch_path(1, 2) == [1, 2]
    refresh_s1_s3_s4(13.0)
    assert m.expire_links(now=14.0) == [((1, 3), (2, 1)), ((2, 1), (1, 3))]  # now neither: gone
    assert m.switch_path(1, 4) == [1, 3, 4]


def test_no_path_between_disconnected_switches():
    m = NetworkMap()
    m.add_switch(1, [1])
    m.add_switch(2, [1])
    with pytest.raises(NoPath):
        m.switch_path(1, 2)


def test_hosts_are_never_learned_on_link_ports():
    m = two_path_map()
    assert not m.learn_host("x", "10.0.0.9", 2, 1, now=0.0)  # s2 port 1 is a link end
    assert "x" not in m.hosts


def test_discovering_a_link_forgets_hosts_wrongly_learned_on_it():
    m = NetworkMap()
    m.add_switch(1, [1, 2])
    m.add_switch(2, [1, 2])
    m.learn_host("h", "10.0.0.1", 2, 1, now=0.0)  # seen before LLDP knew s2:1 was a link
    m.add_link((1, 2), (2, 1), now=0.1)
    assert "h" not in m.hosts
    assert m.edge_ports(2) == [2]


def test_a_host_moves_only_after_silence():
    m = NetworkMap(host_move_after_s=5.0)
    m.add_switch(1, [1, 2])
    m.learn_host("h", "10.0.0.1", 1, 1, now=0.0)
    assert not m.learn_host("h", "10.0.0.1", 1, 2, now=1.0)
    assert (m.hosts["h"].dpid, m.hosts["h"].port) == (1, 1)
    assert m.learn_host("h", "10.0.0.1", 1, 2, now=7.0)
    assert m.hosts["h"].port == 2


def test_host_by_ip_follows_removals_and_address_changes():
    """The address index the packet-in path uses (a scan per packet-in would cost hosts x
    storm rate) answers as the map does: the first host learned with an address, the next
    one once that goes, nobody for an address no host has now."""
    net = NetworkMap()
    net.add_port(1, 1)
    net.add_port(1, 2)
    net.learn_host("00:00:00:00:00:01", "10.0.0.1", 1, 1, now=0.0)
    net.learn_host("00:00:00:00:00:02", "10.0.0.1", 1, 2, now=0.0)  # a duplicate address
    assert net.host_by_ip("10.0.0.1").mac == "00:00:00:00:00:01"
    net.remove_port(1, 1)
    assert net.host_by_ip("10.0.0.1").mac == "00:00:00:00:00:02"
    net.learn_host("00:00:00:00:00:02", "10.0.0.9", 1, 2, now=1.0)  # it changed its address
    assert net.host_by_ip("10.0.0.1") is None
    assert net.host_by_ip("10.0.0.9").mac == "00:00:00:00:00:02"
    assert net.host_by_ip("10.9.0.1") is None
