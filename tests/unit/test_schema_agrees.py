"""The OpenAPI document and the validator say the same thing (one source for both): a value
the document's schema takes is one coex.policy / coex.disciplines take, and the other way round,
for the rules a JSON Schema can state. Checked with jsonschema, as a client would check.
"""

from __future__ import annotations

import random

import jsonschema
import pytest

from coex.disciplines import DISCIPLINES
from coex.policy import PolicyError, PrefixField, _prefix


def test_prefix_pattern_and_validator_agree():
    """Rule: an IPv4 address or prefix (length, netmask or host mask) matches the document's
    pattern exactly when the validator takes it: 20 000 strings of the forms a client writes,
    from a fixed seed."""
    schema = PrefixField().json_schema()
    rnd = random.Random(7)
    octet = lambda: str(rnd.choice([0, 1, 127, 128, 192, 224, 240, 248, 252, 254, 255, rnd.randrange(256)]))  # noqa: E731
    disagree = []
    for _ in range(20_000):
        address = ".".join(octet() for _ in range(4))
        kind = rnd.randrange(3)
        text = address if kind == 0 else f"{address}/{rnd.randrange(40)}" if kind == 1 else \
            f"{address}/{'.'.join(octet() for _ in range(4))}"
        in_schema = jsonschema.Draft202012Validator(schema).is_valid(text)
        try:
            _prefix(text, "x")
            taken = True
        except PolicyError:
            taken = False
        if in_schema != taken:
            disagree.append(text)
    assert not disagree, disagree[:10]


PARAMS = [(d, p) for d, disc in DISCIPLINES.items() for p in disc.params.values() if p.kind == "number" and p.unit != "key"]


@pytest.mark.parametrize("discipline, param", PARAMS, ids=[f"{d}.{p.name}" for d, p in PARAMS])
def test_a_discipline_parameters_schema_and_the_cores_table_agree(discipline, param):
    """Rule: a value the document's schema takes is one the REST API takes (rounded to the
    core's decimals first), and the other way round: for an integer parameter 3.0 is an integer
    to both and 1e-300 to neither; for one with decimals any number in range is taken, with
    more decimals than the core keeps too."""
    schema = param.json_schema()
    probes = [param.min, param.max, param.max + 1, param.min - 1, float(param.max), (param.min + param.max) // 2,
              1e-300, param.min + 0.5, param.min + 10 ** -(param.decimals + 2), param.max - 0.123456789]
    for value in probes:
        in_schema = jsonschema.Draft202012Validator(schema).is_valid(value)
        taken = param.problem(param.rounded(value)) is None
        assert in_schema == taken, (value, in_schema, taken)
