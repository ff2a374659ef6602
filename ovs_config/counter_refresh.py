"""How fresh an OpenFlow flow's counters are on an Open vSwitch host: its revalidator interval.

OVS does not count packets on its OpenFlow rules as they pass. Its datapath counts them on
datapath flows, and a revalidator thread credits those counts to the OpenFlow rules each
datapath flow went through when it dumps the datapath flows: once every
`other_config:max-revalidator` milliseconds (500 by default; sooner when the flow table
changes, so a new rule is credited at once). An OpenFlow flow-stats reply between two dumps
repeats the last dump's numbers. Measured on this machine's netdev bridges (a 30 Mbit/s flow,
its forwarding flow read every 20 ms): the byte counter moved every 0.47-0.52 s by default,
every 0.07-0.12 s at 100 ms (docs/sflow.md, "Fresh counters").

Confirming heavy hitters by counting (coex/counting.py) reads such counters, so the controller
asks each switch host for a shorter interval (policy heavy_hitters.counter_refresh_ms). The
setting is the whole vswitchd's, not one bridge's: an operator's interval already as short (or
OVS's own 500 ms, when ours would be longer) is left alone; otherwise ours is marked in the same row (external_ids:ckcd-coex-max-revalidator,
and the operator's value it replaced in ...-was), and taking ours back restores theirs. A value
changed since by someone else is theirs and stays.
"""

from __future__ import annotations

from typing import Optional

from ovs_config.ovsdb import Ovsdb

KEY = "max-revalidator"
MARK = "ckcd-coex-max-revalidator"   # external_ids key: the value ckcd-coex set
WAS = MARK + "-was"                  # external_ids key: the operator's value ours replaced
MIN_MS, MAX_MS = 10, 10_000
OVS_DEFAULT_MS = 500                 # what OVS runs at with the key unset


def _check_ms(ms) -> int:
    if isinstance(ms, bool) or not isinstance(ms, int) or not MIN_MS <= ms <= MAX_MS:
        raise ValueError(f"counter refresh must be an integer number of ms in {MIN_MS}..{MAX_MS}, got {ms!r}")
    return ms


def current_ms(db: Ovsdb) -> Optional[int]:
    """The host's max-revalidator in ms, None when unset (OVS's default, 500 ms)."""
    value = db.get("Open_vSwitch", ".", f"other_config:{KEY}")
    return int(value) if value is not None else None


def ensure_counter_refresh(db: Ovsdb, ms: Optional[int]) -> bool:
    """Have the host's revalidators run at least every `ms` ms; `ms` None takes back a value
    ckcd-coex set earlier. True if the database changed."""
    if ms is not None:
        _check_ms(ms)
    now = current_ms(db)
    ours = db.get("Open_vSwitch", ".", f"external_ids:{MARK}")
    was = db.get("Open_vSwitch", ".", f"external_ids:{WAS}")
    forget_mark = ["--", "remove", "Open_vSwitch", ".", "external_ids", MARK,
                   "--", "remove", "Open_vSwitch", ".", "external_ids", WAS]
    changed = False
    if ours is not None and (now is None or str(now) != ours):
        db.vsctl(*forget_mark[1:])  # changed by someone else since: theirs now
        ours = was = None
        changed = True
    # The interval the host would run at without us: the operator's (the one ours replaced), or OVS's.
    theirs = (int(was) if was is not None else None) if ours is not None else now
    if ms is None or (theirs if theirs is not None else OVS_DEFAULT_MS) <= ms:
        if ours is None:
            return changed  # nothing of ours; theirs is already as short
        restore = ["set", "Open_vSwitch", ".", f"other_config:{KEY}={theirs}"] if theirs is not None \
            else ["remove", "Open_vSwitch", ".", "other_config", KEY]
        db.vsctl(*restore, *forget_mark)
        return True
    if ours is not None and now == ms:
        return changed
    keep_was = [] if ours is not None or now is None else \
        ["--", "set", "Open_vSwitch", ".", f"external_ids:{WAS}={now}"]
    db.vsctl("set", "Open_vSwitch", ".", f"other_config:{KEY}={ms}", "--",
             "set", "Open_vSwitch", ".", f"external_ids:{MARK}={ms}", *keep_was)
    return True
