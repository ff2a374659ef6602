"""Linux's own sch_dualpi2.ko for a kernel the lab boots, built out of tree, for the DualPI2
cross-check (test_kernel_lines.py; docs/kernel.md, "Cross-check: DualPI2 against Linux's").

Debian's 7.3 kernel leaves CONFIG_NET_SCH_DUALPI2 unset, but the qdisc's source is the
kernel's own net/sched/sch_dualpi2.c (in Linux from 6.17 on). It comes from that exact
kernel's Debian source package, linux-source-M.N at the version of linux-image-V, fetched with
`apt-get download` through the lab's own apt files for the line's suite (never installed). The
one file is streamed out of the .deb's inner tarball by its member name (no glob, no temporary
tree), kept in the cache, and built unmodified against linux-headers-V in the trixie root as
kbuild.py builds sch_ckcd (`make -C /usr/src/linux-headers-V M=DIR modules`, with an
`obj-m := sch_dualpi2.o` Kbuild of ours). The .deb (about 167 MB) is removed once the file is out.

    CACHE_DIR/sch_dualpi2/V/sch_dualpi2.c   the kernel's file, as extracted
    CACHE_DIR/sch_dualpi2/V/SOURCE          package, Debian version, suite, member, and the sha256
                                            of the .c and of the .ko
    CACHE_DIR/sch_dualpi2/V/sch_dualpi2.ko  the module (vermagic V)
    CACHE_DIR/sch_dualpi2/V/make.log        kbuild's output (a test holds it to no warning)

This runs as root and CACHE_DIR comes from the environment: the cache and its directories are
used only if they are the effective uid's and no one else's to write (kernels.owned_dir), and
every file is opened without following a symlink. A build is reused only while SOURCE names
the Debian version linux-image-V has now (a new revision keeps V, so V alone cannot tell) and
both hashes still match; anything else fetches or builds again. One directory per kernel
version: a version of the line other than the one built is removed, so a line that moves to a
new kernel fetches and builds again. Any failure raises kernels.LabUnavailable saying what failed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time

from tests.kernel import kbuild, kernels
from tests.kernel.kernels import LabUnavailable, say

# The kernel's qdisc appeared in 6.17.
FIRST = (6, 17)
MODULE = "sch_dualpi2"
MEMBER = "net/sched/sch_dualpi2.c"
# The Debian version of a package, as apt-cache reports it (no epoch: apt-get download would
# write one as %3a into the file name, and no kernel package of ours has one).
DEB_VERSION_RE = re.compile(r"[0-9][0-9A-Za-z.+~-]*")
# A sane size for the one source file; a bigger stream is not the file we asked for.
MAX_SOURCE = 1 << 20
# The whole dpkg-deb | tar | tar pipeline (xz over the kernel's source tree: a minute or two).
EXTRACT_TIMEOUT_S = 900
# What a stage may write to stderr: tar's listing of one member and a few warnings.
MAX_STDERR = 1 << 20
# SOURCE's fields that must match what is fetched now for the cached file to be reused.
ORIGIN_KEYS = ("package", "version", "suite", "member")


def cache_root() -> str:
    return os.path.join(kernels.CACHE_DIR, MODULE)


def _line_of(version: str) -> tuple[kernels.Line, str]:
    """version's newer line, and its M.N, for a kernel that has sch_dualpi2."""
    line = kernels.line_of(kernels.checked(version))
    major, minor = (int(x) for x in version.split(".")[:2])
    if line is None or (major, minor) < FIRST:
        raise LabUnavailable(f"Linux's sch_dualpi2 exists from {FIRST[0]}.{FIRST[1]} on, in the lab's 7.3 line; "
                             f"not for {version}")
    return line, f"{major}.{minor}"


def _package_version(apt: list[str], package: str) -> str:
    """The candidate version of package in the line's suite."""
    res = subprocess.run(["apt-cache", *apt, "show", "--no-all-versions", package], text=True,
                         capture_output=True)
    m = re.search(r"^Version: (\S+)$", res.stdout, re.M)
    if res.returncode or not m or not DEB_VERSION_RE.fullmatch(m.group(1)):
        raise LabUnavailable(f"apt-cache show {package} gave no Debian version: "
                             f"{(res.stderr or res.stdout).strip()[-300:]}")
    return m.group(1)


# ---- files: none opened through a symlink, none half-written under its final name ----------------

def _create(path: str) -> int:
    """A descriptor of a new file at path: a stale one (a crashed run's) is removed first, and
    O_EXCL|O_NOFOLLOW refuse a name that is a symlink again by the time it is created."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise LabUnavailable(f"cannot create {path}: {e}") from None


def _write(path: str, data: bytes) -> None:
    """data into path, whole or not at all (a new file renamed over it)."""
    with os.fdopen(_create(path + ".tmp"), "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def _open_regular(path: str):
    """path opened for reading if it is a regular file, never through a symlink (nor blocking on
    a FIFO); None otherwise, or when it is missing."""
    try:
        f = os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), "rb")
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(f.fileno()).st_mode):
        return f
    f.close()
    return None


def _read(path: str, limit: int) -> bytes | None:
    """At most limit bytes of the regular file path (None: see _open_regular)."""
    f = _open_regular(path)
    if f is None:
        return None
    with f:
        return f.read(limit)


def _sha256(path: str) -> str | None:
    """The regular file path's sha256 (None: see _open_regular)."""
    f = _open_regular(path)
    if f is None:
        return None
    with f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _read_record(vdir: str) -> dict[str, str]:
    """SOURCE's fields ("key: value" lines); empty when it is missing or of another form."""
    data = _read(os.path.join(vdir, "SOURCE"), 4096) or b""
    lines = data.decode(errors="replace").splitlines()
    return dict(line.split(": ", 1) for line in lines if ": " in line)


def _write_record(vdir: str, record: dict[str, str]) -> None:
    _write(os.path.join(vdir, "SOURCE"), "".join(f"{k}: {v}\n" for k, v in record.items()).encode())


# ---- the kernel's file, out of linux-source-M.N -------------------------------------------------

def _fetch_source(apt: list[str], origin: dict[str, str], dest: str) -> None:
    """origin's member (the kernel's sch_dualpi2.c) out of its package into dest."""
    package, deb_version = origin["package"], origin["version"]
    with tempfile.TemporaryDirectory(prefix="download-", dir=cache_root()) as work:
        say(f"downloading {package}={deb_version} for Linux's {MEMBER} (apt-get download, about 167 MB; "
            "not installed)")
        res = subprocess.run(["apt-get", *apt, "download", f"{package}={deb_version}"], cwd=work, text=True,
                             capture_output=True, timeout=1800)
        deb = os.path.join(work, f"{package}_{deb_version}_all.deb")
        if res.returncode or not os.path.isfile(deb) or os.path.islink(deb):
            raise LabUnavailable(f"apt-get download {package}={deb_version} from {origin['suite']} failed "
                                 f"(exit {res.returncode}): {res.stderr.strip()[-300:]}")
        say(f"extracting {MEMBER} from {os.path.basename(deb)}")
        _extract(deb, f"./usr/src/{package}.tar.xz", origin["member"], dest)


def _extract(deb: str, tarball: str, member: str, dest: str) -> None:
    """member of the tarball inside deb, streamed into dest: dpkg-deb | tar -xO | tar -xJO, each
    tar given one exact member name (--no-wildcards), nothing unpacked on disk but dest. Each
    name must occur once: tar -xO would write every occurrence, one after the other."""
    tmp = dest + ".part"
    fd = _create(tmp)
    try:
        with os.fdopen(fd, "wb") as out:
            failed = _stream([("dpkg-deb", ["dpkg-deb", "--fsys-tarfile", deb], None),
                              ("tar (.deb)", ["tar", "-x", "-O", "-v", "--no-wildcards", "-f", "-", tarball],
                               tarball),
                              ("tar (source tree)", ["tar", "-x", "-J", "-O", "-v", "--no-wildcards", "-f", "-",
                                                     member], member)], out)
        size = os.path.getsize(tmp)
        head = _read(tmp, 64) or b""
        if failed or not 0 < size <= MAX_SOURCE or not head.startswith(b"// SPDX-License-Identifier:"):
            raise LabUnavailable(f"{member} did not come out of {os.path.basename(deb)} "
                                 f"({size} bytes; {'; '.join(failed) or 'not the kernel source file'})")
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _stream(stages: list[tuple[str, list[str], str | None]], out) -> list[str]:
    """The stages (name, command, the one member its tar -v must list) as a pipeline into out;
    what went wrong, stage by stage (empty: nothing). Their stderr goes to files, so no stage
    blocks on a full pipe; every stage still running on the way out is killed."""
    procs: list[subprocess.Popen] = []
    with contextlib.ExitStack() as files:
        errs = [files.enter_context(tempfile.TemporaryFile()) for _ in stages]
        try:
            for (_, cmd, _), err in zip(stages, errs):
                last = len(procs) == len(stages) - 1
                procs.append(subprocess.Popen(cmd, stdin=procs[-1].stdout if procs else subprocess.DEVNULL,
                                              stdout=out if last else subprocess.PIPE, stderr=err))
                if len(procs) > 1:
                    procs[-2].stdout.close()  # the next stage alone reads it: SIGPIPE reaches the writer
            deadline = time.monotonic() + EXTRACT_TIMEOUT_S
            for p in procs:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except OSError as e:
            raise LabUnavailable(f"extracting {stages[-1][2]}: cannot run {cmd[0]}: {e}") from None
        except subprocess.TimeoutExpired:
            raise LabUnavailable(f"extracting {stages[-1][2]} took over {EXTRACT_TIMEOUT_S} s") from None
        finally:
            _kill(procs)
        return [problem for (name, _, listed), p, err in zip(stages, procs, errs)
                if (problem := _problem(name, p.returncode, err, listed))]


def _kill(procs: list[subprocess.Popen]) -> None:
    """Every stage still running killed, and all reaped: none outlives a failed extraction."""
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout:
            p.stdout.close()


def _problem(name: str, rc: int, err, listed: str | None) -> str | None:
    """What stage name's exit code and stderr say went wrong; for a tar -v, that it listed
    anything but the one member, once."""
    err.seek(0)
    data = err.read(MAX_STDERR + 1)
    text = data.decode(errors="replace")
    if rc:
        return f"{name} exit {rc}: {text.strip()[-200:]}"
    if len(data) > MAX_STDERR:
        return f"{name} wrote over {MAX_STDERR} bytes of warnings"
    names = [x for x in text.splitlines() if not x.startswith("tar: ")]
    if listed is not None and names != [listed]:
        return f"{name} took {len(names)} members ({', '.join(names[:3])}) for {listed}, not it once"
    return None


# ---- the module ------------------------------------------------------------------------------------

def _build(version: str, src: str, ko: str, log: str) -> None:
    """src built against version's headers in the trixie root, in a directory of /tmp (which the
    root binds); the module to ko, kbuild's output to log."""
    from tests.platform import trixie

    kbuild.ensure_headers(version)
    with tempfile.TemporaryDirectory(prefix="ckcd-dualpi2-", dir="/tmp") as build:
        shutil.copyfile(src, os.path.join(build, f"{MODULE}.c"))
        with open(os.path.join(build, "Kbuild"), "w") as f:
            f.write(f"obj-m := {MODULE}.o\n")
        try:
            cmd = trixie.command(["make", "-C", kbuild.headers_dir(version), f"M={build}", "modules"], cwd=build)
        except trixie.ChrootUnavailable as e:
            raise LabUnavailable(f"building {MODULE} for {version}: {e}") from None
        res = subprocess.run(cmd, text=True, capture_output=True, timeout=900)
        _write(log, (res.stdout + res.stderr).encode())
        built = os.path.join(build, f"{MODULE}.ko")
        data = _read(built, -1)
        if res.returncode or data is None:
            raise LabUnavailable(f"make {MODULE}.ko for {version} failed (exit {res.returncode}):\n"
                                 f"{(res.stdout + res.stderr)[-3000:]}")
        _write(ko, data)


def _prune(line: kernels.Line, keep: str) -> None:
    """The line's other versions' directories (a line that moved on)."""
    for name in os.listdir(cache_root()):
        path = os.path.join(cache_root(), name)
        if name != keep and re.fullmatch(line.pattern, name) and os.path.isdir(path) and not os.path.islink(path):
            say(f"removing {MODULE} of {name} ({line.name} is {keep} now)")
            shutil.rmtree(path, ignore_errors=True)


def _remove_downloads() -> None:
    """download-* directories a killed run left behind (each up to a whole .deb, about 167 MB);
    called under the lock, so no download is running."""
    for name in os.listdir(cache_root()):
        path = os.path.join(cache_root(), name)
        if name.startswith("download-") and stat.S_ISDIR(os.lstat(path).st_mode):
            say(f"removing {path}, left by an interrupted download")
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _locked():
    """The module's cache, checked (kernels.owned_dir), held by one run at a time."""
    kernels.cache_dir()
    kernels.owned_dir(cache_root())
    with kernels.locked(os.path.join(cache_root(), ".lock")):
        yield


def _reusable(record: dict[str, str], origin: dict[str, str], path: str, key: str) -> bool:
    """Whether SOURCE names origin and path still has the sha256 SOURCE recorded under key."""
    digest = _sha256(path)
    return all(record.get(k) == origin[k] for k in ORIGIN_KEYS) and digest is not None and record.get(key) == digest


def _vermagic_is(ko: str, version: str) -> bool:
    """Whether ko's vermagic names version; a damaged file (modinfo's struct.error or
    IndexError included) is no module, to be built again."""
    try:
        return kbuild.modinfo(ko).get("vermagic", [""])[0].split()[:1] == [version]
    except (OSError, ValueError, struct.error, IndexError):
        return False


def sch_dualpi2(version: str | None = None) -> str:
    """The path of Linux's sch_dualpi2.ko built for version (default: the 7.3 line's kernel
    today), fetched and built on first use, cached per kernel version after that."""
    version = kernels.checked(version or kernels.resolve("7.3"))
    line, mm = _line_of(version)
    with _locked():
        _remove_downloads()
        vdir = kernels.owned_dir(os.path.join(cache_root(), version))
        src, ko = os.path.join(vdir, f"{MODULE}.c"), os.path.join(vdir, f"{MODULE}.ko")
        apt = kernels.line_apt(line)
        origin = {"package": f"linux-source-{mm}", "version": _package_version(apt, f"linux-image-{version}"),
                  "suite": line.suite, "member": f"linux-source-{mm}/{MEMBER}"}
        record = _read_record(vdir)
        if _reusable(record, origin, src, "source-sha256"):
            if _reusable(record, origin, ko, "ko-sha256") and _vermagic_is(ko, version):
                return ko
        else:
            _fetch_source(apt, origin, src)
        record = {**origin, "source-sha256": _sha256(src)}
        _write_record(vdir, record)
        say(f"building Linux's {MODULE}.ko for {version} (unmodified, out of tree)")
        _build(version, src, ko, os.path.join(vdir, "make.log"))
        _write_record(vdir, {**record, "ko-sha256": _sha256(ko)})
        _prune(line, version)
        return ko


def make_log(ko: str) -> str:
    """kbuild's output of the build that made ko (sch_dualpi2's return value)."""
    with open(os.path.join(os.path.dirname(ko), "make.log")) as f:
        return f.read()


# As datapath/kernel/Makefile builds q_ckcd.so: warnings are errors.
PLUGIN_CFLAGS = ("-O2", "-g", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-fPIC")


def plugin(repo: str) -> str:
    """tests/kernel/build/q_dualpi2.so, our tc plugin for kind dualpi2 (tests/kernel/q_dualpi2.c),
    built against the host's tc headers (the iproute2 source the lab fetches for q_ckcd.so), which
    every lab boot runs; its path."""
    from tests.kernel import lab

    src = lab.ensure_iproute2_src()
    out_dir = os.path.join(repo, "tests", "kernel", "build")
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "q_dualpi2.so")
    res = subprocess.run(["cc", *PLUGIN_CFLAGS, "-I", os.path.join(src, "include"), "-I", os.path.join(src, "tc"),
                          "-shared", "-o", out + ".tmp", os.path.join(repo, "tests", "kernel", "q_dualpi2.c")],
                         text=True, capture_output=True)
    if res.returncode:
        raise RuntimeError(f"building q_dualpi2.so failed:\n{res.stdout}{res.stderr}")
    os.replace(out + ".tmp", out)
    return out
