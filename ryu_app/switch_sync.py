"""What each switch holds of ours, and the messages that change it.

For every connected switch the controller keeps the state of ours it holds (a
coex.switch_state.SwitchState: read back from its flow and meter tables when it connects, then
kept as each change is written) and brings it to the state wanted by sending only the
difference (coex.switch_state.diff), in Delta's steps with a barrier after each, so a step is
done before the next begins. Every message carries an xid, remembered until the barrier after
it is answered: an OFPT_ERROR the switch sends for one of them is matched to it, logged,
counted (coex_switch_errors in /metrics) and handed to whoever waits for that write (a REST
change reports it as a 502 naming the switch).

The waiting happens outside Ryu's event loop (the replies it waits for come through that
loop): in REST handlers and in the green thread a connecting switch's reconcile runs in.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from typing import Callable, Iterable

from coex.switch_state import Delta, Flow, Meter, SwitchState, diff
from ryu_app import flows
from ryu_app.framework import hub
from ryu_app.multipart import MultipartReads

READ_TIMEOUT_S = 5.0     # a connecting switch's flow and meter tables
WRITE_TIMEOUT_S = 5.0    # a REST change waits this long for the switches' last barrier


@dataclasses.dataclass(frozen=True)
class SwitchError:
    """An OFPT_ERROR matched to the message that caused it."""
    dpid: int
    command: str               # add_flow, modify_flow, delete_flow, add_meter, ...
    what: str                  # the flow or meter, in words
    type: str                  # OFPET_* name
    code: int
    data: str                  # the switch's text, when it sent one

    def __str__(self) -> str:
        return f"switch {self.dpid:016x} refused {self.command} {self.what}: {self.type} code {self.code}"


class Write:
    """One write to one switch: done when the barrier after its last message is answered."""

    def __init__(self, dpid: int):
        self.dpid, self.done, self.errors = dpid, hub.Event(), []


class SwitchSync:
    def __init__(self, logger, reads: MultipartReads | None = None,
                 may_write: Callable[[int], bool] = lambda dpid: True):
        self.logger = logger
        self.may_write = may_write  # whether we are the switch's confirmed MASTER (ryu_app.roles)
        self.reads = reads if reads is not None else MultipartReads()   # shared with FlowCounters
        self.held: dict[int, SwitchState] = {}          # dpid -> ours on the switch, once read
        self.stale: set[int] = set()                     # switches that refused a message: read them again
        self.error_counts: Counter = Counter()           # (dpid, OFPET name) -> errors
        self.write_counts: Counter = Counter()           # (dpid, command) -> flow-mods and meter-mods sent
        self._sent: dict[tuple[int, int], tuple[str, object, Write]] = {}   # (dpid, xid) -> message
        self._barriers: dict[tuple[int, int], Write] = {}

    # --- writing ---------------------------------------------------------------------------

    def fresh(self, dpid: int) -> bool:
        """Whether what the switch holds is known: read, and nothing refused since."""
        return dpid in self.held and dpid not in self.stale

    def converge(self, dp, wanted: SwitchState) -> Write | None:
        """Send what takes the switch from what it holds to `wanted`; None when its state was
        never read (its reconcile, still under way, will converge it), we may not write to it
        (not its MASTER) or nothing changes."""
        held = self.held.get(dp.id)
        if held is None or not self.may_write(dp.id):
            return None
        self.held[dp.id] = wanted
        delta = diff(held, wanted)
        return self._write(dp, delta.steps()) if delta else None

    def change(self, dp, add: Iterable[Flow] = (), delete: Iterable[Flow] = ()) -> Write | None:
        """A few flows in or out (a tree's hops, a steered flow), sent as one step. A switch
        whose state is still being read gets them too: the reconcile's read may predate them."""
        if not self.may_write(dp.id):  # its reconcile, once it confirms us, sends what is wanted
            return None
        add, delete = tuple(add), tuple(delete)
        held = self.held.get(dp.id)
        if held is not None:
            keys = {f.key for f in add} | {f.key for f in delete}
            self.held[dp.id] = SwitchState(frozenset(f for f in held.flows if f.key not in keys) | set(add),
                                           held.meters)
        commands = [("delete_flow", f) for f in delete] + [("add_flow", f) for f in add]
        return self._write(dp, [commands]) if commands else None

    def _write(self, dp, steps: list[list[tuple[str, Flow | Meter]]]) -> Write:
        write = Write(dp.id)
        for step in steps:
            for command, value in step:
                msg = flows.message(dp, command, value)
                dp.set_xid(msg)
                self._sent[(dp.id, msg.xid)] = (command, value, write)
                self.write_counts[(dp.id, command)] += 1
                dp.send_msg(msg)
            barrier = flows.barrier(dp)
            dp.set_xid(barrier)
            self._barriers[(dp.id, barrier.xid)] = write
            dp.send_msg(barrier)
        return write

    def wait(self, writes: Iterable[Write | None], timeout_s: float = WRITE_TIMEOUT_S) -> tuple[list, list[int]]:
        """(the errors of `writes`, the dpids that did not finish within timeout_s)."""
        deadline, errors, late = time.monotonic() + timeout_s, [], []
        for w in writes:
            if w is None:
                continue
            if not w.done.wait(max(0.0, deadline - time.monotonic())):
                late.append(w.dpid)
            errors += w.errors
        return errors, late

    # --- the switch's answers (from the controller's event handlers) ---------------------------

    def on_error(self, dpid: int, msg, type_name: str) -> SwitchError | None:
        """An OFPT_ERROR: matched to our message by its xid; None if it was none of ours."""
        sent = self._sent.pop((dpid, msg.xid), None)
        if sent is None:
            return None
        command, value, write = sent
        data = msg.data.decode("utf-8", "replace") if isinstance(msg.data, bytes) else str(msg.data or "")
        err = SwitchError(dpid, command, describe(value), type_name, msg.code,
                          data if data.isprintable() else "")
        write.errors.append(err)
        self.error_counts[(dpid, type_name)] += 1
        self.logger.error("%s", err)
        self.stale.add(dpid)  # what it holds is not what we sent: read it before the next change
        return err

    def on_barrier(self, dpid: int, xid: int) -> None:
        write = self._barriers.pop((dpid, xid), None)
        if write is None:
            return
        # everything of this write sent before this barrier has been answered (an error comes
        # before the barrier's reply); the steps after it are still on their way
        for key in [k for k, (_, _, w) in self._sent.items() if w is write and k[1] < xid]:
            del self._sent[key]
        if not any(w is write for w in self._barriers.values()):
            write.done.set()

    def forget(self, dpid: int) -> None:
        """A switch that went away: what it holds must be read again when it comes back."""
        self.held.pop(dpid, None)
        self.stale.discard(dpid)
        for table in (self._sent, self._barriers):
            for key in [k for k in table if k[0] == dpid]:
                table.pop(key)
        self.reads.forget(dpid)

    # --- reading what a switch holds -------------------------------------------------------------

    def reconcile(self, dp, wanted: Callable[[], SwitchState],
                  adopt: Callable[[int, SwitchState], None] | None = None) -> Write | None:
        """Read the switch's flows of ours and its meters, hand them to adopt(dpid, held) (the
        controller takes what it did not know of, e.g. after a restart), then converge it to
        wanted() (asked after the read, so it includes what changed meanwhile). Blocks for the
        read; a switch that does not answer keeps its flows, and is read again on its next
        connect."""
        # both asked at once: until they are answered the switch holds none of what we send it
        flow_entries, meter_entries = self._read(dp, flows.our_flows_request(dp), flows.meters_request(dp))
        if flow_entries is None or meter_entries is None:
            self.logger.warning("switch %016x did not send its tables within %.0f s: not reconciled",
                                dp.id, READ_TIMEOUT_S)
            return None
        held = self.held[dp.id] = SwitchState.of((flows.flow_of(dp, e) for e in flow_entries),
                                                 (flows.meter_of(dp, e) for e in meter_entries))
        self.stale.discard(dp.id)
        if adopt is not None:
            adopt(dp.id, held)
        target = wanted()
        changes = sum(len(step) for step in diff(held, target).steps())
        self.logger.info("switch %016x reconciled: it held %d flows of ours and %d meters, %d changes sent",
                         dp.id, len(held.flows), len(held.meters), changes)
        return self.converge(dp, target)

    def _read(self, dp, *requests) -> list[list | None]:
        """Send the multipart requests together and wait for their replies: one list of entries
        per request, None for one not answered within READ_TIMEOUT_S."""
        return self.reads.gather([self.reads.send(dp, r) for r in requests], READ_TIMEOUT_S)


def describe(value) -> str:
    if isinstance(value, Meter):
        return f"meter {value.meter_id} ({value.rate} {value.unit}, burst {value.burst})"
    match = " ".join(f"{k}={v}" for k, v in value.match) or "any"
    return f"flow table {value.table} priority {value.priority} match {match}"

