"""Rule: every key a run record and a batch.json carry is documented in docs/schemas.md.

docs/schemas.md is the reference of a results directory's two JSON files. The page names the file in a
`## batch.json` or `## run.json` heading, then each object of it in a `###` heading (its path in code spans,
`metrics.flows[]`, `links.<link>`; "Top level" for the file's own keys), followed by a table whose first column
names the object's keys. These tests hold that every key of every such object is in its table, and that no
table names a key nothing writes.

Where the keys come from, and why two sources. results/ is not in git (absent on a fresh clone) and the lab
cannot run in a unit test, so the keys come from what the tests already hold and from the writing code itself:

- Records made by the real code, already kept in tests: tests/fixtures/run_record (a real lab run's run.json,
  from an older version: it lacks batch_id, provenance and some newer keys and still has older ones, such as
  scenario.sweep_delay_ms, which the page documents as older records' keys); the pinned outputs of
  tests/experiments/test_pinned_outputs.py (traffic.json: what the real traffic phase collects on a fake lab;
  metrics.json: run_metrics of five synthetic records; scenarios.json: Scenario.to_dict of every built-in
  scenario and of files that use every option); and a batch.json made here by plan_batch from a pinned scenario.
  They show real shapes, but only the keys their scenarios happened to produce (none has MPTCP, a capture,
  reverse, short and real-time flows at once) and only as of their last regeneration.
- The code that writes each object, read with `ast` and never run: the dict literals, `record["key"] = ...`
  assignments, `.update({...})` and `.append({...})` calls of the functions that build it (run_case, _traffic,
  flow_record, link_record, run_metrics, Batch.to_dict, merge_shards, ...), and the fields of the scenario's
  dataclasses (Scenario.to_dict is dataclasses.asdict). This names every key, optional ones included, as soon
  as a function starts writing it; so a key added to a record and not to the page fails here.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "schemas.md")
PINNED = os.path.join(REPO, "tests", "experiments", "pinned")
FIXTURE_RUN = os.path.join(REPO, "tests", "fixtures", "run_record", "runs", "bbr_cubic", "droptail", "rep1",
                           "run.json")

CASE = "experiments/run/case.py"
ORCHESTRATE = "experiments/run/orchestrate.py"
IPERF = "experiments/run/probes/iperf.py"
LINK = "experiments/run/probes/link.py"
CAPTURE = "experiments/run/probes/capture.py"
SHORT = "experiments/run/probes/short.py"
UDP = "experiments/run/probes/udp.py"
HOSTS = "experiments/lab/hosts.py"
METRICS = "experiments/analysis/metrics.py"
FIDELITY = "experiments/analysis/fidelity.py"
PROVENANCE = "experiments/batch/provenance.py"
PLAN = "experiments/batch/plan.py"
MERGE = "experiments/batch/merge.py"
MODEL = "experiments/scenario/model.py"


# --- the keys the writing code names, read with ast ------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _module(rel: str) -> ast.Module:
    with open(os.path.join(REPO, rel)) as f:
        return ast.parse(f.read(), rel)


def _function(rel: str, qualname: str) -> ast.FunctionDef:
    """A module's function, or a class's method as `Class.method`."""
    body = _module(rel).body
    *owners, name = qualname.split(".")
    for owner in owners:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == owner).body
    for node in body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"{rel}: no function {qualname}: the test's source for a documented object moved")


def _own_nodes(fn: ast.FunctionDef):
    """Every node of fn's body, not those of functions defined inside it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def _keys_of(node, rel: str, inner: bool = False) -> set[str]:
    """The string keys a dict-valued expression has: a literal (with its `**` parts: a literal, a
    conditional one, or a call of a function of the module, whose returned keys count), either branch
    of a conditional; with `inner`, a dict comprehension's values' keys (a dict of objects by name)."""
    if isinstance(node, ast.Dict):
        keys = set()
        for key, value in zip(node.keys, node.values):
            if key is None:
                keys |= _keys_of(value, rel)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.add(key.value)
        return keys
    if isinstance(node, ast.IfExp):
        return _keys_of(node.body, rel, inner) | _keys_of(node.orelse, rel, inner)
    if isinstance(node, ast.DictComp):
        return _keys_of(node.value, rel) if inner else set()
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            any(isinstance(n, ast.FunctionDef) and n.name == node.func.id for n in _module(rel).body):
        return returned(rel, node.func.id)
    return set()


def returned(rel: str, qualname: str, inner: bool = False) -> set[str]:
    """The keys of what the function returns."""
    return set().union(*(_keys_of(n.value, rel, inner) for n in _own_nodes(_function(rel, qualname))
                         if isinstance(n, ast.Return) and n.value is not None))


def assigned(rel: str, qualname: str, var: str) -> set[str]:
    """The keys the function gives the dict `var`: `var = {...}`, `var["key"] = ...` (also as one
    target of several) and `var.update(...)`."""
    keys = set()
    for node in _own_nodes(_function(rel, qualname)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == var:
                    keys |= _keys_of(node.value, rel)
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == var \
                            and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                        keys.add(t.slice.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == var:
            keys |= set().union(*(_keys_of(arg, rel) for arg in node.args))
    return keys


def appended(rel: str, qualname: str) -> set[str]:
    """The keys of the dict literals the function appends to a list (`rows.append({...})`)."""
    return set().union(*(_keys_of(n.args[0], rel) for n in _own_nodes(_function(rel, qualname))
                         if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                         and n.func.attr == "append" and n.args))


def literal_with(rel: str, qualname: str, key: str) -> set[str]:
    """The keys of the function's dict literals that have `key` among theirs."""
    literals = [_keys_of(n, rel) for n in _own_nodes(_function(rel, qualname)) if isinstance(n, ast.Dict)]
    return set().union(*(keys for keys in literals if key in keys))


def subscripts_assigned(rel: str, qualname: str) -> set[str]:
    """The string keys the function assigns through a subscript, at any depth (`rtts[cls]["k"] = ...`)."""
    return {t.slice.value for n in _own_nodes(_function(rel, qualname)) if isinstance(n, ast.Assign)
            for t in n.targets if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
            and isinstance(t.slice.value, str)}


def fields(rel: str, cls: str) -> set[str]:
    """A dataclass's fields: the keys dataclasses.asdict gives it."""
    node = next(n for n in _module(rel).body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def module_dict_values(rel: str, name: str) -> set[str]:
    """The string values of a module-level dict literal (a table of names the record uses as keys)."""
    node = next(n for n in _module(rel).body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets))
    return {v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}


GROUPS = ("metrics.classes.<cc>", "metrics.aggregates.<aggregate>", "metrics.rtts.<group>",
          "metrics.reverse.classes.<cc>")
STATISTICS = ("metrics.rtt_ms", "metrics.queue_delay_ms", "metrics.flows[].srtt_ms", "metrics.flows[].cwnd_pkts")


def code_keys() -> dict[tuple[str, str], set[str]]:
    """(file, object path) -> the keys the code that writes that object names."""
    run = {
        "": (returned(CASE, "failed_record") | assigned(CASE, "run_case", "record") | returned(CASE, "_traffic")
             | literal_with(ORCHESTRATE, "run_batch", "batch_id")),  # made_by: batch_id and provenance
        "case": literal_with(CASE, "failed_record", "discipline"),
        "provenance": returned(PROVENANCE, "collect"),
        "provenance.project": returned(PROVENANCE, "project_version"),
        "scenario": fields(MODEL, "Scenario"),
        "scenario.link": fields(MODEL, "Link"),
        "scenario.link.reverse": fields(MODEL, "ReverseLink"),
        "scenario.flows[]": fields(MODEL, "Flow"),
        "scenario.ping": fields(MODEL, "Ping"),
        "scenario.short_flows[]": fields(MODEL, "ShortFlows"),
        "scenario.udp_flows[]": fields(MODEL, "UdpFlows"),
        "scenario.link_changes[]": fields(MODEL, "LinkChange"),
        "host_setup": assigned(HOSTS, "host_setup", "setup"),
        "tcp_counters.<host>": module_dict_values(HOSTS, "TCP_COUNTERS"),
        "flows[]": assigned(IPERF, "flow_record", "rec"),
        "flows[].subflows[]": appended(IPERF, "flow_record"),
        "links.<link>": returned(LINK, "link_record") | assigned(CASE, "_traffic", "rec"),  # rec: its capture
        "links.<link>.series[]": appended(LINK, "link_record"),
        "links.<link>.capture": returned(CAPTURE, "capture_record"),
        "group_pings[]": literal_with(CASE, "_traffic", "series"),
        "short_flows[]": assigned(SHORT, "short_flow_record", "rec"),
        "udp_flows[]": assigned(UDP, "udp_flow_record", "rec"),
        "link_changes[]": appended(CASE, "_change_links_on_time"),
        "metrics": returned(METRICS, "run_metrics"),
        "metrics.flows[]": returned(METRICS, "_flow_metrics"),
        "metrics.flows[].tcp_state": returned(METRICS, "_tcp_state"),
        "metrics.flows[].subflows[]": literal_with(METRICS, "_subflow_metrics", "key"),
        "metrics.links.<link>": returned(METRICS, "_link_metrics"),
        "metrics.links.<link>.schedule": returned(FIDELITY, "link_schedule"),
        "metrics.cpu": returned(METRICS, "_cpu_metrics"),
        "metrics.senders.<host>": returned(METRICS, "_sender_metrics", inner=True),
        "metrics.short_flows.<label>": returned(METRICS, "short_flow_metrics"),
        "metrics.udp_flows.<label>": returned(METRICS, "udp_flow_metrics"),
        "metrics.mptcp.<label>": returned(METRICS, "mptcp_metrics", inner=True),
        # run_metrics pops each group ping's "reasons" into the fidelity reasons
        "metrics.group_pings[]": returned(METRICS, "_group_ping_metrics") - {"reasons"},
        "metrics.capture.<link>": literal_with(METRICS, "_capture_metrics", "sojourn_ms"),
        "metrics.phases[]": literal_with(METRICS, "phase_metrics", "from_s"),
        # run_metrics keeps every key of the reverse metrics but their flow list
        "metrics.reverse": returned(METRICS, "_reverse_metrics") - {"flow_list"},
        "metrics.fidelity": literal_with(METRICS, "run_metrics", "trusted"),
    }
    group = returned(METRICS, "_group_metrics", inner=True)
    run.update({path: set(group) for path in GROUPS})
    run["metrics.rtts.<group>"] |= subscripts_assigned(METRICS, "_rtts_with_pings")  # ping_rtt_ms
    run.update({path: returned(METRICS, "_stats") for path in STATISTICS})
    batch = {
        "": returned(PLAN, "Batch.to_dict") | literal_with(MERGE, "merge_shards", "merged_from"),
        "shard": fields(PLAN, "Shard"),
        "project": returned(PROVENANCE, "project_version"),
        "scenarios.<scenario>": literal_with(PLAN, "Batch.to_dict", "grid_point"),
        "merged_from[]": literal_with(MERGE, "merge_shards", "dir"),
    }
    return {**{("batch.json", p): k for p, k in batch.items()}, **{("run.json", p): k for p, k in run.items()}}


# --- the keys of records the real code made, kept in tests ----------------------------------------------

def _json(path: str):
    with open(path) as f:
        return json.load(f)


def realistic_runs() -> list[dict]:
    """Run records, or the parts of one, that the real code made (module docstring)."""
    traffic = _json(os.path.join(PINNED, "traffic.json"))
    metrics = _json(os.path.join(PINNED, "metrics.json"))
    scenarios = _json(os.path.join(PINNED, "scenarios.json"))
    return ([_json(FIXTURE_RUN)] + [out["record"] for out in traffic.values()]
            + [{"metrics": m} for m in metrics["run_metrics"].values()]
            + [{"scenario": s} for kind in ("parsed", "builtin") for s in scenarios[kind].values()])


def realistic_batches() -> list[dict]:
    """A shard's batch.json as `ckcd-coex run --shard 0/2` writes it, of a pinned built-in scenario."""
    from experiments.batch.plan import Shard, plan_batch
    from experiments.scenario.model import Scenario

    scenario = Scenario.from_dict(_json(os.path.join(PINNED, "scenarios.json"))["builtin"]["bbr_cubic"])
    project = {"commit": "a" * 40, "dirty": False, "diff_sha256": None, "package": "0.2.0"}
    batch = plan_batch([scenario], project, Shard(0, 2))
    return [json.loads(json.dumps(batch.to_dict("ckcd-coex run bbr_cubic --shard 0/2")))]


def keys_at(data, path: str) -> set[str]:
    """The keys of the objects at `path` in data: `a.b` a key, `a[]` every entry of a list, `<name>`
    every value of an object keyed by names."""
    nodes = [data]
    for part in path.split(".") if path else []:
        name, every = (part[:-2], True) if part.endswith("[]") else (part, False)
        found = []
        for node in nodes:
            if not isinstance(node, dict):
                continue
            values = list(node.values()) if name.startswith("<") else [node[name]] if name in node else []
            for value in values:
                found += (value if isinstance(value, list) else []) if every else [value]
        nodes = found
    return {key for node in nodes if isinstance(node, dict) for key in node}


def expected_keys() -> dict[tuple[str, str], set[str]]:
    """(file, object path) -> every key the code names for it or a kept record holds there."""
    expected = code_keys()
    made = {"run.json": realistic_runs(), "batch.json": realistic_batches()}
    for (file, path), keys in expected.items():
        for record in made[file]:
            keys |= keys_at(record, path)
    return expected


# --- the page ------------------------------------------------------------------------------------------

def documented_tables() -> list[tuple[list[tuple[str, str]], set[str]]]:
    """Each table of the page under a `## batch.json` or `## run.json` heading: the objects its `###`
    heading names and the keys its first column names."""
    tables: list = []
    file = None
    with open(DOC) as f:
        for line in f:
            if line.startswith("## "):
                file = next((name for name in ("batch.json", "run.json") if f"`{name}`" in line), None)
            elif line.startswith("### "):
                if file is None:
                    continue
                paths = [""] if line.strip() == "### Top level" else re.findall(r"`([^`]+)`", line)
                tables.append(([(file, p) for p in paths], set()))
            elif line.startswith("|") and file and tables:
                first = line.split("|")[1].strip()
                if first == "key" or not first.strip("-: "):
                    continue
                tables[-1][1].update(re.findall(r"`([^`]+)`", first))
    return tables


def _name(obj: tuple[str, str]) -> str:
    file, path = obj
    return f"{file} {path or '(top level)'}"


def test_every_key_of_a_run_record_and_a_batch_json_is_documented():
    """Rule: every key a run record and a batch.json carry is documented in docs/schemas.md: each object
    the code writes (or a record kept in tests holds) has its table, and the table names each of its keys."""
    documented: dict[tuple[str, str], set[str]] = {}
    for objects, keys in documented_tables():
        for obj in objects:
            documented.setdefault(obj, set()).update(keys)
    problems = []
    for obj, keys in sorted(expected_keys().items()):
        assert keys, f"{_name(obj)}: the test found no key for it in the code: its source moved (code_keys)"
        if obj not in documented:
            problems.append(f"{_name(obj)}: no table (a `### \\`{obj[1]}\\`` heading under `## \\`{obj[0]}\\``)")
        elif keys - documented[obj]:
            problems.append(f"{_name(obj)}: not documented: {', '.join(sorted(keys - documented[obj]))}")
    assert not problems, "docs/schemas.md is missing keys the records carry:\n  " + "\n  ".join(problems)


def test_the_page_documents_no_key_that_no_record_carries():
    """Rule: every key a run record and a batch.json carry is documented in docs/schemas.md, and only
    those: a table names no object and no key that neither the writing code nor a record kept in tests has
    (a renamed or removed key goes from the page too; older records' keys are in the fixture record)."""
    expected = expected_keys()
    problems = []
    for objects, keys in documented_tables():
        unknown = [obj for obj in objects if obj not in expected]
        if unknown:
            problems.append(f"{', '.join(map(_name, unknown))}: a table for an object this test knows no "
                            f"source for (add it to code_keys)")
            continue
        carried = set().union(*(expected[obj] for obj in objects))
        if keys - carried:
            problems.append(f"{', '.join(map(_name, objects))}: documented but carried by nothing: "
                            f"{', '.join(sorted(keys - carried))}")
    assert not problems, "docs/schemas.md documents what no record carries:\n  " + "\n  ".join(problems)
