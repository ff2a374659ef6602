"""Switch hosts across the network: the policy's `switches` section, its REST
endpoints, and ovs_config.ovsdb's errors against real ovs-vsctl. The controller driving a
real remote switch host is tests/kernel/test_ovs_kernel.py."""

from __future__ import annotations

import json
import socket
import time

import pytest

from coex.policy import Policy, PolicyError, Problem
from controller_parts import DPID, ControllerParts
from ovs_config.ovsdb import Ovsdb, OvsdbError


def call(api, method, path, body=None):
    status, payload, _ = api.handle(method, path, {}, json.dumps(body).encode() if body is not None else b"")
    return status, payload


def test_switch_hosts_round_trip_and_default_to_the_local_ovsdb():
    doc = {"switches": [{"dpid": 1, "ovsdb": "tcp:192.0.2.10:6640", "collector": "192.0.2.1:6343"},
                        {"dpid": 2, "ovsdb": "ssl:switch-b.example:6640"},
                        {"dpid": 3, "ovsdb": "unix:/var/run/openvswitch/db.sock"}]}
    policy = Policy.from_dict(doc)
    assert policy.switch_host(1).ovsdb == "tcp:192.0.2.10:6640" and policy.switch_host(1).collector == "192.0.2.1:6343"
    assert policy.switch_host(2).collector is None and policy.switch_host(9) is None
    assert Policy.from_dict(policy.to_dict()) == policy


@pytest.mark.parametrize("remote", ["6640", "tcp:192.0.2.10", "http://192.0.2.10:6640", "tcp:192.0.2.10:0",
                                    "tcp:192.0.2.10:70000", "tcp::6640", "unix:relative.sock", 6640, None,
                                    "tcp:a b:6640", "punix:/x"])
def test_a_remote_ovs_vsctl_cannot_use_is_refused_naming_the_field(remote):
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"switches": [{"dpid": 1, "ovsdb": remote}]})
    assert err.value.field == "switches[0].ovsdb" and "OVSDB remote" in err.value.message


def test_a_switch_listed_twice_a_bad_collector_and_unknown_keys_are_refused():
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"switches": [{"dpid": 1, "ovsdb": "tcp:a:6640"}, {"dpid": 1, "ovsdb": "tcp:b:6640"}]})
    assert err.value.field == "switches[1]" and err.value.kind is Problem.CONFLICT
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"switches": [{"dpid": 1, "ovsdb": "tcp:a:6640", "collector": "a"}]})
    assert err.value.field == "switches[0].collector"
    with pytest.raises(PolicyError) as err:
        Policy.from_dict({"switches": [{"dpid": 1, "ovsdb": "tcp:a:6640", "agent": "ssh"}]})
    assert "agent" in err.value.message


def test_rest_switch_endpoints_store_change_and_forget_the_setting():
    api = ControllerParts().api()
    status, body = call(api, "PUT", "/coex/v1/switches/0x42", {"ovsdb": "tcp:192.0.2.10:6640"})
    assert status == 200 and body["switch"] == {"dpid": DPID, "ovsdb": "tcp:192.0.2.10:6640", "collector": None}
    assert call(api, "GET", "/coex/v1/switches")[1]["switches"] == [body["switch"]]
    version = api.view.policy_version
    status, body = call(api, "PUT", "/coex/v1/switches/66", {"ovsdb": "tcp:192.0.2.10:1", "dpid": 67})
    assert status == 409 and body["field"] == "dpid" and api.view.policy_version == version
    status, body = call(api, "PUT", "/coex/v1/switches/66", {"ovsdb": "192.0.2.10:6640"})
    assert status == 422 and body["field"] == "switches[0].ovsdb" and api.view.policy_version == version
    assert call(api, "GET", "/coex/v1/switches/66")[1]["ovsdb"] == "tcp:192.0.2.10:6640"  # unchanged
    assert call(api, "DELETE", "/coex/v1/switches/66")[0] == 200
    assert call(api, "GET", "/coex/v1/switches/66")[0] == 404
    assert call(api, "DELETE", "/coex/v1/switches/66")[0] == 404


def test_ovs_vsctl_json_cells_become_python_values():
    """ovs-vsctl --format=json: maps, sets and uuids as dicts, lists and strings."""
    from ovs_config.ovsdb import _datum
    stats = '[{"kind":"ckcd","x":"a,b}"}]'
    cell = ["map", [["ckcd-qdisc", "bands map=46:0 | ckcd | droptail"], ["ckcd-qdisc-stats", stats]]]
    assert _datum(cell) == {"ckcd-qdisc": "bands map=46:0 | ckcd | droptail", "ckcd-qdisc-stats": stats}
    assert _datum(["set", [1, 2]]) == [1, 2] and _datum(["set", []]) == []
    assert _datum(["uuid", "0d2c"]) == "0d2c" and _datum("x") == "x"


def test_a_refused_ovsdb_is_one_sentence_naming_the_remote():
    """Real ovs-vsctl against a port nothing listens on: at once, not after the timeout."""
    t0 = time.monotonic()
    with pytest.raises(OvsdbError) as err:
        Ovsdb("tcp:127.0.0.1:1").vsctl("show")
    assert time.monotonic() - t0 < 3
    assert str(err.value) == "OVSDB tcp:127.0.0.1:1: database connection failed (Connection refused)"


def test_an_ovsdb_that_never_answers_fails_after_its_timeout():
    """Real ovs-vsctl against a listener that accepts and says nothing (a hung server): it gives
    up at --timeout (SIGALRM), and the error says so instead of "signal 14"."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        remote = f"tcp:127.0.0.1:{sock.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(OvsdbError) as err:
            Ovsdb(remote, timeout_s=1).vsctl("show")
        assert 0.9 < time.monotonic() - t0 < 4
    assert str(err.value) == f"OVSDB {remote}: no answer within 1 s (is ovsdb-server listening there?)"
