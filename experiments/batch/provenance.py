"""Where a run came from: the project's version, the kernel, the sysctls that change TCP or
queueing, and the versions of the tools in the lab.

A batch records this once (batch.json) and every run carries it (run.json `provenance`), so
a result found on disk months later, or merged from another machine, says what made it; and
`ckcd-coex merge` can refuse shards made by different versions of the project.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess

from ryu_app.framework_choice import chosen_version

REPO_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Host-wide settings that change what TCP or a queue does. The lab's hosts are network
# namespaces: the net.ipv4.tcp_* keys below are the root namespace's, which a new namespace
# starts from (per-host settings the runner makes are in run.json's `host_setup`).
SYSCTLS = (
    "net.core.default_qdisc",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_available_congestion_control",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_ecn",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_pacing_ss_ratio",
    "net.ipv4.tcp_pacing_ca_ratio",
)

# An untracked file with one of these endings can change what a run does (a module, a C file,
# a scenario or config file, a script); any other (a log, a job's output) cannot.
SOURCE_SUFFIXES = (".py", ".c", ".h", ".toml", ".sh", ".sbatch", ".in", ".cfg", ".ini", ".txt", "Makefile")

# name -> the command that prints its version (first line kept)
TOOLS = {
    "ovs-vswitchd": ["ovs-vswitchd", "--version"],
    "iperf3": ["iperf3", "--version"],
    "mininet": ["mn", "--version"],
    "ping": ["ping", "-V"],
}


def project_version() -> dict:
    """The checkout's commit, whether its tree differs from it, and a hash of that difference
    (two dirty trees on one commit are the same version only if they differ alike): tracked
    changes, and untracked files that are code or configuration (SOURCE_SUFFIXES), whoever
    reads them on whichever node. Other untracked files are not the project's version: a
    Slurm job's output file lands in the checkout it was submitted from and grows while the
    shards run, and would make every shard a version of its own. commit is None when git
    cannot read the checkout; `ckcd-coex merge` then refuses the shards."""
    commit = _git("rev-parse", "--verify", "HEAD")
    if not commit:
        return {"commit": None, "dirty": None, "diff_sha256": None, "package": _package_version("ckcd-coex")}
    diff = _git("diff", "HEAD", "--no-ext-diff", "--no-textconv", "--no-color", "--no-renames", "--binary",
                "--src-prefix=a/", "--dst-prefix=b/") or ""
    untracked = [n for n in (_git("ls-files", "-z", "--others", "--exclude-standard") or "").split("\0")
                 if n.endswith(SOURCE_SUFFIXES)]
    digest = hashlib.sha256(diff.encode())
    for name in sorted(untracked):
        digest.update(b"\0untracked\0" + name.encode())
        try:
            with open(os.path.join(REPO_DIR, name), "rb") as f:
                digest.update(hashlib.sha256(f.read()).digest())
        except OSError:  # gone meanwhile, or a directory: its name is what counts
            pass
    dirty = bool(diff or untracked)
    return {"commit": commit, "dirty": dirty, "diff_sha256": digest.hexdigest()[:16] if dirty else None,
            "package": _package_version("ckcd-coex")}


def version_label(project: dict | None) -> str:
    """A project version as people read it: the commit's first 12 digits, and the hash of
    the uncommitted changes when there were some."""
    project = project or {}
    return (project.get("commit") or "unknown")[:12] + (f"+dirty:{project.get('diff_sha256')}"
                                                        if project.get("dirty") else "")


def collect() -> dict:
    """The whole provenance of this machine now (a few ms of subprocesses)."""
    return {"project": project_version(), "host": platform.node(), "kernel": os.uname().release, "machine": platform.machine(),
            "python": platform.python_version(), "sysctls": {k: read_sysctl(k) for k in SYSCTLS},
            "tools": {name: _first_line(cmd) for name, cmd in TOOLS.items()},
            # the controller's framework as the lab's ryu-manager / ckcd-coex-controller will choose it
            "framework": chosen_version()}


def read_sysctl(key: str) -> str | None:
    try:
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return " ".join(f.read().split())
    except OSError:  # not in this kernel (tcp_pacing_*_ratio came in 4.20)
        return None


# git as the same program on every node and for every user: no system or user config (diff
# prefixes, colour, textconv change a diff's text), no lock taken (N shards on one shared
# checkout would race on .git/index), and the checkout trusted whoever owns it (a root job
# on a user's clone is refused by safe.directory otherwise).
_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_OPTIONAL_LOCKS": "0",
            "LC_ALL": "C"}


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-c", f"safe.directory={REPO_DIR}", "-C", REPO_DIR, *args],
                             capture_output=True, text=True, timeout=20, env={**os.environ, **_GIT_ENV})
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
