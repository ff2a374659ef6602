"""The queue disciplines a bottleneck port can run and the checks of their parameters,
read from the C core's own tables (coex/discipline_table.py, generated from
`ckcd-replay --catalog`): the names, units, ranges, defaults and decimals are written once,
in datapath/core/<discipline>.c.

What a table cannot say - a relation between two parameters (RED's min below max, CKCD's
dth_min_ms below dth_max_ms), or a parameter that depends on the link's rate (CKCD's qmin
against its BDP) - only the core's own init knows; ovs_config.aqm.check_spec asks it, and
the REST API does so before it stores a policy, the scenario loader when it reads a file.

Spec text is written in one place, spec_text (each value by Param.format), so what the
checks passed is what reaches the core.
"""

from __future__ import annotations

import dataclasses
import decimal
import ipaddress
import math
import re

from coex.discipline_table import TABLE

# A text parameter's value goes into a space-separated spec: one token, no '|' (which
# separates the bands of `bands`) and no '=' (which separates a name from its value).
_TEXT_RE = re.compile(r"[A-Za-z0-9_.,:+-]{1,128}")
# The form of a host pair (host_pair_problem checks the addresses themselves).
_HOST_PAIR_PATTERN = "^([0-9.]{7,15}>[0-9.]{7,15}|[0-9A-Fa-f:]{2,39}>[0-9A-Fa-f:]{2,39})$"


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    unit: str
    kind: str  # "number" or "text"
    decimals: int = 0
    min: float = 0
    max: float = 0
    default: float | str = 0

    def problem(self, value) -> str | None:
        """Why the core would refuse this value, or None when it accepts it."""
        if self.unit == "key" and isinstance(value, str):
            return host_pair_problem(value)
        if self.kind == "text":
            if not isinstance(value, str) or not _TEXT_RE.fullmatch(value):
                return f"must be a word of letters, digits and _.,:+- ({self.unit})"
            return None
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or isinstance(value, float) and not math.isfinite(value)):
            return f"must be a number ({self.unit})"
        if not self.min <= value <= self.max:
            return (f"must be between {self.format(self.min)} and {self.format(self.max)} {self.unit}, "
                    f"got {self.format(value)}")
        # The digits format() writes, counted as the core's parser counts them: the two agree
        # on every value, where a tolerance would pass 0.30000000000000004 that the core refuses.
        text = self.format(value)
        if len(text.partition(".")[2]) > self.decimals:
            return f"takes at most {self.decimals} decimals, got {text}"
        return None

    def rounded(self, value):
        """A number as the REST API takes it: rounded to the table's decimals (half to even),
        so that every number the document's schema allows is taken, and the stored policy shows
        what the core runs with (as a prefix is stored as the network it names). Left as it is
        when out of range, or not a number: problem() names that. Scenario files are not
        rounded: their author wrote the digits, and more than the core keeps is refused there."""
        if (self.kind != "number" or self.decimals == 0 or isinstance(value, bool) or not isinstance(value, float)
                or not math.isfinite(value) or not self.min <= value <= self.max):
            return value
        step = decimal.Decimal(1).scaleb(-self.decimals)
        return float(decimal.Decimal(repr(value)).quantize(step, rounding=decimal.ROUND_HALF_EVEN))

    def json_schema(self) -> dict:
        """The JSON Schema of what the REST API takes: what problem() accepts once rounded()."""
        if self.kind == "text":
            return {"type": "string", "pattern": f"^{_TEXT_RE.pattern}$", "description": self.unit,
                    "default": self.default}
        desc = self.unit + (f", rounded to {self.decimals} decimals" if self.decimals else ", an integer")
        if self.name == "rate_bps":
            desc += "; at most the port's capacity_bps, which it defaults to"
        # No decimals: an integer, which JSON Schema and problem() both take as any number with
        # nothing after the point (3.0 too). Some decimals: any number in range, rounded.
        number = {"type": "integer" if self.decimals == 0 else "number", "minimum": self.min, "maximum": self.max,
                  "default": self.default, "description": desc}
        if self.unit == "key":
            return {"oneOf": [number, {"type": "string", "pattern": _HOST_PAIR_PATTERN,
                                       "description": "a host pair, sender>receiver: 10.0.0.1>10.0.0.3"}]}
        return number

    def format(self, value) -> str:
        """The value as the core's spec grammar takes it: no exponent (Python writes 0.00005
        as 5e-05, which the core refuses), no trailing zeros, and every digit the value has:
        never rounded to the table's decimals, since a value with more decimals is the core's
        to refuse (and problem()'s, naming it), not ours to change silently."""
        if self.kind == "text" or isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # exact at any size (float() of 10**400 overflows)
        if not isinstance(value, float) or not math.isfinite(value):
            raise ValueError(f"{self.name}: {value!r} is not a number")
        if value.is_integer():
            return str(int(value))
        # repr is the shortest text that reads back as this float: what the TOML or JSON said
        return format(decimal.Decimal(repr(value)), "f")


def host_pair_problem(value: str) -> str | None:
    """A key (hdcodel's heavy_key) may name a host pair by address, sender first:
    "10.0.0.1>10.0.0.3". ckcd-link, which keys its host-pair hash per run, turns it into the
    number (datapath/link/host_key.c); here only its form is checked."""
    src, sep, dst = value.partition(">")
    try:
        a, b = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    except ValueError:
        a = b = None
    if not sep or a is None or a.version != b.version:
        return ("must be a number or a host pair, two IPv4 or two IPv6 addresses, sender>receiver "
                f"(e.g. 10.0.0.1>10.0.0.3), got {value!r}")
    return None


# heavy_key=<address>><address> in a spec: see host_pair_problem.
HOST_PAIR_VALUE = re.compile(r"(?<==)[0-9A-Fa-f.:]+>[0-9A-Fa-f.:]+(?=\s|\||$)")


@dataclasses.dataclass(frozen=True)
class Discipline:
    name: str
    takes_children: bool
    params: dict[str, Param]

    @property
    def rate_aware(self) -> bool:
        """Takes the link's rate (rate_bps): the controller gives it the port's capacity."""
        return "rate_bps" in self.params


DISCIPLINES: dict[str, Discipline] = {
    d["name"]: Discipline(d["name"], d["takes_children"], {p["name"]: Param(**p) for p in d["params"]})
    for d in TABLE["disciplines"]
}
# What a port's AQM may be: every discipline but `bands`, which the controller composes
# itself under Separate Queues (each band running the port's discipline).
PORT_DISCIPLINES = tuple(name for name, d in DISCIPLINES.items() if not d.takes_children)
DROP_REASONS = tuple(TABLE["drop_reasons"])


def spec_text(discipline: str, params: dict) -> str:
    """The spec text of a discipline with these parameters, in their order: 'red limit=80
    max_p=0.00005'. The one renderer of specs (the policy's, the experiments', the bands the
    controller composes), so a value reaches the core as Param.format writes it everywhere.
    Callers have checked the names and values (Param.problem; relations: the core's
    check_spec): a name not in the table is a KeyError here."""
    table = DISCIPLINES[discipline].params
    return " ".join([discipline] + [f"{k}={table[k].format(v)}" for k, v in params.items()])
