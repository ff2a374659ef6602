"""A scenario's disciplines checked when the file is read: each parameter against the core's
table as the spec is built, then the whole spec by the core itself, at every rate the link takes,
so a refusal names the scenario key instead of failing every run of the case."""

from __future__ import annotations

import functools

from experiments.scenario.model import HOST_PAIR_RE, Scenario, ScenarioError
from ovs_config.aqm import AqmBackendError, AqmSpecError, check_spec


def check_disciplines(scenario: Scenario, source: str | None) -> None:
    """Parameters are checked now, not in the middle of a run: each against the core's table
    as the spec is built, then the whole spec by the core itself (_check_by_core)."""
    hosts = scenario.hosts
    for d in scenario.disciplines:
        where = _param_key(scenario, d, None)
        try:
            spec = scenario.qdisc_spec(d)
        except AqmSpecError as err:
            raise ScenarioError(err.message, _param_key(scenario, d, err.param), source) from None
        for src, dst in HOST_PAIR_RE.findall(spec):
            if src not in hosts["senders"] + hosts["receivers"] or dst not in hosts["senders"] + hosts["receivers"]:
                raise ScenarioError(f"{src}>{dst}: the hosts are {', '.join(hosts['senders'] + hosts['receivers'])}",
                                    where, source)
        _check_by_core(scenario, d, spec, source)
        if scenario.has_reverse_flows:
            _check_reverse(scenario, d, source)


def _check_reverse(scenario: Scenario, discipline: str, source: str | None) -> None:
    """With reverse flows the case's discipline runs in the reverse direction too, at its rate
    and buffer: checked there as well, naming the discipline's table and the direction."""
    where = _param_key(scenario, discipline, None)
    try:
        spec = HOST_PAIR_RE.sub("0", scenario.reverse_qdisc_spec(discipline))
        refusal = _core_refusal(spec, scenario.reverse_rate_bps)
    except (AqmSpecError, AqmBackendError) as err:
        refusal = err
    if refusal is not None:
        raise ScenarioError(f"in the reverse direction ([link.reverse], which reverse flows load): {refusal}",
                            where, source)


def _check_by_core(scenario: Scenario, discipline: str, spec: str, source: str | None) -> None:
    """The core's own check of a spec (ckcd-replay --describe, as the REST API asks it), at
    every rate the run's link takes (ckcd-link rebuilds a discipline at a link change's rate,
    and refuses the change if the discipline does): what only the core's init knows, RED's
    min below max or CKCD's qmin against its BDP, is refused here, naming the key, instead of
    failing every run of the case."""
    # The runner gives ckcd-link the hosts' addresses, which it turns into a number: the
    # core only ever sees a number there.
    spec = HOST_PAIR_RE.sub("0", spec)
    rates = [scenario.link.rate_bps] + [c.rate_bps for c in scenario.link_changes if c.rate_bps]
    for rate in dict.fromkeys(rates):
        try:
            refusal = _core_refusal(spec, rate)
        except AqmBackendError as err:
            raise ScenarioError(f"the core cannot check it: {err}", _param_key(scenario, discipline, None),
                                source) from None
        if refusal is not None:
            at = "" if rate == scenario.link.rate_bps else f" (at a link change's rate, {rate} bit/s)"
            given = scenario.overrides(discipline)[1]
            # Of the two parameters a conflict is between, name the one the file sets.
            param = refusal.other if refusal.param not in given and refusal.other in given else refusal.param
            raise ScenarioError(refusal.message + at, _param_key(scenario, discipline, param), source)


@functools.lru_cache(maxsize=None)
def _core_refusal(spec: str, rate_bps: int) -> AqmSpecError | None:
    """check_spec once per distinct spec and rate in a process: each is a ckcd-replay
    process, and a grid repeats most of its specs at every point."""
    try:
        check_spec(spec, rate_bps)
    except AqmSpecError as err:
        return err.with_traceback(None)  # kept for the process: not its frames
    return None


def _param_key(scenario: Scenario, discipline: str, param: str | None) -> str:
    """The scenario key that sets (or would set) a parameter of a discipline or variant: the
    variant's own table unless only [discipline_params] sets it; the table itself when no
    parameter is named."""
    variant = scenario.variants.get(discipline)
    if variant is None:
        table = f"discipline_params.{discipline}"
    elif param not in variant and param in scenario.discipline_params.get(variant["discipline"], {}):
        table = f"discipline_params.{variant['discipline']}"
    else:
        table = f"variants.{discipline}"
    return f"{table}.{param}" if param else table
