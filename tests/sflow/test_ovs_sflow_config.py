"""ovs_config.sflow: the ovs-vsctl command it builds and its argument checks (no OVS needed;
the lab test runs it against the real private OVS)."""

from __future__ import annotations

import pytest

from ovs_config.private_ovs import OVSError
from ovs_config.sflow import (disable_sflow, enable_sflow, ensure_sflow, listed_targets, sflow_command, sflow_settings,
                              validate_target)


def test_command_is_the_working_form():
    assert sflow_command("s1") == [
        "--", "--id=@s", "create", "sflow", "agent=lo", 'target="127.0.0.1:6343"',
        "sampling=64", "polling=10", "header=128", "--", "set", "bridge", "s1", "sflow=@s"]


def test_several_targets_and_ipv6():
    cmd = sflow_command("br0", sampling=256, polling_s=2,
                        target=["127.0.0.1:6343", "[2001:db8::1]:6343"], agent="eth0")
    assert 'target=["127.0.0.1:6343","[2001:db8::1]:6343"]' in cmd
    assert "sampling=256" in cmd and "polling=2" in cmd and "agent=eth0" in cmd


@pytest.mark.parametrize("kw, name", [
    ({"bridge": ""}, "bridge"), ({"bridge": "s1; rm -rf /"}, "bridge"),
    ({"bridge": "a" * 16}, "bridge"),
    ({"sampling": 0}, "sampling"), ({"sampling": 1.5}, "sampling"), ({"sampling": True}, "sampling"),
    ({"sampling": 2 ** 32}, "sampling"),
    ({"polling_s": 0}, "polling_s"), ({"polling_s": 99999}, "polling_s"),
    ({"agent": "lo eth0"}, "agent"),
    ({"header_bytes": 8}, "header_bytes"),
    ({"target": "localhost:6343"}, "target"), ({"target": "127.0.0.1"}, "target"),
    ({"target": "127.0.0.1:0"}, "target"), ({"target": "127.0.0.1:70000"}, "target"),
    ({"target": "300.1.1.1:6343"}, "target"), ({"target": []}, "target"), ({"target": 6343}, "target"),
])
def test_validation_names_the_parameter(kw, name):
    args = {"bridge": "s1", **kw}
    with pytest.raises(ValueError, match=name):
        sflow_command(**args)


def test_validate_target_normalises():
    assert validate_target(" 127.0.0.1:6343 ") == "127.0.0.1:6343"
    assert validate_target("[2001:DB8:0::1]:6343") == "[2001:db8::1]:6343"


def test_enable_disable_settings_through_a_vsctl_callable():
    calls = []

    def vsctl(*args):
        calls.append(args)
        if args[:2] == ("get", "bridge"):
            return "5b1f3f4e-0000-0000-0000-000000000000\n"
        if args[0].startswith("--columns"):
            return 'agent               : lo\nsampling            : 64\ntarget              : "127.0.0.1:6343"\n'
        return "5b1f3f4e-0000-0000-0000-000000000000\n"

    assert enable_sflow("s1", sampling=64, polling_s=1, vsctl=vsctl).startswith("5b1f3f4e")
    assert calls[0][-1] == "sflow=@s" and "polling=1" in calls[0]
    assert sflow_settings("s1", vsctl=vsctl) == {"agent": "lo", "sampling": "64",
                                                 "target": '"127.0.0.1:6343"'}
    disable_sflow("s1", vsctl=vsctl)
    assert calls[-1] == ("clear", "bridge", "s1", "sflow")
    assert sflow_settings("s1", vsctl=lambda *a: "[]\n") is None


def test_ensure_sflow_leaves_an_agent_alone_that_already_sends_there():
    """A new sFlow row restarts the agent, so a reconfigure that changes nothing must not make one.
    The fake answers as the real ovs-vsctl does (the column is `targets`, a set)."""
    rows = {"s1": None}
    creates = []

    def vsctl(*args):
        if args[:2] == ("get", "bridge"):
            return "[]\n" if rows["s1"] is None else "5b1f3f4e-0000-0000-0000-000000000000\n"
        if args[0].startswith("--columns"):
            target, sampling, polling, header = rows["s1"]
            return (f'agent               : lo\nheader              : {header}\npolling             : {polling}\n'
                    f'sampling            : {sampling}\ntargets             : ["{target}"]\n')
        creates.append(args)
        rows["s1"] = tuple(next(a.split("=", 1)[1].strip('"') for a in args if a.startswith(f"{column}="))
                           for column in ("target", "sampling", "polling", "header"))
        return "5b1f3f4e-0000-0000-0000-000000000000\n"

    assert ensure_sflow("s1", sampling=64, polling_s=1, target="127.0.0.1:6343", vsctl=vsctl) is True
    assert ensure_sflow("s1", sampling=64, polling_s=1, target="127.0.0.1:6343", vsctl=vsctl) is False
    assert ensure_sflow("s1", sampling=256, polling_s=1, target="127.0.0.1:6343", vsctl=vsctl) is True
    assert ensure_sflow("s1", sampling=256, polling_s=1, target="127.0.0.1:16343", vsctl=vsctl) is True
    # An agent left at OVS's 128-byte header gets the controller's 512 (a sample waits less, docs/sflow.md)
    rows["s1"] = ("127.0.0.1:16343", "256", "1", "128")
    assert ensure_sflow("s1", sampling=256, polling_s=1, target="127.0.0.1:16343", vsctl=vsctl) is True
    assert "header=512" in creates[-1]
    assert len(creates) == 4


def test_ensure_sflow_compares_a_set_of_targets():
    """Rule: several collectors (every instance's, docs/ha.md) are one set: the same ones in
    another order change nothing; one more or one fewer makes a new row. The fake lists the
    set as the real ovs-vsctl does (["a", "b"])."""
    row = {}

    def vsctl(*args):
        if args[:2] == ("get", "bridge"):
            return "5b1f3f4e-0000-0000-0000-000000000000\n" if row else "[]\n"
        if args[0].startswith("--columns"):
            listed = ", ".join(f'"{t}"' for t in row["targets"])
            return f"header              : 512\npolling             : 1\nsampling            : 64\ntargets             : [{listed}]\n"
        value = next(a.split("=", 1)[1] for a in args if a.startswith("target="))
        row["targets"] = [t.strip('"') for t in value.strip("[]").split(",")]
        return "5b1f3f4e-0000-0000-0000-000000000000\n"

    two = ["127.0.0.1:6344", "127.0.0.1:6343"]
    assert ensure_sflow("s1", sampling=64, polling_s=1, target=two, vsctl=vsctl) is True
    assert row["targets"] == ["127.0.0.1:6343", "127.0.0.1:6344"]
    assert ensure_sflow("s1", sampling=64, polling_s=1, target=list(reversed(two)), vsctl=vsctl) is False
    assert ensure_sflow("s1", sampling=64, polling_s=1, target=two[:1], vsctl=vsctl) is True
    assert row["targets"] == ["127.0.0.1:6344"]
    assert listed_targets('["[::1]:6343", "10.0.0.1:6343"]') == ["[::1]:6343", "10.0.0.1:6343"]
    assert listed_targets("127.0.0.1:6343") == ["127.0.0.1:6343"] and listed_targets("") == []


def test_a_row_replaced_between_the_two_reads_is_read_again():
    """Rule: another writer can replace the bridge's sFlow row (a change of targets is a new
    row) after its reference was read: sflow_settings reads the new reference and its row
    instead of failing with ovs-vsctl's "no row"; any other failure still raises."""
    refs = iter(["aaaaaaaa-0000-0000-0000-000000000000\n", "bbbbbbbb-0000-0000-0000-000000000000\n"])

    def vsctl(*args):
        if args[:2] == ("get", "bridge"):
            return next(refs)
        if args[-1].startswith("aaaaaaaa"):
            raise OVSError(f'ovs-vsctl {" ".join(args)} failed: ovs-vsctl: no row "{args[-1]}" in table sFlow')
        return 'targets             : ["127.0.0.1:6343", "127.0.0.1:6344"]\n'

    assert sflow_settings("s1", vsctl=vsctl) == {"targets": '["127.0.0.1:6343", "127.0.0.1:6344"]'}

    def broken(*args):
        if args[:2] == ("get", "bridge"):
            return "aaaaaaaa-0000-0000-0000-000000000000\n"
        raise OVSError("ovs-vsctl: unix:/run/db.sock: database connection failed")
    with pytest.raises(OVSError, match="database connection failed"):
        sflow_settings("s1", vsctl=broken)
