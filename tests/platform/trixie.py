"""A Debian 13 (trixie) root, built with debootstrap and cached, for what our Debian 12 machines
cannot show directly: the controller under os-ken on trixie's Python 3.13, and sch_ckcd built
against kernels whose headers need trixie's compiler.

    python -m tests.platform.trixie ensure            build (or check) the root and its venv
    python -m tests.platform.trixie run -- CMD...     run CMD in it (as the controller leg does)

The root lives outside the checkout (CKCD_TRIXIE_ROOT, default
/var/cache/ckcd-coex/trixie) and is built once: a minbase debootstrap with a compiler, Python
3.13, trixie's Open vSwitch tools (the controller runs ovs-vsctl) and iproute2; then a venv at
/opt/os-ken holding os-ken and our controller's dependencies at the pins of
requirements/os-ken.txt. A stamp records what it was built from, so changing the package list
or the pins rebuilds only what changed. Nothing is installed on the machine itself.

`run` enters the root in a private mount namespace (`unshare --mount`), binds /proc, /sys,
/dev, /run, /tmp and the checkout at their own paths, and chroots: a path is the same inside
and out (the controller's log, database and the lab's OVS sockets), and every mount ends with
the process, so a crashed test leaves none behind. The process keeps its PID through unshare,
sh and chroot (each execs the next), so a caller that kills it by PID or process group kills
the controller itself.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT = os.path.abspath(os.environ.get("CKCD_TRIXIE_ROOT") or "/var/cache/ckcd-coex/trixie")
# Written into ROOT before debootstrap: ensure_base deletes a ROOT only if it carries this (or
# a stamp of ours), so a CKCD_TRIXIE_ROOT naming a directory of the machine is never removed.
MARKER = ".ckcd-root"
MIRROR = "http://deb.debian.org/debian"
SUITE = "trixie"
# What the root holds beyond minbase: a compiler (os-ken's `ovs` dependency builds a C
# extension; sch_ckcd builds against trixie's kernel headers), Python with venv and headers,
# CA certificates for pip, ovs-vsctl (openvswitch-switch ships it) and ip/tc.
PACKAGES = ("build-essential", "python3", "python3-venv", "python3-dev", "ca-certificates",
            "openvswitch-switch", "iproute2")
VENV = "/opt/os-ken"
PINS = os.path.join(REPO, "requirements", "os-ken.txt")
# Bound at their own paths by `run`: the kernel's views, the lab's sockets and state under
# /run, temporary files (logs, databases) and the checkout.
BINDS = ("/proc", "/sys", "/dev", "/run", "/tmp")


class ChrootUnavailable(RuntimeError):
    """The root cannot be built; the message says what is missing."""


def say(msg: str) -> None:
    print(f"trixie: {msg}", file=sys.stderr, flush=True)


def _stamp_text(part: str) -> str:
    if part == "base":
        return " ".join((SUITE, MIRROR, *PACKAGES))
    with open(PINS, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stamp_path(part: str) -> str:
    return os.path.join(ROOT, f".ckcd-{part}-stamp")


def _fresh(part: str) -> bool:
    try:
        with open(_stamp_path(part)) as f:
            return f.read() == _stamp_text(part)
    except FileNotFoundError:
        return False


def _stamp(part: str) -> None:
    with open(_stamp_path(part), "w") as f:
        f.write(_stamp_text(part))


def _open_log(log: str):
    """The log, opened for writing as root without following a link planted at its fixed name
    in /tmp (the check comes before truncating, so a planted hard link is refused whole)."""
    try:
        fd = os.open(log, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        raise ChrootUnavailable(f"{log}: {e.strerror} (a link at the log's name is refused): remove it") from e
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise ChrootUnavailable(f"{log} is not a log file of ours (owner {st.st_uid}, {st.st_nlink} links): "
                                f"remove it")
    os.ftruncate(fd, 0)
    return os.fdopen(fd, "w+")


def _check(cmd: list[str], what: str, log: str) -> None:
    with _open_log(log) as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            out.seek(0)
            tail = out.read()[-1500:]
            raise ChrootUnavailable(f"{what} failed (exit {rc}); the end of {log}:\n{tail}")


def _mounts_under(path: str) -> list[str]:
    """Mount points at or below `path` in this mount namespace."""
    with open("/proc/self/mountinfo") as f:
        points = [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4]) for line in f]
    return [p for p in points if p == path or p.startswith(path.rstrip("/") + "/")]


def _remove_root() -> None:
    """ROOT deleted for a rebuild, but only a root of ours (MARKER or a stamp, or nothing in it)
    with nothing mounted inside: rmtree crosses mount points, so a /proc or /dev a killed
    debootstrap left there would be emptied on the machine itself."""
    if not os.path.lexists(ROOT):
        return
    if os.path.islink(ROOT) or not os.path.isdir(ROOT):
        raise ChrootUnavailable(f"{ROOT} is not a directory: set CKCD_TRIXIE_ROOT to a directory of its own")
    names = os.listdir(ROOT)
    if names and not any(n == MARKER or (n.startswith(".ckcd-") and n.endswith("-stamp")) for n in names):
        raise ChrootUnavailable(f"{ROOT} holds files but is no trixie root of ours (no {MARKER}): not removing it; "
                                f"set CKCD_TRIXIE_ROOT to a directory of its own")
    mounted = _mounts_under(os.path.realpath(ROOT))
    if mounted:
        raise ChrootUnavailable(f"mounted inside {ROOT}, which a rebuild would delete through: {', '.join(mounted)}; "
                                f"unmount them first")
    shutil.rmtree(ROOT, ignore_errors=True)


def ensure_base() -> None:
    """The debootstrapped root with PACKAGES, rebuilt when the list changes."""
    if _fresh("base"):
        return
    if os.geteuid() != 0:
        raise ChrootUnavailable("building the trixie root needs root (debootstrap, chroot)")
    if not shutil.which("debootstrap"):
        raise ChrootUnavailable("debootstrap not found: make setup-tests installs it")
    scripts = "/usr/share/debootstrap/scripts"
    if not os.path.exists(os.path.join(scripts, SUITE)):
        raise ChrootUnavailable(f"this debootstrap does not know {SUITE} (no {scripts}/{SUITE})")
    say(f"building the {SUITE} root at {ROOT} (debootstrap --variant=minbase; about a minute, once)")
    _remove_root()
    os.makedirs(ROOT, exist_ok=True)
    open(os.path.join(ROOT, MARKER), "w").close()
    _check(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, ROOT, MIRROR],
           "debootstrap", "/tmp/ckcd-coex-trixie-debootstrap.log")
    _stamp("base")


LOCAL_CAS = "/usr/local/share/ca-certificates"


def _trust_local_cas() -> None:
    """The machine's own local CAs (a proxy's, say) trusted inside too, as Debian adds them:
    copied into the root's LOCAL_CAS, then update-ca-certificates there."""
    if not os.path.isdir(LOCAL_CAS):
        return
    names = [n for n in os.listdir(LOCAL_CAS)
             if n.endswith(".crt") and os.path.isfile(os.path.join(LOCAL_CAS, n))]
    if not names:
        return
    os.makedirs(ROOT + LOCAL_CAS, exist_ok=True)
    for name in names:
        shutil.copyfile(os.path.join(LOCAL_CAS, name), os.path.join(ROOT + LOCAL_CAS, name))
    _check(["chroot", ROOT, "update-ca-certificates"], "update-ca-certificates in the root",
           "/tmp/ckcd-coex-trixie-ca.log")


def ensure_venv() -> None:
    """The os-ken venv inside the root, rebuilt when the pins change."""
    ensure_base()
    if _fresh("venv"):
        return
    say(f"installing os-ken and the controller's dependencies into {VENV} (pins: requirements/os-ken.txt)")
    shutil.rmtree(ROOT + VENV, ignore_errors=True)
    shutil.copyfile("/etc/resolv.conf", os.path.join(ROOT, "etc", "resolv.conf"))  # pip reaches PyPI
    _trust_local_cas()
    _check(command(["python3", "-m", "venv", VENV]), "python3 -m venv in the root",
           "/tmp/ckcd-coex-trixie-venv.log")
    # The host's PIP_FIND_LINKS names a directory the root does not have. One retry: a resolver
    # that met an index hiccup says ResolutionImpossible for a pin that installs a minute later.
    pip = command(["env", "-u", "PIP_FIND_LINKS", "PIP_DISABLE_PIP_VERSION_CHECK=1", f"{VENV}/bin/pip",
                   "install", "-q", "--no-cache-dir", "-r", PINS])
    if subprocess.run(pip, capture_output=True).returncode != 0:
        say("pip install of the os-ken pins failed once; trying again")
        _check(pip, "pip install of the os-ken pins in the root", "/tmp/ckcd-coex-trixie-pip.log")
    _stamp("venv")


def ensure() -> str:
    ensure_venv()
    return ROOT


def ensure_packages(name: str, packages: tuple[str, ...], suites: tuple[str, ...] = ()) -> None:
    """Debian packages installed into the root beyond PACKAGES (a kernel's headers, say), under a
    stamp of their own called `name`: installed once, again only when the list changes. `suites`
    adds apt sources first (e.g. "trixie-backports"), kept in a file of their own."""
    ensure_base()
    text = " ".join((*suites, "|", *packages))
    stamp = os.path.join(ROOT, f".ckcd-pkgs-{name}-stamp")
    try:
        with open(stamp) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    say(f"installing {' '.join(packages)} into the root ({name})")
    if suites:
        with open(os.path.join(ROOT, "etc", "apt", "sources.list.d", f"ckcd-{name}.list"), "w") as f:
            f.writelines(f"deb {MIRROR} {suite} main\n" for suite in suites)
    shutil.copyfile("/etc/resolv.conf", os.path.join(ROOT, "etc", "resolv.conf"))
    log = f"/tmp/ckcd-coex-trixie-{name}.log"
    _check(command(["apt-get", "update", "-qq"]), "apt-get update in the root", log)
    _check(command(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
                    "--no-install-recommends", *packages]), f"apt-get install {' '.join(packages)} in the root", log)
    with open(stamp, "w") as f:
        f.write(text)


@contextlib.contextmanager
def scratch_root(work: str):
    """A throwaway copy of the root for one test: an overlay whose lower layer is the cached root
    and whose upper layer lives in `work`, so a test may install, upgrade and purge packages
    without changing the cache. Yields the merged root's path; unmounted on exit."""
    ensure_base()
    upper, scratch, merged = (os.path.join(work, d) for d in ("upper", "overlay-work", "root"))
    for d in (upper, scratch, merged):
        os.makedirs(d, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={ROOT},upperdir={upper},workdir={scratch}", merged], check=True)
    try:
        yield merged
    finally:
        subprocess.run(["umount", "--lazy", merged], check=False)


def command(argv: list[str], cwd: str = REPO, root: str | None = None) -> list[str]:
    """argv run inside the root, or another root such as scratch_root's (mounts private to it,
    PID kept; the module docstring)."""
    root = root or ROOT
    cwd = os.path.realpath(cwd)
    if not any(cwd == top or cwd.startswith(top + "/") for top in (REPO, *BINDS)):
        # Bound over the root, "/" or /usr would hide the root's own system behind the host's.
        raise ChrootUnavailable(f"run from the checkout or below {', '.join(BINDS)}, not {cwd}")
    binds = [*BINDS]
    if not any(cwd == top or cwd.startswith(top + "/") for top in binds):
        binds.append(cwd)
    if REPO not in binds:
        binds.append(REPO)
    steps = []
    for path in binds:
        target = shlex.quote(root + path)
        steps.append(f"mkdir -p {target} && mount --rbind {shlex.quote(path)} {target}")
    script = " && ".join(steps) + f' && exec chroot {shlex.quote(root)} sh -c \'cd "$0" && exec "$@"\' ' \
        + shlex.quote(cwd) + ' "$@"'
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("ensure", help="build or check the root and its venv")
    run = sub.add_parser("run", help="run a command inside the root")
    run.add_argument("argv", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    try:
        ensure()
    except ChrootUnavailable as e:
        print(f"trixie: {e}", file=sys.stderr)
        return 2
    if args.what == "ensure":
        print(ROOT)
        return 0
    cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not cmd:
        ap.error("run: no command given")
    os.execvp("unshare", command(cmd, os.getcwd()))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
