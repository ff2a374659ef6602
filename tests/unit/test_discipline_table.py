"""One source of truth for the queue disciplines: the C core's parameter
tables. coex/discipline_table.py is generated from `ckcd-replay --catalog`; the policy
checks, the REST schema and the experiment runner read it; relations between parameters
are left to the core's own init, asked through ovs_config.aqm.check_spec. These tests fail
when a copy drifts from the C tables or when input the core would refuse gets through."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from decimal import ROUND_DOWN, Decimal
from pathlib import Path

import pytest

from coex.disciplines import DISCIPLINES, PORT_DISCIPLINES, spec_text
from controller_parts import ControllerParts
from coex.policy import Policy, PolicyError, Problem
from experiments.scenario.disciplines import KNOWN_PARAMS, discipline_spec
from ovs_config.aqm import AqmSpecError, check_spec
from ryu_app.openapi import build_openapi

REPO = Path(__file__).resolve().parents[2]


def test_the_generated_table_is_the_cores():
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_discipline_table.py"), "--check"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def test_every_copy_reads_the_table():
    names = [d["title"] for d in build_openapi()["components"]["schemas"]["Aqm"]["oneOf"]]
    assert names == list(PORT_DISCIPLINES)
    assert set(KNOWN_PARAMS) == set(PORT_DISCIPLINES)
    assert all(KNOWN_PARAMS[n] == tuple(DISCIPLINES[n].params) for n in PORT_DISCIPLINES)
    assert "bands" in DISCIPLINES and "bands" not in PORT_DISCIPLINES  # composed by the controller


def port_with(aqm: dict) -> dict:
    return {"ports": [{"dpid": 1, "port": 2, "capacity_bps": 100_000_000, "aqm": aqm}]}


@pytest.mark.parametrize("aqm,field", [
    ({"discipline": "ckcd", "params": {"limt": 80}}, "ports[0].aqm.params.limt"),
    ({"discipline": "droptail", "params": {"limit": 0}}, "ports[0].aqm.params.limit"),
    ({"discipline": "ckcd", "params": {"omega": 5}}, "ports[0].aqm.params.omega"),
    ({"discipline": "ckcd", "params": {"delta_ms": 0}}, "ports[0].aqm.params.delta_ms"),
    ({"discipline": "ckcd", "params": {"omega": 0.0000001}}, "ports[0].aqm.params.omega"),
    ({"discipline": "codel", "params": {"target_ms": 0.0001}}, "ports[0].aqm.params.target_ms"),
    ({"discipline": "cocoa", "params": {"multiplier": "fast"}}, "ports[0].aqm.params.multiplier"),
    ({"discipline": "nosuch"}, "ports[0].aqm.discipline"),
    ({"discipline": "hdcodel", "params": {"mode": "static", "heavy_key": "h1>h3"}}, "ports[0].aqm.params.heavy_key"),
    ({"discipline": "hdcodel", "params": {"mode": "static", "heavy_key": "10.0.0.1>fd00::1"}},
     "ports[0].aqm.params.heavy_key"),
])
def test_a_parameter_the_core_refuses_is_refused_naming_it(aqm, field):
    with pytest.raises(PolicyError) as e:
        Policy.from_dict(port_with(aqm))
    assert e.value.field == field and e.value.kind is Problem.INVALID


@pytest.mark.parametrize("spec,param", [
    ("red min=60 max=20", "max"),
    ("choke min=80 max=80", "max"),
    ("ckcd dth_min_ms=10 dth_max_ms=5", "dth_min_ms"),
    ("ckcd qmin=70 qmax=60", "qmin"),
])
def test_relations_between_parameters_are_the_cores_to_check(spec, param):
    # Policy.from_dict takes each of these (every value is in its range) ...
    name, *pairs = spec.split()
    Policy.from_dict(port_with({"discipline": name, "params": {k: int(v) for k, v in
                                                                 (p.split("=") for p in pairs)}}))
    # ... and the core names the parameter
    with pytest.raises(AqmSpecError) as e:
        check_spec(spec, 100_000_000)
    assert e.value.param == param


@pytest.mark.parametrize("spec,typed", [
    ("droptail limt=80", {"param": "limt", "code": "unknown-parameter", "other": None, "band": None}),
    ("red max_p=1.5", {"param": "max_p", "code": "range", "other": None, "band": None}),
    ("red min=60 max=20", {"param": "max", "code": "conflict", "other": "min", "band": None}),
    ("bands | droptail | droptail limit=0", {"param": "limit", "code": "range", "other": None, "band": 1}),
    ("nosuch", {"param": None, "code": "unknown-discipline", "other": None, "band": None}),
])
def test_check_spec_reads_the_cores_typed_refusal(spec, typed):
    """check_spec reads ckcd-replay's JSON line, not the English message."""
    with pytest.raises(AqmSpecError) as e:
        check_spec(spec, 100_000_000)
    assert {k: getattr(e.value, k) for k in typed} == typed
    assert e.value.message and not e.value.message.startswith("ckcd-replay:")


def described_defaults(name: str) -> dict:
    """The core's own description of the discipline with every default filled in."""
    out = subprocess.run([str(REPO / "datapath" / "build" / "ckcd-replay"), "--describe", "--qdisc", name],
                         check=True, capture_output=True, text=True).stdout.split()[1:]
    params = {}
    for k, v in (kv.split("=", 1) for kv in out):
        if DISCIPLINES[name].params[k].kind == "number":
            params[k] = float(v) if "." in v else int(v)
        else:
            params[k] = v
    return params


def test_a_spec_the_policy_writes_is_one_the_core_takes():
    # Every discipline with all its defaults written out through the policy, decimals
    # without an exponent (max_p=0.000001, not 1e-06), at the port's rate.
    for name in PORT_DISCIPLINES:
        params = {k: v for k, v in described_defaults(name).items() if k != "rate_bps"}
        aqm = Policy.from_dict(port_with({"discipline": name, "params": params})).ports[0].aqm
        check_spec(aqm.spec(100_000_000), 100_000_000)
    tiny = Policy.from_dict(port_with({"discipline": "red", "params": {"max_p": 0.000001}})).ports[0].aqm
    assert "max_p=0.000001" in tiny.spec(100_000_000)
    check_spec(tiny.spec(100_000_000), 100_000_000)


def test_a_host_pair_key_is_stored_as_written_and_checked_by_the_core():
    """hdcodel's Static heavy key named by address: ckcd-link resolves it (docs/hdcodel.md);
    the policy keeps the text, and the core still judges the rest of the spec."""
    aqm = Policy.from_dict(port_with({"discipline": "hdcodel", "params": {
        "mode": "static", "heavy_key": "10.0.0.1>10.0.0.3"}})).ports[0].aqm
    assert aqm.spec(100_000_000) == "hdcodel heavy_key=10.0.0.1>10.0.0.3 mode=static"
    check_spec(aqm.spec(100_000_000), 100_000_000)
    with pytest.raises(AqmSpecError) as e:  # a heavy key is static mode's only
        check_spec("hdcodel heavy_key=10.0.0.1>10.0.0.3", 100_000_000)
    assert e.value.param == "heavy_key"


def test_experiments_write_specs_the_core_takes():
    for name in PORT_DISCIPLINES:
        check_spec(discipline_spec(name, 100_000_000, 20.0, 80), 100_000_000)


@pytest.mark.parametrize("aqm,field,status", [
    ({"discipline": "ckcd", "params": {"nosuch": 1}}, "ports[0].aqm.params.nosuch", 422),
    ({"discipline": "droptail", "params": {"limit": 0}}, "ports[0].aqm.params.limit", 422),
    ({"discipline": "ckcd", "params": {"omega": 5}}, "ports[0].aqm.params.omega", 422),
    ({"discipline": "ckcd", "params": {"dth_min_ms": 10, "dth_max_ms": 5}}, "ports[0].aqm.params.dth_min_ms", 409),
    ({"discipline": "red", "params": {"min": 60, "max": 20}}, "ports[0].aqm.params.max", 409),
    ({"discipline": "ckcd", "params": {"delta_ms": 0}}, "ports[0].aqm.params.delta_ms", 422),
    # at this port's 10 Mbit/s and CKCD's default 20 ms, 3 BDP is 50 packets
    ({"discipline": "ckcd", "params": {"qmin": 60}}, "ports[0].aqm.params.qmin", 409),
])
def test_rest_refuses_what_the_link_would_and_keeps_the_policy(aqm, field, status):
    """Rule: a parameter out of the core's table is a 422; parameters each in range that the
    core's own check refuses together (a relation, or one against the port's rate) are a 409;
    either way the policy stays as it was."""
    # Each of these was answered 200 and stored, then failed at every start.
    app = ControllerParts()
    api = app.api()
    assert api.handle("PUT", "/coex/v1/ports/0x42/1", {}, json.dumps({"capacity_bps": 10_000_000}).encode())[0] == 200
    before = (app.policy_version, app.policy.to_dict())
    got, payload, _ = api.handle("PUT", "/coex/v1/ports/0x42/1/aqm", {}, json.dumps(aqm).encode())
    assert got == status and payload["field"] == field, payload
    assert (app.policy_version, app.policy.to_dict()) == before
    status, payload, _ = api.handle("PUT", "/coex/v1/ports/0x42/1/aqm", {},
                                    json.dumps({"discipline": "cocoa", "params": {"flow_limit": 50}}).encode())
    assert status == 200 and app.policy_version == before[0] + 1


# Relations the core checks between parameters, as chains each below (or not above) the next:
# a value at one end of its range is tried with the parameters before it at their minimum and
# those after it at their maximum, so it is judged on its own, not against another's default.
CHAINS = {"red": [("min", "max", "limit")], "choke": [("min", "max", "limit")], "fred": [("min", "max", "limit")],
          "ckcd": [("qmin", "qmax", "limit"), ("dth_min_ms", "dth_max_ms")],
          "dualpi2": [("step_thresh_pkts", "limit"), ("min_qlen_step", "limit"), ("mtu", "memory_limit")]}
ALSO = {("hdcodel", "heavy_key"): {"mode": "static"}}  # a heavy key is static mode's only
BANDS_CHILDREN = " | droptail" * 8  # room for `default` and `penalized` up to band 7


def room_for(name: str, param: str) -> dict:
    table = DISCIPLINES[name].params
    out = dict(ALSO.get((name, param), {}))
    for chain in CHAINS.get(name, []):
        if param in chain:
            i = chain.index(param)
            out.update({q: table[q].min for q in chain[:i]} | {q: table[q].max for q in chain[i + 1:]})
    return out


def values_to_render(param) -> list[Decimal]:
    """The range's ends, the default, a step inside each end and a value with every decimal
    the core takes (0.1234567... of the way up the range, cut to the param's decimals)."""
    step = Decimal(1).scaleb(-param.decimals)
    lo, hi = Decimal(repr(param.min)), Decimal(repr(param.max))
    every_digit = (lo + (hi - lo) * Decimal("0." + "123456789" * 3)).quantize(step, rounding=ROUND_DOWN)
    candidates = {lo, hi, Decimal(repr(param.default)), lo + step, hi - step, every_digit}
    return sorted(v for v in candidates if lo <= v <= hi)


def described(spec: str) -> tuple[dict | None, dict | None]:
    """ckcd-replay --describe: the parsed spec's own parameters, or the core's typed refusal."""
    done = subprocess.run([str(REPO / "datapath" / "build" / "ckcd-replay"), "--describe", "--rate-bps",
                           "100000000", "--qdisc", spec], capture_output=True, text=True, timeout=10)
    if done.returncode == 0:
        return dict(kv.split("=", 1) for kv in done.stdout.split("|")[0].split()[1:]), None
    return None, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", list(DISCIPLINES))
def test_every_rendered_value_is_parsed_back_by_the_core_as_the_same_value(name):
    """spec_text is the one renderer: every numeric parameter at its range's ends, its default
    and values with every decimal it takes is written as plain decimals, and the core reads
    back the same value. A value no setting of the others lets run (RED's min at its
    maximum leaves no max above it) may only be refused as a conflict, at an end of its range:
    the parser took it, the relation did not."""
    for param in (p for p in DISCIPLINES[name].params.values() if p.kind == "number"):
        for exact in values_to_render(param):
            value = int(exact) if param.decimals == 0 else float(exact)
            text = spec_text(name, {**room_for(name, param.name), param.name: value})
            rendered = text.split(f" {param.name}=")[1].split()[0]
            assert re.fullmatch(r"-?\d+(\.\d*[1-9])?", rendered) and Decimal(rendered) == exact, text
            got, refusal = described(text + (BANDS_CHILDREN if DISCIPLINES[name].takes_children else ""))
            if got is None:
                ends = (Decimal(repr(param.min)), Decimal(repr(param.max)))
                near_end = any(abs(exact - end) <= Decimal(1).scaleb(-param.decimals) for end in ends)
                assert refusal["code"] == "conflict" and near_end, (text, refusal)
            else:
                assert Decimal(got[param.name]) == exact, (text, got[param.name])


@pytest.mark.parametrize("value,text", [(0.00005, "0.00005"), (1e-06, "0.000001"), (0.1, "0.1"), (5.0, "5"),
                                        (100_000_000, "100000000"), (1e12, "1000000000000")])
def test_format_writes_plain_decimals_never_an_exponent(value, text):
    assert DISCIPLINES["red"].params["max_p"].format(value) == text


def test_a_value_with_more_decimals_than_the_core_takes_is_refused_not_rounded():
    """Param.problem counts the digits format() writes, as the core's parser counts them: the
    value is never rounded to the table's decimals and run as another."""
    max_p = DISCIPLINES["red"].params["max_p"]
    assert max_p.problem(0.00005) is None
    assert max_p.problem(0.1000004) == "takes at most 6 decimals, got 0.1000004"
    assert max_p.problem(0.1 + 0.2) == "takes at most 6 decimals, got 0.30000000000000004"
    with pytest.raises(AqmSpecError) as e:  # and the core agrees
        check_spec(spec_text("red", {"max_p": 0.1000004}), 100_000_000)
    assert e.value.param == "max_p"


def test_rest_rounds_a_parameter_to_the_cores_decimals_and_stores_what_runs():
    """Rule (the document says "a number, rounded to 3 decimals"): a value with more decimals
    than the core keeps is taken, rounded half to even, and stored and sent to the core so;
    scenario files still refuse it (their author wrote those digits)."""
    app = ControllerParts()
    api = app.api()
    assert api.handle("PUT", "/coex/v1/ports/0x42/1", {}, json.dumps({"capacity_bps": 10_000_000}).encode())[0] == 200
    body = {"discipline": "ckcd", "params": {"delta_ms": 0.99999, "omega": 0.12345}}
    status, payload, _ = api.handle("PUT", "/coex/v1/ports/0x42/1/aqm", {}, json.dumps(body).encode())
    assert status == 200, payload
    params = dict(app.policy.ports[0].aqm.params)
    assert params["delta_ms"] == 1 and "delta_ms=1 " in app.policy.ports[0].aqm.spec(10_000_000) + " "
    assert DISCIPLINES["ckcd"].params["delta_ms"].problem(0.99999) is not None  # unrounded: refused
