"""The real controller managing a kernel-datapath switch host over the network.

One VM boot for the module (tests/kernel/ovs_lab.py): Open vSwitch 3.1 on Debian 12's kernel
datapath in the kernel lab, sch_ckcd.ko loaded and ckcd-qdisc-agent running beside it; the
real `ryu-manager ckcd_coex` on the host reaches it only through qemu's network (OpenFlow on
TCP, OVSDB on TCP). The tests run in file order and build on each other's policy, as an
operator's session would: forwarding, a discipline attached by PUT .../aqm, DropTail against
CKCD for BBR and CUBIC, DELETE, Separate Queues through OVSDB queues, a heavy hitter steered,
a controller restart, a switch reconnect, Interface rows with hostile names the agent
skips, and wrong or unreachable OVSDB addresses.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import pytest

from experiments.lab.net import Controller
from experiments.lab.rest_client import CoexClient
from tests.conftest import REPO
from tests.hostload import HostLoad, wait_for_quiet_host
from tests.kernel import lab, ovs_lab
from tests.kernel.ovs_lab import DPID, LINK_BPS, OVSDB_REMOTE
from tests.waiting import eventually

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

PORT = 3  # s1-eth3, towards h3: the bottleneck
# Agent round (1 s) + the controller's OVSDB calls to a TCG guest: a change shows within seconds.
APPLY_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def kl(tmp_path_factory):
    """(vm, controller, REST client) with switch 1's OVSDB set to the VM's before it connects."""
    try:
        lab.check_prerequisites()
    except lab.LabUnavailable as e:
        pytest.skip(str(e))
    from ovs_config.lablock import lab_lock
    tmp = tmp_path_factory.mktemp("ovs-kernel")
    ctl = Controller(of_port=ovs_lab.OF_PORT, rest_port=ovs_lab.REST_PORT, log_path=str(tmp / "ryu.log"),
                     db_path=str(tmp / "policy.sqlite"))
    with lab_lock():  # the VM runs traffic: no other lab beside it
        ctl.start()
        api = CoexClient(ctl.rest_url)
        api.ok("PUT", f"/switches/{DPID}", {"ovsdb": OVSDB_REMOTE, "collector": ovs_lab.GUEST_COLLECTOR})
        vm = None
        try:
            vm = ovs_lab.start_vm(REPO)
            eventually(lambda: connected(api), timeout_s=30, what="switch 1 connects from the VM")
            yield vm, ctl, api
        finally:
            if vm is not None:
                print("--- agent log\n" + vm.sh("cat /tmp/agent.log")[1][-3000:])
                vm.stop()
            ctl.stop()
            print("--- controller log (tail)\n" + ctl.log()[-4000:])


def connected(api) -> bool:
    return any(s["dpid"] == DPID and s["connected"] for s in api.ok("GET", "/state")["switches"])


def in_sync(api) -> bool:
    """The switch connected and its tables read and brought to the policy (a moment after it connects)."""
    return any(s["dpid"] == DPID and s["in_sync"] for s in api.ok("GET", "/state")["switches"])


def port_state(api) -> dict:
    for p in api.ok("GET", "/state")["ports"]:
        if (p["dpid"], p["port"]) == (DPID, PORT):
            return p
    return {}


def ping(vm, src="h1", dst="10.0.0.3", count=3) -> str:
    return vm.check(f"$IP netns exec {src} ping -c {count} -W 2 {dst}")


def interface_ids(vm) -> dict:
    from ovs_config.ovsdb import _datum
    out = json.loads(vm.check("ovs-vsctl --format=json --columns=external_ids find Interface name=s1-eth3"))
    return _datum(out["data"][0][0])


def qos_type(vm) -> str:
    out = vm.check("q=$(ovs-vsctl get Port s1-eth3 qos); [ \"$q\" = '[]' ] || ovs-vsctl get QoS $q type")
    return out.strip().strip('"')


def test_switch_host_is_reached_over_the_network(kl):
    """The switch connected over TCP, and /state says its configuration goes to the remote OVSDB."""
    vm, ctl, api = kl
    sw = [s for s in api.ok("GET", "/state")["switches"] if s["dpid"] == DPID][0]
    assert sw["connected"] and sw["ovsdb"] == OVSDB_REMOTE and "ovsdb_error" not in sw, sw
    assert f"tcp:{lab.HOST_FROM_GUEST}:{ovs_lab.OF_PORT}" in vm.check("ovs-vsctl get-controller s1")


def test_hosts_reach_each_other_through_the_kernel_datapath(kl):
    """Forwarding by the controller's flows on the kernel datapath (ovs-dpctl shows them)."""
    vm, _, api = kl
    out = ping(vm)
    assert " 0% packet loss" in out, out
    assert re.search(r"min/avg/max = ([\d.]+)", out) and float(re.search(r"min/avg/max = ([\d.]+)", out)
                                                                 .group(1)) >= ovs_lab.BASE_RTT_MS, out
    assert "system@ovs-system" in vm.check("ovs-dpctl show")
    assert "priority=" in ovs_lab.flows(vm) and "goto_table" in ovs_lab.flows(vm)


def test_put_aqm_attaches_the_ckcd_qdisc_to_the_ovs_port(kl):
    """PUT .../aqm on a kernel-datapath port: QoS linux-noop (vswitchd keeps off the qdisc),
    HTB at the port's capacity with the core spec as the `ckcd` leaf; /state shows the backend
    and the qdisc's live xstats."""
    vm, _, api = kl
    api.ok("PUT", f"/ports/{DPID}/{PORT}", {"capacity_bps": LINK_BPS})
    api.ok("PUT", f"/ports/{DPID}/{PORT}/aqm", {"discipline": "ckcd", "params": {"limit": 16}})
    st = eventually(lambda: port_state(api).get("status") == "applied" and port_state(api), what="port applied")
    assert st["aqm_backend"] == "sch_ckcd" and st["queue_backend"] == "ovsdb-queue", st
    assert st["discipline"].startswith("ckcd limit=16") and st["qdisc"]["applied"] == st["discipline"], st
    show = ovs_lab.tc_show(vm)
    assert re.search(r"qdisc htb 1: root", show) and re.search(r"qdisc ckcd 10: parent 1:1 .*limit 16", show), show
    assert "20Mbit" in ovs_lab.tc_show(vm, "class"), ovs_lab.tc_show(vm, "class")
    assert qos_type(vm) == "linux-noop"
    ping(vm, count=2)  # some packets through it, then the stats the agent reports
    kinds = eventually(lambda: [q for q in port_state(api)["qdisc"].get("qdiscs", [])
                                if q.get("kind") == "ckcd" and q.get("packets", 0) > 0],
                       timeout_s=APPLY_TIMEOUT_S, what="the agent reports the ckcd qdisc's counters")
    assert "enq_pkts" in json.dumps(kinds[0]), kinds  # ckcd's own xstats, not only tc's


# What the guest must carry under DropTail for the port to be the bottleneck: 80 % of the
# 19.1 Mbit/s goodput ceiling (20 x 1448/1514). Below it the guest's CPU limits the flows, not
# the port: no queue builds and neither discipline has anything to decide (seen: 10.3 Mbit/s
# under both, Jain 0.95 under DropTail, while the host ran other work beside the VM).
FILLED_MBPS = 0.8 * 20 * 1448 / 1514


def bbr_cubic_under(vm, api, disc: str) -> tuple[dict, float]:
    """Goodputs (Mbit/s) and Jain index of BBR against CUBIC for 12 s with disc on the port (a
    bottleneck port of LINK_BPS, as an earlier test made it: the fairness test also runs alone)."""
    api.ok("PUT", f"/ports/{DPID}/{PORT}", {"capacity_bps": LINK_BPS})
    api.ok("PUT", f"/ports/{DPID}/{PORT}/aqm", {"discipline": disc, "params": {"limit": 16}})
    eventually(lambda: port_state(api).get("qdisc", {}).get("applied", "").startswith(f"{disc} limit=16"),
               timeout_s=APPLY_TIMEOUT_S, what=f"{disc} applied")
    assert "qdisc ckcd 10: parent 1:1" in ovs_lab.tc_show(vm)
    rates = ovs_lab.two_flows(vm, "bbr", "cubic", seconds=12)
    print(f"{disc}: BBR {rates['a']:.2f} CUBIC {rates['b']:.2f} Mbit/s, Jain {ovs_lab.jain(rates):.3f}")
    return rates, ovs_lab.jain(rates)


def test_ckcd_on_the_ovs_port_turns_starvation_into_a_fair_share(kl):
    """Rule (Liu et al., CKCD): BBR against CUBIC through the OVS port.
    DropTail with 16 packets (half a BDP at 20 Mbit/s, 20 ms) lets BBR take most of the link;
    CKCD at the same limit, attached by the controller, shares it. Same claim and tolerance as
    the bare-qdisc kernel test (tests/kernel/test_sch_ckcd.py): CKCD's Jain index >= 0.9 and at
    least 0.15 above DropTail's, with the link still used: at least 85 % of what DropTail carried
    in the same boot. Measured here (docs/real-switches.md): DropTail 18.1-18.3 Mbit/s, CKCD
    16.8-18.0, 0.92 of it or more. Against DropTail's own total, not the 19.1 Mbit/s ceiling:
    under TCG the guest's speed sets what any discipline can carry, and a CI run on a slowed host
    carried 16.95 under DropTail and 14.83 under CKCD (0.875), below an absolute 80 % of the
    ceiling (15.3) while CKCD shared as it should (Jain 0.941).

    The claim needs the port to be the bottleneck: a pair in which DropTail carried under
    FILLED_MBPS (the guest slowed by the host) is run once more, and a second such pair fails
    saying the guest could not fill the port. So is a pair measured while the hypervisor
    withheld the host's CPU (HostLoad.disturbed: the experiments' STEAL_HIGH_PCT), which then
    measured the host, not the port: the second pair waits for the spell to pass (at most 2 min)."""
    vm, _, api = kl
    for attempt in (1, 2):
        with HostLoad() as load:
            results = {disc: bbr_cubic_under(vm, api, disc) for disc in ("droptail", "ckcd")}
        carried = sum(results["droptail"][0].values())
        if carried >= FILLED_MBPS and not load.disturbed or attempt == 2:
            break
        quiet, waited = wait_for_quiet_host(120) if load.disturbed else (True, 0.0)
        print(f"DropTail carried {carried:.2f} Mbit/s (the port is filled from {FILLED_MBPS:.1f}); {load} "
              f"(try {attempt}; {'quiet' if quiet else 'still disturbed'} after {waited:.0f} s)")
    assert carried >= FILLED_MBPS, f"the guest could not fill the port in two tries (the host is too busy " \
        f"for this test): DropTail carried {carried:.2f} Mbit/s, under {FILLED_MBPS:.1f}; {results}; {load}"
    (_, j_tail), (ckcd_rates, j_ckcd) = results["droptail"], results["ckcd"]
    assert j_ckcd >= 0.9 and j_ckcd - j_tail >= 0.15, (results, str(load))
    assert sum(ckcd_rates.values()) >= 0.85 * carried, (results, str(load))


def test_delete_aqm_gives_the_port_back(kl):
    """DELETE .../aqm: the agent removes its qdiscs (the kernel's default returns) and the port's
    QoS is what it was before (none)."""
    vm, _, api = kl
    api.ok("DELETE", f"/ports/{DPID}/{PORT}/aqm")
    eventually(lambda: "ckcd" not in ovs_lab.tc_show(vm) and "htb" not in ovs_lab.tc_show(vm),
               timeout_s=APPLY_TIMEOUT_S, what="the ckcd qdisc gone from s1-eth3")
    assert qos_type(vm) == ""
    ids = interface_ids(vm)
    assert not any(k.startswith("ckcd-qdisc") for k in ids), ids
    assert vm.check("ovs-vsctl list QoS").strip() == ""  # our noop row destroyed, not left behind


def test_separate_queues_through_ovsdb_queues_give_the_weighted_shares(kl):
    """Rule (Hock et al., Separate Queues; seed 001's OVSDB queues): linux-htb QoS with a Queue per
    aggregate and set_queue in the path flows. Weights 1:3 give the low-delay aggregate 25 % of
    the link while both are backlogged, within the 15 % relative tolerance of the ckcd-link and
    tc-htb band tests (0.21-0.29): HTB lends what the idle classes leave in proportion to the
    classes' rates. Without set_queue classifying, both would share 50:50."""
    vm, _, api = kl
    from tests.integration.labkit import RULES, weight_share_bounds
    for rule in RULES:
        api.ok("PUT", f"/rules/{rule['name']}", rule)
    api.ok("PUT", "/aggregates/queue_filling", {"queue_weight": 3})
    api.ok("PUT", "/approaches", {"separate_queues": True})
    eventually(lambda: port_state(api).get("queues"), what="queues applied")
    assert qos_type(vm) == "linux-htb"
    eventually(lambda: "set_queue" in ovs_lab.flows(vm) or "set_queue:" in ovs_lab.flows(vm),
               what="path flows with set_queue")
    rates = ovs_lab.two_flows(vm, "cubic", "cubic", seconds=12)
    share = rates["a"] / (rates["a"] + rates["b"])
    low, high = weight_share_bounds()
    print(f"Separate Queues (ovsdb-queue): low_delay {rates['a']:.2f}, queue_filling {rates['b']:.2f} "
          f"Mbit/s, share {share:.3f}")
    classes = ovs_lab.tc_show(vm, "class")
    assert low <= share <= high, (rates, share, classes)


def test_aqm_under_separate_queues_sits_under_each_ovs_queue(kl):
    """With OVS's linux-htb owning the root, the discipline goes under every queue's class."""
    vm, _, api = kl
    api.ok("PUT", f"/ports/{DPID}/{PORT}/aqm", {"discipline": "ckcd", "params": {"limit": 30}})
    eventually(lambda: port_state(api).get("qdisc", {}).get("applied", "").startswith("ckcd limit=30"),
               timeout_s=APPLY_TIMEOUT_S, what="ckcd under the queues")
    show = ovs_lab.tc_show(vm)
    n_queues = len(port_state(api)["queues"])
    assert len(re.findall(r"qdisc ckcd \w+: parent 1:\d+", show)) == n_queues, show
    assert qos_type(vm) == "linux-htb"
    api.ok("DELETE", f"/ports/{DPID}/{PORT}/aqm")
    eventually(lambda: "ckcd" not in ovs_lab.tc_show(vm), timeout_s=APPLY_TIMEOUT_S, what="leaves removed")
    api.ok("PUT", "/approaches", {"separate_queues": False})
    eventually(lambda: qos_type(vm) == "", what="OVS queues removed")
    assert vm.check("ovs-vsctl list Queue").strip() == ""


def test_heavy_hitter_from_the_vm_sflow_agent_is_steered(kl):
    """Rule (seed 003, heavy hitters): the VM's OVS sFlow agent, configured by the controller over
    OVSDB to send to the host's collector, reports a UDP flow at 12 Mbit/s (60 % of the
    port) above the 30 % threshold; the controller steers it with a table-0 flow on the VM's
    switch."""
    vm, _, api = kl
    api.ok("PUT", "/heavy-hitters/config", {"enabled": True, "sampling": 32, "polling_s": 2,
                                            "collector": f"127.0.0.1:{ovs_lab.SFLOW_PORT}",
                                            "capacity_share": 0.3, "window_s": 3, "min_window_s": 1})
    eventually(lambda: "10.0.2.2" in vm.check("ovs-vsctl list sflow"), what="sFlow agent configured")
    vm.check("$IP netns exec h1 iperf3 -c 10.0.0.3 -p 5303 -u -b 12M -l 1400 -t 10 > /tmp/u.txt 2>&1 &"
             " echo started")
    steering = eventually(lambda: re.search(r"priority=2100,udp,nw_src=10.0.0.1,nw_dst=10.0.0.3",
                                            ovs_lab.flows(vm)),
                          timeout_s=15, what="a steering flow for the UDP flow on the VM's s1")
    assert steering
    current = api.ok("GET", "/heavy-hitters")["current"]
    assert any(h["flow"]["src_ip"] == "10.0.0.1" and h["dpid"] == DPID for h in current), current
    vm.check("while pgrep -f 'iperf3 -c 10.0.0.3 -p 5303' >/dev/null; do sleep 0.5; done")
    api.ok("PUT", "/heavy-hitters/config", {"enabled": False})


def test_controller_restart_reapplies_everything_over_the_network(kl):
    """A controller killed and started again re-installs its flows and re-attaches the port's
    discipline through the remote OVSDB - here after the switch host lost both meanwhile."""
    vm, ctl, api = kl
    api.ok("PUT", f"/ports/{DPID}/{PORT}/aqm", {"discipline": "ckcd", "params": {"limit": 16}})
    eventually(lambda: port_state(api).get("qdisc", {}).get("applied", "").startswith("ckcd limit=16"),
               timeout_s=APPLY_TIMEOUT_S, what="ckcd applied")
    ctl.kill()
    vm.check("ovs-vsctl remove Interface s1-eth3 external_ids ckcd-qdisc")  # the agent releases the port
    eventually(lambda: "ckcd" not in ovs_lab.tc_show(vm), timeout_s=APPLY_TIMEOUT_S, what="released")
    vm.check("ovs-ofctl -O OpenFlow13 del-flows s1")
    ctl.start()
    eventually(lambda: in_sync(api), timeout_s=30, what="switch reconnects to the new controller, which syncs it")
    eventually(lambda: "qdisc ckcd 10:" in ovs_lab.tc_show(vm), timeout_s=APPLY_TIMEOUT_S,
               what="the restarted controller re-attaches ckcd")
    assert "goto_table" in ovs_lab.flows(vm)
    assert " 0% packet loss" in ping(vm)


def test_switch_reconnect_reapplies_everything(kl):
    """The switch drops its controller, loses its flows and qdisc, and reconnects: the controller
    brings both back."""
    vm, _, api = kl
    vm.check("ovs-vsctl del-controller s1 && ovs-ofctl -O OpenFlow13 del-flows s1 && "
             "ovs-vsctl remove Interface s1-eth3 external_ids ckcd-qdisc")
    eventually(lambda: not connected(api), what="the controller sees the switch go")
    eventually(lambda: "ckcd" not in ovs_lab.tc_show(vm), timeout_s=APPLY_TIMEOUT_S, what="released")
    vm.check(f"ovs-vsctl set-controller s1 tcp:{lab.HOST_FROM_GUEST}:{ovs_lab.OF_PORT}")
    eventually(lambda: in_sync(api), timeout_s=30, what="switch reconnects and is synced")
    eventually(lambda: "qdisc ckcd 10:" in ovs_lab.tc_show(vm), timeout_s=APPLY_TIMEOUT_S,
               what="ckcd re-attached after the reconnect")
    assert " 0% packet loss" in ping(vm)



# Interface names that are no Linux netdevice name: a path out of the agent's state directory,
# an embedded newline (two lines of a list), a space (two words), a glob, one byte too long.
HOSTILE_NAMES = ("../../tmp/victim", "evil\nname", "a b", "*", "s1-eth3-too-long")
AGENT_STATE = "/run/ckcd-qdisc-agent"  # the agent's default; BOOT sets no CKCD_QDISC_AGENT_STATE
VICTIM = "/tmp/victim"


def hostile_rows(vm) -> dict:
    """{name: external_ids} of the managed Interface rows named in HOSTILE_NAMES."""
    from ovs_config.ovsdb import _datum
    out = json.loads(vm.check("ovs-vsctl --format=json --columns=name,external_ids "
                              "find Interface external_ids:ckcd-qdisc-managed=true"))
    return {_datum(n): _datum(ids) for n, ids in out["data"] if _datum(n) in HOSTILE_NAMES}


def hostile_log_counts(vm) -> dict:
    """How many times the agent's log says it skipped each of HOSTILE_NAMES."""
    log = vm.check("cat /tmp/agent.log")
    return {n: log.count(f"skipping Interface {json.dumps(n)}:") for n in HOSTILE_NAMES}


def agent_rounds_pass(vm, rounds: int) -> None:
    """Returns once `rounds` more rounds of the agent began, no sleeping: the agent writes
    s1-eth3's stats every round, so each time they come back after being removed, a round
    wrote them after the removal."""
    for i in range(rounds):
        vm.check("ovs-vsctl remove Interface s1-eth3 external_ids ckcd-qdisc-stats")
        eventually(lambda: interface_ids(vm).get("ckcd-qdisc-stats"), timeout_s=APPLY_TIMEOUT_S,
                   what=f"the agent's round {i + 1} writes s1-eth3's stats again")


def agent_state_entries(vm) -> list:
    """The names in the agent's state directory, hidden ones included, read "/"-separated (no
    file name holds one)."""
    return vm.check(f"for f in {AGENT_STATE}/* {AGENT_STATE}/.[!.]* {AGENT_STATE}/..?*; do "
                    "[ -e \"$f\" ] && printf '%s/' \"${f##*/}\"; done; true").split("/")[:-1]


def test_agent_skips_hostile_interface_names_and_logs_each_once(kl):
    """Rule (datapath/kernel/ckcd-qdisc-agent, "Interface names"): the agent serves only a name
    Linux can give a network device (1-15 of A-Z a-z 0-9 . _ -, not . or ..), read from OVSDB
    as a JSON string; a row with any other name is skipped and logged once per agent process.
    Managed rows named ../../tmp/victim, with a newline, a space, "*" and 16 bytes, each asking
    for droptail: /tmp/victim (where the first would put its state file) keeps its content, no
    state file is named by them, none gets ckcd-qdisc-applied or -error, each is logged exactly
    once although the agent went through at least two more rounds (counted by its stats on
    s1-eth3, which it writes back every round after the test removes them), and s1-eth3 keeps
    the discipline the tests before left on it."""
    import shlex
    vm, _, _ = kl
    before = eventually(lambda: interface_ids(vm).get("ckcd-qdisc-applied"), timeout_s=APPLY_TIMEOUT_S,
                        what="s1-eth3's discipline applied, as the tests before left it")
    assert before and "qdisc ckcd 10:" in ovs_lab.tc_show(vm), (before, ovs_lab.tc_show(vm))
    content = "victim: not the agent's to write\n"
    try:
        vm.check(f"printf '%s' {shlex.quote(content)} > {VICTIM}")
        for name in HOSTILE_NAMES:
            q = shlex.quote(name)
            vm.check(f"ovs-vsctl --no-wait add-port s1 {q} -- set Interface {q} "
                     "external_ids:ckcd-qdisc-managed=true 'external_ids:ckcd-qdisc=\"droptail limit=16\"'")
        # vswitchd cannot open such ports, but the rows stay: the agent does see them
        assert set(hostile_rows(vm)) == set(HOSTILE_NAMES), hostile_rows(vm)
        eventually(lambda: all(hostile_log_counts(vm).values()), timeout_s=APPLY_TIMEOUT_S,
                   what="the agent logs every hostile name")
        agent_rounds_pass(vm, 3)  # at least two began after the one that logged the names
        assert hostile_log_counts(vm) == {n: 1 for n in HOSTILE_NAMES}, hostile_log_counts(vm)
        assert vm.check(f"cat {VICTIM}") == content
        listing = agent_state_entries(vm)
        assert "s1-eth3" in listing and not set(listing) & set(HOSTILE_NAMES), listing
        assert all(re.fullmatch(r"[A-Za-z0-9._-]{1,15}", n) for n in listing), listing
        rows = hostile_rows(vm)
        assert set(rows) == set(HOSTILE_NAMES), rows
        for name, ids in rows.items():
            assert "ckcd-qdisc-applied" not in ids and "ckcd-qdisc-error" not in ids, (name, ids)
        ids = interface_ids(vm)
        assert ids.get("ckcd-qdisc-applied") == before, ids
        assert "qdisc ckcd 10:" in ovs_lab.tc_show(vm), ovs_lab.tc_show(vm)
    finally:
        vm.sh("; ".join(f"ovs-vsctl --if-exists del-port s1 {shlex.quote(n)}" for n in HOSTILE_NAMES)
              + f"; rm -f {VICTIM}")
    assert hostile_rows(vm) == {}


@pytest.fixture
def bad_listeners():
    """Two addresses that take TCP but are no OVSDB: one never answers (a hung or firewalled
    server; our machines' outbound TCP is intercepted, so a far address cannot stand in for an
    unreachable host), one answers something else (an HTTP server on the OVSDB port)."""
    silent, talking = socket.socket(), socket.socket()
    for sock in (silent, talking):
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
    stop = threading.Event()

    def answer_http():
        talking.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = talking.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    thread = threading.Thread(target=answer_http, daemon=True)
    thread.start()
    yield {"silent": f"tcp:127.0.0.1:{silent.getsockname()[1]}",
           "not-ovsdb": f"tcp:127.0.0.1:{talking.getsockname()[1]}"}
    stop.set()
    thread.join()
    silent.close()
    talking.close()


@pytest.mark.parametrize("kind, says", [
    ("refused", "Connection refused"),       # nothing listens there
    ("not-ovsdb", "Protocol error"),         # something else answers there
    ("silent", "no answer within"),          # it never answers
])
def test_a_wrong_or_unreachable_ovsdb_is_one_clear_error_never_a_hang(kl, bad_listeners, kind, says):
    """A bad OVSDB address: the REST change is taken (it is a setting), the port's status and the
    switch's ovsdb_error say what is wrong, the log says it, and the controller keeps answering
    while an OVSDB call waits out its 5 s timeout (health within 2 s). Setting the right
    address back heals the port."""
    vm, ctl, api = kl
    remote = {"refused": "tcp:127.0.0.1:1", **bad_listeners}[kind]
    done = {}
    put = threading.Thread(target=lambda: done.setdefault("answer", api.put(
        f"/switches/{DPID}", {"ovsdb": remote, "collector": ovs_lab.GUEST_COLLECTOR})))
    put.start()
    eventually(lambda: api.ok("GET", "/policy")["policy"]["switches"][0]["ovsdb"] == remote
               if api.ok("GET", "/policy")["policy"]["switches"] else False, what="the setting stored")
    t0 = time.monotonic()
    api.ok("GET", "/health")
    assert time.monotonic() - t0 < 2.0, "the controller stalled on an OVSDB call"
    put.join(30)
    assert done["answer"][0] == 200, done
    st = eventually(lambda: port_state(api).get("status", "").startswith("error") and port_state(api),
                    timeout_s=30, what="the port's status names the OVSDB error")
    assert remote in st["status"] and says in st["status"], st
    sw = [s for s in api.ok("GET", "/state")["switches"] if s["dpid"] == DPID][0]
    assert says in sw.get("ovsdb_error", ""), sw
    assert f"OVSDB {remote}" in ctl.log()
    api.ok("PUT", f"/switches/{DPID}", {"ovsdb": OVSDB_REMOTE, "collector": ovs_lab.GUEST_COLLECTOR})
    eventually(lambda: port_state(api).get("status") == "applied", timeout_s=30, what="healed")
    assert "ovsdb_error" not in [s for s in api.ok("GET", "/state")["switches"] if s["dpid"] == DPID][0]
