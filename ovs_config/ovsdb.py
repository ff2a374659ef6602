"""One switch host's OVSDB: where it is, and ovs-vsctl against it.

A switch host's Open vSwitch database is reached at an OVSDB remote, as ovs-vsctl's
--db names it: `unix:/path/db.sock` (this machine), `tcp:HOST:PORT` or `ssl:HOST:PORT`
(a switch host over the network; OVS's convention is port 6640). None means ovs-vsctl's
own default, the local socket (or the private OVS's, through OVS_RUNDIR) - what every
part of ovs_config did before switch hosts had addresses.

Why ovs-vsctl and not the Python IDL (python3-openvswitch's ovs.db.idl): every call here
is a short transaction or one read, which ovs-vsctl does against a remote exactly as
against the local socket (--db), with its own --timeout; the IDL keeps a replica of the
whole database per switch host and needs its own run loop beside Ryu's green threads,
which buys nothing for a handful of writes per policy change.

An unreachable or wrong remote must never hang the controller: every call is bounded
by --timeout (ovs-vsctl gives up connecting and waiting) and by the subprocess timeout
behind it, and fails as OvsdbError with one sentence naming the remote.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess


DEFAULT_TIMEOUT_S = 5
# ssl: remotes need the controller's key, certificate and the switch hosts' CA (ovs-vsctl's
# --private-key, --certificate, --ca-cert); ryu_app/config.py's table names the variables.
SSL_ENV = {"--private-key": "CKCD_COEX_OVSDB_SSL_KEY", "--certificate": "CKCD_COEX_OVSDB_SSL_CERT",
           "--ca-cert": "CKCD_COEX_OVSDB_SSL_CA"}


class OvsdbError(RuntimeError):
    """An OVSDB call failed; the message names the remote and what went wrong."""


@dataclasses.dataclass(frozen=True)
class Ovsdb:
    remote: str | None = None   # None: the local default socket
    timeout_s: int = DEFAULT_TIMEOUT_S

    @property
    def where(self) -> str:
        return self.remote or "the local OVSDB"

    @property
    def is_local(self) -> bool:
        """Does this database describe this machine (so its interfaces are ours for tc)?"""
        return self.remote is None or self.remote.startswith("unix:")

    def _base(self) -> list[str]:
        args = ["ovs-vsctl", f"--timeout={self.timeout_s}"]
        if self.remote is not None:
            args.append(f"--db={self.remote}")
            if self.remote.startswith("ssl:"):
                args += [f"{opt}={os.environ[env]}" for opt, env in SSL_ENV.items() if os.environ.get(env)]
        return args

    def vsctl(self, *args: str) -> str:
        """Run ovs-vsctl with these arguments against this database; its stdout."""
        try:
            out = subprocess.run([*self._base(), *args], capture_output=True, text=True,
                                 timeout=self.timeout_s + 5)
        except FileNotFoundError:
            raise OvsdbError("ovs-vsctl not found: install openvswitch-switch (make setup does)") from None
        except subprocess.TimeoutExpired:
            raise OvsdbError(f"OVSDB {self.where} did not answer within {self.timeout_s + 5} s") from None
        if out.returncode != 0:
            err = out.stderr.strip().splitlines()[-1:] or [out.stdout.strip()]
            text = err[0].removeprefix("ovs-vsctl: ").removeprefix(f"{self.remote}: ")
            if out.returncode in (-14, 142) or "alarm clock" in text.lower():  # its --timeout (SIGALRM)
                text = f"no answer within {self.timeout_s} s (is ovsdb-server listening there?)"
            raise OvsdbError(f"OVSDB {self.where}: {text}")
        return out.stdout

    def get(self, table: str, record: str, column: str) -> str | None:
        """One column (or map key, `external_ids:k`) as text, unquoted; None when the record
        or key does not exist."""
        try:
            value = self.vsctl("--if-exists", "get", table, record, column).strip()
        except OvsdbError as err:
            if "no key" in str(err):
                return None
            raise
        if not value:
            return None
        if value.startswith('"'):
            value = json.loads(value)  # ovs-vsctl quotes strings the JSON way
        return value

    def rows(self, table: str, columns: tuple[str, ...], *conditions: str) -> list[dict]:
        """The rows of `table` (those matching ovs-vsctl find's `conditions`, if any) with these
        columns, maps as dicts and sets as lists."""
        verb = ["find", table, *conditions] if conditions else ["list", table]
        out = json.loads(self.vsctl("--format=json", f"--columns={','.join(columns)}", *verb))
        return [{name: _datum(cell) for name, cell in zip(out["headings"], row)} for row in out["data"]]

    def find_one(self, table: str, name: str, columns: tuple[str, ...]) -> dict | None:
        """The row of `table` named `name` with these columns (maps as dicts), or None."""
        rows = self.rows(table, columns, f"name={json.dumps(name)}")
        return rows[0] if rows else None

    def our_qos(self, port_name: str, qos_type: str) -> str | None:
        """The UUID of the Port's QoS row if it is one ckcd-coex made (external_ids:ckcd-coex=true)
        of this type, else None: rows someone else made are never ours to change or destroy."""
        qos = self.get("Port", port_name, "qos")
        if qos in (None, "[]") or self.get("QoS", qos, "type") != qos_type \
                or self.get("QoS", qos, "external_ids:ckcd-coex") != "true":
            return None
        return qos


def _datum(cell):
    """ovs-vsctl's JSON cells: ["map", [[k, v], ...]], ["set", [...]], ["uuid", u] or atoms."""
    if isinstance(cell, list) and len(cell) == 2:
        kind, value = cell
        if kind == "map":
            return {k: _datum(v) for k, v in value}
        if kind == "set":
            return [_datum(v) for v in value]
        if kind in ("uuid", "named-uuid"):
            return value
    return cell


LOCAL = Ovsdb()
