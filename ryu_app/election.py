"""Leading, standing by, and the change between them (docs/ha.md).

Instances that share one policy store run one election: the holder of the store's lock
(coex.election.LeaderLock) leads. Taking the lock, an instance begins a term in the store
(a new epoch and generation id), reads the policy and the heavy hitters its predecessor
steered, and asks every switch for MASTER; each switch that confirms is read and reconciled
(ryu_app.controller._take_switch): what it holds stays, so traffic is not touched. A
standby tries the lock every ELECTION_INTERVAL_S and keeps its map warm meanwhile (ryu_app.roles).

Every instance follows the store: a policy version stored by another instance becomes the
one in force here, and the leader enforces it. Every instance also says in the store, every
ANNOUNCE_INTERVAL_S, where its sFlow collector listens; the leader points the bridges' agents
at all of the live ones, so that every instance detects heavy hitters (ryu_app.heavy_hitters).

A leader whose MASTER request a switch refuses as stale (another instance claimed a newer
term) steps down at once: it releases the lock, forgets what switches hold, asks SLAVE, and
does not try to lead again for STEP_DOWN_HOLD_S.
"""

from __future__ import annotations

import time

from coex.remotes import collector_problem
from coex.store import ANNOUNCE_INTERVAL_S, StoreError
from ryu_app import rest
from ryu_app.framework import hub
from ryu_app.roles import MASTER, SLAVE

ELECTION_INTERVAL_S = 0.2   # how often a standby tries the lock: the bulk of a takeover's time
FOLLOW_INTERVAL_S = 0.5     # how often every instance looks for a policy another one stored
STALE_RETRY_S = 1.0         # a refused SLAVE request is asked again after this
STEP_DOWN_HOLD_S = 5.0      # a leader that stepped down waits this long before trying again


class Election:
    def __init__(self, ctl):
        self.ctl = ctl
        self._hold_until = 0.0
        self._sampling = hub.Semaphore()  # one sFlow configuration at a time (they yield in ovs-vsctl)
        self._sampling_stale = False      # the last one failed somewhere: the next announce retries

    def try_to_lead(self) -> bool:
        """Take the lock if free and lead; True while we lead. A takeover that fails half way
        (the lock lost before our term was stored, a store that does not answer) leaves us
        standing by, the lock released, to try again after STALE_RETRY_S."""
        ctl = self.ctl
        if ctl.roles.leading:
            return True
        if time.monotonic() < self._hold_until or not ctl.lock.try_take():
            return False
        try:
            self._take_over()
        except Exception as err:  # noqa: BLE001 - whatever it was, we must not lead half way
            ctl.logger.error("could not take over: %s: %s", type(err).__name__, err)
            ctl.roles.term = None
            ctl.heavy_hitters.stand_by()  # what adopt() took in is the next leader's again
            ctl.lock.release()
            self._hold_until = time.monotonic() + STALE_RETRY_S
            return False
        return True

    def _take_over(self) -> None:
        """Lead. Everything a switch's reconcile needs (the term, the newest policy, the
        steerings of our predecessor) is read before we call ourselves leader: from then on a
        switch that connects is asked for MASTER and reconciled at once, and its reconcile must
        find nothing to change, or it would send again what the switch holds. Nothing between
        leading and asking yields. OVSDB's slow configuration runs apart (the election loop
        watches the lock)."""
        ctl = self.ctl
        term = ctl.store.begin_term(ctl.identity, int(time.time() * 1000))
        policy, version = ctl.store.load()  # the newest, whoever stored it
        steered = ctl.store.steered()
        ctl.in_force.replace(policy, version)
        ctl.trees.replan()
        # detection as the policy says from the start (its collector listening), not only once a
        # bottleneck port's switch connects: GET /heavy-hitters says what it waits for
        ctl.heavy_hitters.configure(policy.heavy_hitters, policy.ports)
        ctl.collectors = self._live_collectors()
        ctl.roles.term = term
        ctl.logger.info("leading: term %d, generation id %d (%s)", term.epoch, term.generation_id, ctl.identity)
        ctl.heavy_hitters.adopt(steered)
        for dp in list(ctl.datapaths.values()):
            ctl.sync.forget(dp.id)
            self.ask_role(dp)
        hub.spawn(self._configure_switch_hosts, term)

    def _configure_switch_hosts(self, term) -> None:
        """What our detectors found standing by, acted on (its steerings stored: that may wait
        for the store, so not before the role requests went out); then the bridges' sFlow agents
        and the bottleneck ports' queues and disciplines, through OVSDB; all as the leader of
        `term` (not if we stopped leading meanwhile)."""
        ctl = self.ctl
        if ctl.roles.term is term:
            ctl.heavy_hitters.lead()
        self.configure_sampling(term)
        if ctl.roles.term is term and ctl.datapaths:  # ports of switches already connected
            ctl.switch_hosts.configure_ports(ctl.policy)

    def step_down(self, why: str, hold: bool = True) -> None:
        """Stand by at once. With hold, do not try to lead again for STEP_DOWN_HOLD_S (another
        instance leads); without, try at the next round (the lock was lost with the cluster
        leader it was held on, and goes to whoever asks the new one first)."""
        ctl = self.ctl
        if not ctl.roles.leading:
            return
        ctl.logger.warning("stepping down: %s", why)
        ctl.roles.term = None  # first: nothing below writes to a switch or the store's steering
        ctl.lock.release()
        if hold:
            self._hold_until = time.monotonic() + STEP_DOWN_HOLD_S
        ctl.heavy_hitters.stand_by()
        for dp in list(ctl.datapaths.values()):
            ctl.sync.forget(dp.id)
            self.ask_role(dp)

    def ask_role(self, dp) -> None:
        term = self.ctl.store.term()
        self.ctl.roles.ask(dp, term.generation_id if term else 0)

    def on_role_refused(self, dp, asked: str | None, code: int) -> None:
        """A switch refused our role request (`asked`, None if it was none of ours)."""
        if asked == MASTER and code == dp.ofproto.OFPRRFC_STALE:
            self.step_down(f"switch {dp.id:016x} holds a newer generation id than our term's")
        elif asked == SLAVE:  # a newer term began while we asked: ask again with its id
            hub.spawn(self._ask_again, dp)

    def _ask_again(self, dp) -> None:
        hub.sleep(STALE_RETRY_S)
        if self.ctl.datapaths.get(dp.id) is dp and not self.ctl.roles.leading:
            self.ask_role(dp)

    def run_forever(self) -> None:
        hub.spawn(self._announce_forever)  # apart: a store that does not answer must not hold up the lock's watch
        last_follow = 0.0
        while True:
            hub.sleep(ELECTION_INTERVAL_S)
            try:
                self.ctl.store.run()
                if self.ctl.roles.leading and not self.ctl.lock.held:
                    self.step_down("the leader's lock is lost (its cluster server went away?)", hold=False)
                self.try_to_lead()
                if time.monotonic() - last_follow >= FOLLOW_INTERVAL_S:
                    last_follow = time.monotonic()
                    self.follow_store()
            except StoreError as err:  # the state cluster without a leader: the next round asks again
                self.ctl.logger.warning("policy store: %s", err)
            except Exception:  # noqa: BLE001 - this loop must outlive anything: it alone watches the lock
                self.ctl.logger.exception("election round failed")

    def _announce_forever(self) -> None:
        while True:
            try:
                self.announce()
            except StoreError as err:
                self.ctl.logger.warning("policy store: our sFlow collector not announced: %s", err)
            except Exception:  # noqa: BLE001 - the next round tries again
                self.ctl.logger.exception("announcing our sFlow collector failed")
            hub.sleep(ANNOUNCE_INTERVAL_S)

    def announce(self) -> None:
        """Say where our sFlow collector listens; leading, point the bridges' agents at every
        live instance's collector when that set changed, or the last try failed somewhere."""
        ctl = self.ctl
        ctl.store.announce(ctl.identity, ctl.heavy_hitters.collector_address(), time.time())
        if not ctl.roles.leading:
            return
        collectors = self._live_collectors()
        if collectors != ctl.collectors or self._sampling_stale:
            if collectors != ctl.collectors:
                ctl.logger.info("sFlow collectors of the live instances: %s", ", ".join(collectors) or "none")
            ctl.collectors = collectors
            hub.spawn(self.configure_sampling, ctl.roles.term)

    def _live_collectors(self) -> list[str]:
        """The live instances' collectors as the store has them, and ours (whatever the store
        said: the agents must send to the leader; unless ours is not an address they can)."""
        own = self.ctl.heavy_hitters.collector_address()
        mine = {own} if own and not collector_problem(own) else set()
        return sorted(set(self.ctl.store.collectors(time.time())) | mine)

    def configure_sampling(self, term) -> None:
        """The bridges' sFlow agents, to the policy's settings and the live collectors, as the
        leader of `term`: one configuration at a time, each with the newest collectors, none
        going on past a step-down."""
        ctl = self.ctl
        with self._sampling:
            if ctl.roles.term is not term or term is None:
                return
            ok = ctl.switch_hosts.configure_sampling(ctl.policy, ctl.collectors,
                                                     still=lambda: ctl.roles.term is term)
            self._sampling_stale = not ok

    def follow_store(self) -> None:
        """A policy another instance stored becomes ours; leading, we enforce it (apart: it
        waits for the switches, and this loop watches the lock)."""
        ctl = self.ctl
        if ctl.saving or ctl.store.version() == ctl.in_force.version:  # our own save is still on its way
            return
        policy, version = ctl.store.load()
        ctl.in_force.replace(policy, version)
        ctl.logger.info("policy version %d, stored by another instance, is in force", version)
        if ctl.roles.leading:
            hub.spawn(self._enforce, version)
        else:  # a standby detects as the policy says, too
            ctl.configure_heavy_hitters()

    def _enforce(self, version: int) -> None:
        try:
            self.ctl.enforce_policy()
        except rest.ApiError as err:  # nobody waits for this answer: the log and /metrics say it
            self.ctl.logger.error("policy version %d: %s", version, err)
