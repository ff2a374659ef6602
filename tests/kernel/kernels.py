"""The kernels the lab boots, and where each one's image comes from.

    line  Debian suite      image packages                                  module built against
    6.1   the machine's     linux-image-V (V: the installed linux-headers)  /usr/src/linux-headers-V
    6.12  trixie            linux-image-V                                   the trixie root (gcc 14)
    7.3   trixie-backports  linux-image-V, linux-binary-V, linux-modules-V,  the trixie root (gcc 14)
                            linux-base-V

6.1 is the kernel of the installed linux-headers, fetched through the machine's own apt as it
always was. A newer line's V is what its suite's linux-image-amd64 depends on today, read from
the lab's own apt files for that suite (sources list, lists, cache and an empty dpkg status under
CACHE_DIR/apt-SUITE): the machine's apt configuration and state are never touched. The lists
are refreshed at most once a day; without the network the last lists are used, and a cached
image keeps the lab running. The version is checked against the line's form (e.g.
6.12.N+deb13-amd64) before it names a package or a path: it comes from a file apt downloaded.

Images are downloaded (`apt-get download`), unpacked with `dpkg-deb -x`, never installed, and
given the modules.dep the packages lack (`depmod -b`). When a line moves to a new version, the
older versions of that line are removed from the cache.

The lab runs as root and CACHE_DIR comes from CKCD_KERNEL_LAB_DIR: it is used only when it is a
directory of the effective uid that neither group nor others may write (owned_dir).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import time

CACHE_DIR = os.environ.get("CKCD_KERNEL_LAB_DIR", "/var/cache/ckcd-coex/kernel-lab")
MIRROR = "http://deb.debian.org/debian"
# Every kernel version the lab accepts: Debian's amd64 flavour, 6.1.0-56-amd64 or 6.12.117+deb13-amd64.
VERSION_RE = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9]+)?(?:\+deb[0-9]+)?-amd64")
LISTS_MAX_AGE_S = 24 * 3600


def say(msg: str) -> None:
    print(f"kernel-lab: {msg}", file=sys.stderr, flush=True)


class LabUnavailable(RuntimeError):
    """A prerequisite is missing; the message says which and how to get it."""


@dataclasses.dataclass(frozen=True)
class Line:
    name: str         # what --kernel and the tests call it
    suite: str        # the Debian suite its image and headers come from
    pattern: str      # the form its versions have (a regex, matched whole)
    root_suites: tuple[str, ...]  # suites the trixie root needs beyond its own for the headers


HOST_LINE = "6.1"
LINES = {
    "6.12": Line("6.12", "trixie", r"6\.12\.[0-9]+\+deb13-amd64", ()),
    "7.3": Line("7.3", "trixie-backports", r"7\.3\.[0-9]+\+deb13-amd64", ("trixie-backports",)),
}
ALL_LINES = (HOST_LINE, *LINES)


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def checked(version: str) -> str:
    """version, if it has the form of a Debian amd64 kernel version (else LabUnavailable)."""
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        raise LabUnavailable(f"not a Debian amd64 kernel version: {version!r}")
    return version


def host_version() -> str:
    """The version of the installed linux-headers (6.1: the module is built against it on the host)."""
    env = os.environ.get("CKCD_KERNEL_VERSION")
    if env:
        return checked(env)
    # the newest ABI, compared as numbers ("6.1.0-56" after "6.1.0-9"), as linux-headers-amd64 tracks it
    found = sorted((v for v in (os.path.basename(p)[len("linux-headers-"):]
                                for p in glob.glob("/usr/src/linux-headers-*-amd64"))
                    if VERSION_RE.fullmatch(v)),
                   key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
    if not found:
        raise LabUnavailable("no /usr/src/linux-headers-*-amd64: apt-get install linux-headers-amd64 "
                             "(make setup-tests does)")
    return found[-1]


def line_of(version: str) -> Line | None:
    """The newer line a version belongs to; None for the host's (6.1)."""
    for line in LINES.values():
        if re.fullmatch(line.pattern, version):
            return line
    return None


def resolve(kernel: str | None = None) -> str:
    """The version to boot: None or "6.1" the installed headers', "6.12" or "7.3" what that line's
    suite has today, or a version of one of these lines given whole (e.g. 7.3.4+deb13-amd64)."""
    if kernel in (None, HOST_LINE):
        return host_version()
    if kernel in LINES:
        return suite_version(LINES[kernel])
    version = checked(kernel)
    if line_of(version) is None and version != host_version():
        raise LabUnavailable(f"{version} is of no kernel line the lab boots ({', '.join(ALL_LINES)})")
    return version


# ---- the cache: the lab runs as root, CACHE_DIR comes from the environment ------------------------

def owned_dir(path: str) -> str:
    """path, made when missing, if it is a directory (not a symlink) of the effective uid that
    neither group nor others may write: root writes, unpacks and locks files in it, so anyone
    else able to plant a name there could make root overwrite a file of their choosing."""
    try:
        os.makedirs(path, mode=0o755, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        raise LabUnavailable(f"the kernel lab's cache {path}: {e}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise LabUnavailable(f"refusing the kernel lab's cache {path}: it must be a directory (not a symlink) "
                             f"owned by uid {os.geteuid()} and writable by no one else (it is uid {st.st_uid}, "
                             f"mode {stat.filemode(st.st_mode)}); set CKCD_KERNEL_LAB_DIR to such a directory")
    return path


def cache_dir() -> str:
    """CACHE_DIR, checked as owned_dir checks it."""
    return owned_dir(CACHE_DIR)


@contextlib.contextmanager
def locked(path: str):
    """An exclusive flock on path, created if missing but never truncated, and never through a
    symlink (a planted one would have root create or open a file elsewhere)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise LabUnavailable(f"cannot open the lock {path}: {e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ---- the lab's own apt, one set of files per suite --------------------------------------------

def apt_options(base: str) -> list[str]:
    """apt-get/apt-cache options that keep every file apt reads or writes under base."""
    return ["-o", f"Dir::Etc::SourceList={base}/sources.list", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={base}/lists", "-o", f"Dir::Cache={base}/cache",
            "-o", f"Dir::State::status={base}/status",
            "-o", "Dir::Etc::Preferences=/dev/null", "-o", "Dir::Etc::PreferencesParts=/dev/null"]


def apt_base(name: str, sources: str) -> str:
    """CACHE_DIR/apt-NAME with its sources list (written when it changes) and empty dpkg status."""
    base = os.path.join(cache_dir(), f"apt-{name}")
    for d in ("lists/partial", "cache/archives/partial"):
        os.makedirs(os.path.join(base, d), exist_ok=True)
    path = os.path.join(base, "sources.list")
    try:
        with open(path) as f:
            same = f.read() == sources
    except FileNotFoundError:
        same = False
    if not same:
        with open(path, "w") as f:
            f.write(sources)
        _forget_update(base)
    if not os.path.exists(os.path.join(base, "status")):
        open(os.path.join(base, "status"), "w").close()
    return base


def _forget_update(base: str) -> None:
    try:
        os.unlink(os.path.join(base, ".updated"))
    except FileNotFoundError:
        pass


def _suite_base(suite: str) -> str:
    """The lab's apt files for one suite's main, their lists at most LISTS_MAX_AGE_S old when the
    network answers."""
    base = apt_base(suite, f"deb {MIRROR} {suite} main\n")
    stamp = os.path.join(base, ".updated")
    with locked(os.path.join(base, ".lock")):  # one update at a time; the others then find it fresh
        if os.path.exists(stamp) and time.time() - os.path.getmtime(stamp) < LISTS_MAX_AGE_S:
            return base
        return _update(base, suite, stamp)


def _update(base: str, suite: str, stamp: str) -> str:
    say(f"apt-get update for {suite} (the lab's own lists)")
    try:
        _run(["apt-get", *apt_options(base), "update"], timeout=600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        if not glob.glob(os.path.join(base, "lists", "*_Packages*")):
            raise LabUnavailable(f"apt-get update for {suite} failed: {str(getattr(e, 'stderr', e)).strip()[-300:]}")
        say(f"apt-get update for {suite} failed; using its lists of {time.ctime(os.path.getmtime(base + '/lists'))}")
        return base
    open(stamp, "w").close()
    return base


def _depends(base: str, package: str) -> list[str]:
    """The package names in the Depends of package's candidate (alternatives included)."""
    try:
        out = _run(["apt-cache", *apt_options(base), "show", "--no-all-versions", package]).stdout
    except subprocess.CalledProcessError as e:
        raise LabUnavailable(f"apt-cache show {package}: {e.stderr.strip()[-300:]}")
    m = re.search(r"^Depends: (.*)$", out, re.M)
    return re.findall(r"([a-z0-9][a-z0-9.+-]+)(?:\s*\([^)]*\))?", m.group(1)) if m else []


def line_apt(line: Line) -> list[str]:
    """apt-get/apt-cache options for the lab's own apt files of the line's suite (lists refreshed
    as for its images), for what else a test fetches from that suite."""
    return apt_options(_suite_base(line.suite))


def suite_version(line: Line) -> str:
    """The version the line's suite's linux-image-amd64 depends on today."""
    base = _suite_base(line.suite)
    found = [name[len("linux-image-"):] for name in _depends(base, "linux-image-amd64")
             if name.startswith("linux-image-")]
    found = [v for v in found if re.fullmatch(line.pattern, v)]
    if len(found) != 1:
        raise LabUnavailable(f"{line.suite}'s linux-image-amd64 names no single {line.name} kernel: {found}")
    return checked(found[0])


# ---- images ---------------------------------------------------------------------------------------

def image_root(version: str) -> str:
    return os.path.join(CACHE_DIR, f"linux-image-{checked(version)}")


def _download(version: str, debs: str) -> list[str]:
    """The .debs of version's kernel in debs (downloaded when missing): linux-image-V and, for a
    line whose linux-image-V is a metapackage (7.3), every linux-*-V it depends on."""
    line = line_of(version)
    base = None if line is None else _suite_base(line.suite)
    packages = [f"linux-image-{version}"]
    if base is not None:
        packages += [p for p in _depends(base, packages[0])
                     if re.fullmatch(rf"linux-[a-z]+-{re.escape(version)}", p) and p not in packages]
    missing = [p for p in packages if not glob.glob(os.path.join(debs, f"{p}_*.deb"))]
    if missing:
        say(f"downloading {' '.join(missing)} (apt-get download; not installed)")
        opts = [] if base is None else apt_options(base)  # 6.1: the machine's apt, as always
        try:
            _run(["apt-get", *opts, "download", *missing], cwd=debs, timeout=1800)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            raise LabUnavailable(f"apt-get download {' '.join(missing)} failed: "
                                 f"{str(getattr(e, 'stderr', e)).strip()[-300:]}")
    return [sorted(glob.glob(os.path.join(debs, f"{p}_*.deb")))[-1] for p in packages]


def ensure_image(version: str) -> str:
    """Unpack version's kernel into the cache; return its root (modules under lib/modules/V)."""
    root = image_root(version)
    cache = cache_dir()
    stamp = os.path.join(root, ".ckcd-unpacked")
    if os.path.exists(stamp):
        return root
    debs = os.path.join(cache, "debs")
    os.makedirs(debs, exist_ok=True)
    files = _download(version, debs)
    shutil.rmtree(root, ignore_errors=True)
    for deb in files:
        say(f"unpacking {os.path.basename(deb)}")
        _run(["dpkg-deb", "-x", deb, root])
    # Newer packages keep modules under usr/lib/modules; Debian 12's depmod -b reads lib/modules.
    if not os.path.exists(os.path.join(root, "lib")) and os.path.isdir(os.path.join(root, "usr", "lib", "modules")):
        os.symlink("usr/lib", os.path.join(root, "lib"))
    # The packages ship no modules.dep; the guest's modprobe needs one.
    _run(["depmod", "-b", root, version])
    open(stamp, "w").close()
    line = line_of(version)
    if line is not None:
        _prune(line, version)
    return root


def _prune(line: Line, keep: str) -> None:
    """Older versions of a line: their unpacked images, initramfs files and .debs."""
    for path in glob.glob(os.path.join(CACHE_DIR, "*")) + glob.glob(os.path.join(CACHE_DIR, "debs", "*.deb")):
        m = re.match(r"(?:linux-image-|initramfs-|linux-[a-z]+-)([^_]+?)(?:-L\d+-.*|_.*)?$", os.path.basename(path))
        if not m or m.group(1) == keep or not re.fullmatch(line.pattern, m.group(1)):
            continue
        say(f"removing {os.path.basename(path)} ({line.name} is {keep} now)")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


def vmlinuz(root: str, version: str) -> str:
    for rel in (f"boot/vmlinuz-{version}", f"usr/lib/modules/{version}/vmlinuz"):
        path = os.path.join(root, rel)
        if os.path.isfile(path):
            return path
    raise LabUnavailable(f"the unpacked {version} has no vmlinuz (boot/ or usr/lib/modules/{version}/)")
