"""sch_ckcd.ko built against the headers of each kernel the lab boots (tests/kernel/kernels.py).

6.1's headers are installed on this machine and its builds run here. 6.12's and 7.3's need
Debian 13's gcc 14: their linux-headers-V (and dkms) are installed into the cached trixie root
(tests/platform/trixie.py, one package stamp per line), and the builds run inside it with the
checkout bound at its own path.

- make_module: `make -C datapath/kernel module KVER=V KDIR=/usr/src/linux-headers-V` into
  datapath/kernel/build/kernels/V/ (gitignored, one directory per kernel), with its output, so
  a test can hold the build to no warnings.
- dkms_module: scripts/dkms.sh --build-only -k V, as `make dkms` on a switch host. 6.1's runs
  on the machine and its registration is removed afterwards (an operator's installed version
  is left alone); 6.12's and 7.3's run in a throwaway overlay of the root (scratch_root), so
  nothing they register outlives the call. DKMS signs with a throwaway key (it reads
  mok_signing_key and mok_certificate from the environment), never /var/lib/dkms/mok.key.
  Debian 13's DKMS leaves sch_ckcd.ko.xz for kernels that compress their modules: the copy
  handed back is always the decompressed .ko, at datapath/kernel/build/dkms/V/sch_ckcd.ko.
One DKMS build at a time across checkouts (a lock file), at make -j1.
"""

from __future__ import annotations

import contextlib
import fcntl
import lzma
import os
import re
import shutil
import struct
import subprocess
import tempfile

from tests.kernel import kernels
from tests.kernel.kernels import LabUnavailable

DKMS_LOCK = "/run/lock/ckcd-coex-dkms-tests.lock"
HEADERS_LOCK = "/run/lock/ckcd-coex-kernel-headers.lock"
VERSION_RE = r"[0-9A-Za-z][0-9A-Za-z.+~-]*"  # scripts/dkms.sh's


@contextlib.contextmanager
def _locked(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def headers_dir(version: str) -> str:
    return f"/usr/src/linux-headers-{kernels.checked(version)}"


def ensure_headers(version: str) -> None:
    """version's headers where its builds run: on this machine (6.1; installed by make setup-tests),
    or installed into the trixie root with dkms (6.12, 7.3)."""
    line = kernels.line_of(kernels.checked(version))
    if line is None:
        if not os.path.isfile(os.path.join(headers_dir(version), "Makefile")):
            raise LabUnavailable(f"no {headers_dir(version)}: apt-get install linux-headers-{version}")
        return
    from tests.platform import trixie

    try:
        with _locked(HEADERS_LOCK):
            trixie.ensure_packages(f"kernel-{line.name}", (f"linux-headers-{version}", "dkms"), line.root_suites)
    except trixie.ChrootUnavailable as e:
        raise LabUnavailable(f"headers for {version} in the trixie root: {e}") from None


def _in_root(argv: list[str], version: str, cwd: str, root: str | None = None) -> list[str]:
    """argv where version's headers are: as is on this machine, or inside the trixie root."""
    if kernels.line_of(version) is None:
        return argv
    from tests.platform import trixie

    return trixie.command(argv, cwd=cwd, root=root)


def make_module(repo: str, version: str) -> tuple[str, str]:
    """Build sch_ckcd.ko for version with the module's own Makefile; (its path, make's output)."""
    ensure_headers(version)
    kdir = os.path.join(repo, "datapath", "kernel")
    build = os.path.join(kdir, "build", "kernels", version)
    cmd = _in_root(["make", "-C", kdir, "module", f"KVER={version}", f"KDIR={headers_dir(version)}",
                    f"BUILD={build}"], version, repo)
    res = subprocess.run(cmd, text=True, capture_output=True, timeout=900)
    out = res.stdout + res.stderr
    ko = os.path.join(build, "sch_ckcd.ko")
    if res.returncode or not os.path.isfile(ko):
        raise RuntimeError(f"make module for {version} failed (exit {res.returncode}):\n{out[-4000:]}")
    return ko, out


def dkms_version(repo: str) -> str:
    version = subprocess.run(["bash", os.path.join(repo, "scripts", "dkms.sh"), "--print-version"],
                             text=True, capture_output=True, check=True).stdout.strip()
    if not re.fullmatch(VERSION_RE, version):
        raise RuntimeError(f"scripts/dkms.sh --print-version gave {version!r}")
    return version


def _copy_module(built_dir: str, out: str) -> None:
    """built_dir's sch_ckcd.ko, or its .ko.xz decompressed, to out (replaced whole)."""
    plain, packed = os.path.join(built_dir, "sch_ckcd.ko"), os.path.join(built_dir, "sch_ckcd.ko.xz")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    if os.path.isfile(plain):
        shutil.copyfile(plain, out + ".tmp")
    elif os.path.isfile(packed):
        with lzma.open(packed) as src, open(out + ".tmp", "wb") as dst:
            shutil.copyfileobj(src, dst)
    else:
        raise FileNotFoundError(f"DKMS built neither sch_ckcd.ko nor sch_ckcd.ko.xz in {built_dir}")
    os.replace(out + ".tmp", out)


def _dkms_failure(res: subprocess.CompletedProcess, version: str, log_root: str, dver: str) -> RuntimeError:
    log = os.path.join(log_root, "var/lib/dkms/sch_ckcd", dver, "build/make.log")
    tail = open(log).read()[-3000:] if os.path.exists(log) else ""
    return RuntimeError(f"scripts/dkms.sh --build-only -k {version} failed (exit {res.returncode}):\n"
                        f"{res.stdout}{res.stderr}{tail}")


def dkms_module(repo: str, version: str) -> tuple[str, str]:
    """scripts/dkms.sh --build-only -k version; (the built module as a .ko under
    datapath/kernel/build/dkms/V/, DKMS's output). Leaves no registration behind."""
    ensure_headers(version)
    if shutil.which("dkms") is None and kernels.line_of(version) is None:
        raise LabUnavailable("dkms not found: apt-get install dkms (make setup-tests does)")
    dver = dkms_version(repo)
    out = os.path.join(repo, "datapath", "kernel", "build", "dkms", version, "sch_ckcd.ko")
    module_rel = os.path.join("var/lib/dkms/sch_ckcd", dver, version, os.uname().machine, "module")
    argv = ["bash", os.path.join(repo, "scripts", "dkms.sh"), "--build-only", "-k", version, "-j", "1"]
    # the keys under /tmp, which the trixie root binds at the same path
    with _locked(DKMS_LOCK), tempfile.TemporaryDirectory(prefix="ckcd-dkms-") as work:
        env = dict(os.environ, mok_signing_key=os.path.join(work, "mok.key"),
                   mok_certificate=os.path.join(work, "mok.pub"))
        if kernels.line_of(version) is None:
            res = _dkms_on_host(argv, env, version, dver, os.path.join("/", module_rel), out)
        else:
            from tests.platform import trixie

            with trixie.scratch_root(os.path.join(work, "overlay")) as root:
                res = subprocess.run(_in_root(argv, version, repo, root), text=True, capture_output=True,
                                     env=env, timeout=900)
                if res.returncode:
                    raise _dkms_failure(res, version, root, dver)
                _copy_module(os.path.join(root, module_rel), out)
    return out, res.stdout + res.stderr


def _dkms_on_host(argv, env, version: str, dver: str, built_dir: str, out: str) -> subprocess.CompletedProcess:
    """6.1's DKMS build on this machine; the registration and /usr/src tree removed afterwards
    unless an operator had this version installed."""
    status = subprocess.run(["dkms", "status", "-m", "sch_ckcd", "-v", dver], text=True,
                            capture_output=True).stdout
    operators = ": installed" in status
    try:
        res = subprocess.run(argv, text=True, capture_output=True, env=env, timeout=900)
        if res.returncode:
            raise _dkms_failure(res, version, "/", dver)
        _copy_module(built_dir, out)
        return res
    finally:
        if not operators:
            subprocess.run(["dkms", "remove", "-m", "sch_ckcd", "-v", dver, "--all"], capture_output=True)
            shutil.rmtree(os.path.join("/usr/src", f"sch_ckcd-{dver}"), ignore_errors=True)


def modinfo(path: str) -> dict[str, list[str]]:
    """The .modinfo fields of a module file (.ko, or .ko.xz), read from its ELF section: key -> values.
    Raises ValueError for a file that is no 64-bit little-endian ELF with that section."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x7fELF\x02\x01":
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def section(i: int) -> tuple[int, int, int]:  # name offset, file offset, size
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size

    try:
        _, stroff, strsize = section(shstrndx)
        for i in range(shnum):
            name, off, size = section(i)
            if data[stroff + name:data.index(b"\0", stroff + name)] == b".modinfo":
                break
        else:
            raise ValueError(f"{path}: no .modinfo section")
    except struct.error:
        raise ValueError(f"{path}: truncated ELF file") from None
    fields: dict[str, list[str]] = {}
    for entry in data[off:off + size].split(b"\0"):
        key, eq, value = entry.partition(b"=")
        if eq:
            fields.setdefault(key.decode(errors="replace"), []).append(value.decode(errors="replace"))
    return fields
