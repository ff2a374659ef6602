"""The kernel lab: boot a Debian kernel under qemu and run a shell script in it.

Our machines load no kernel modules (docs/kernel.md, "The kernel lab"), but qemu can boot a
real kernel that does. The kernel is Debian 12's own, the one matching the installed
linux-headers (so a module built against those headers loads), or a newer Debian line, 6.12
or 7.3 (tests/kernel/kernels.py says where each comes from). Its packages are unpacked into a
cache outside the repository (never installed: that would run initramfs and bootloader
hooks); the lab builds a busybox-static initramfs holding the host's own tc, ip and kmod with
the libraries ldd names and the in-tree modules a test asks for, and boots it under TCG.

Everything is cached and rebuilt only when missing, so a second run costs only the boot.
One run = one boot: the guest loads the extra out-of-tree modules it was given, runs the given
script, prints its exit status between markers on the serial console, and powers off; on
timeout the host kills qemu by PID. Vm instead keeps one boot up with qemu's user network: the
host sends it scripts through a forwarded port while host programs (the controller) talk to
the guest's services (tests/kernel/ovs_lab.py, the switch host).

    python -m tests.kernel.lab [--kernel 6.1|6.12|7.3] script.sh [--file GUEST=HOST ...]
        [--extra-module PATH.ko ...] [--sch-ckcd] [--modules sch_htb,veth]
"""

import argparse
import dataclasses
import glob
import gzip
import lzma
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zlib

from tests.hostload import HostLoad, is_disturbed, wait_for_quiet_host
from tests.kernel import kbuild, kernels
from tests.kernel.kernels import CACHE_DIR, LabUnavailable, say

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What every lab boot can load; their dependencies come along (modules.dep closure).
# netem delays the ACK path for the TCP tests (an RTT), tcp_bbr is BBR (cubic is built in).
DEFAULT_MODULES = ("veth", "sch_htb", "sch_choke", "sch_codel", "sch_red", "sch_sfb", "sch_pie", "sch_netem",
                   "tcp_bbr")  # fq_codel built in
# Host programs copied into the guest with their libraries. Busybox runs its own tc/ip
# applets before files on PATH: guest scripts call these by full path ($TC, $IP).
# ethtool turns the veths' offloads off, so a qdisc's packet limit counts MTU frames (docs/architecture.md).
# Two vCPUs, each a host thread of qemu's multi-threaded TCG: the guest's senders, receivers and
# softirqs (OVS, HTB, the qdisc under test) run on both host cores. With one, a host CPU about half
# as fast as the one the traffic tests were tuned on could not fill their 20 Mbit/s links (13 of
# 15.3 Mbit/s, measured on an Intel Xeon at 2.5 GHz against an AMD EPYC's 18-19).
VCPUS = 2
# TCG's default CPU plus RDRAND: the guest's kernel trusts it and seeds its random generator while
# booting. Without it the generator became ready about 16 s in, under the tests' traffic, and the
# kernel's live patch of its readiness switch once crashed a 6.12 guest (tests/kernel/test_kernel_lines).
CPU = "qemu64,+rdrand"
HOST_PROGRAMS = ("/usr/sbin/tc", "/usr/sbin/ip", "/usr/bin/kmod", "/usr/bin/iperf3", "/usr/sbin/ethtool")
BUSYBOX = "/bin/busybox"
EXIT_MARK = "@@CKCD-LAB-EXIT"
START_MARK = "@@CKCD-LAB-START@@"
# Bump when the initramfs layout or /init changes, so cached ones are rebuilt.
INITRAMFS_LAYOUT = 3


def kernel_version() -> str:
    """The version of the installed linux-headers (6.1; the module is built against it)."""
    return kernels.host_version()


def headers_dir(ver: str) -> str:
    return kbuild.headers_dir(ver)


def check_prerequisites(kernel: str | None = None) -> None:
    """Tools and root, and the kernel to boot (kernels.resolve: None is the installed headers')."""
    missing = [what for path, what in (("/usr/bin/qemu-system-x86_64", "qemu-system-x86"),
                                       (BUSYBOX, "busybox-static"),
                                       ("/usr/sbin/depmod", "kmod"),
                                       ("/usr/bin/apt-get", "apt"))
               if not os.path.exists(path)]
    if missing:
        raise LabUnavailable("missing " + ", ".join(missing) + ": apt-get install " + " ".join(missing)
                             + " (make setup-tests does)")
    if os.geteuid() != 0:
        raise LabUnavailable("must run as root (apt-get download into the lab cache)")
    kernels.resolve(kernel)


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def ensure_image(ver: str) -> str:
    """Unpack ver's kernel into the cache; return its root (has lib/modules/ver)."""
    return kernels.ensure_image(ver)


def vmlinuz(root: str, ver: str) -> str:
    return kernels.vmlinuz(root, ver)


def module_dir(root: str, ver: str) -> str:
    for base in ("lib", "usr/lib"):
        d = os.path.join(root, base, "modules", ver)
        if os.path.isdir(d):
            return d
    raise LabUnavailable(f"linux-image-{ver} has no lib/modules/{ver}")


def module_closure(mdir: str, names) -> list[str]:
    """Paths (relative to mdir) of the named modules and everything they depend on."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    with open(os.path.join(mdir, "modules.dep")) as f:
        for line in f:
            path, _, rest = line.partition(":")
            deps[path] = rest.split()
            name = os.path.basename(path).split(".ko")[0].replace("-", "_")
            by_name[name] = path
    # Built into this kernel (e.g. a newer line's): nothing to load, modprobe answers 0 for it.
    builtin: set[str] = set()
    if os.path.exists(os.path.join(mdir, "modules.builtin")):
        with open(os.path.join(mdir, "modules.builtin")) as f:
            builtin = {os.path.basename(p).split(".ko")[0].replace("-", "_") for p in f.read().split()}
    out: list[str] = []
    todo = []
    for n in names:
        key = n.replace("-", "_")
        if key not in by_name:
            if key in builtin:
                continue
            raise LabUnavailable(f"module {n} not in linux-image's modules.dep")
        todo.append(by_name[key])
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.append(p)
        todo.extend(deps.get(p, []))
    return out


def libraries(programs) -> set[str]:
    """The shared libraries (and the loader) that ldd names for programs."""
    libs: set[str] = set()
    for prog in programs:
        res = subprocess.run(["ldd", prog], text=True, capture_output=True)
        for line in res.stdout.splitlines():
            m = re.search(r"(/\S+)\s+\(0x", line)
            if m and os.path.exists(m.group(1)):
                libs.add(m.group(1))
    return libs


def ensure_iproute2_src() -> str:
    """An unpacked iproute2 source tree of the installed version (for tc's plugin headers).

    apt-get source with its own sources list and lists dir, so the machine's apt
    configuration is untouched (docs/kernel.md, "The kernel lab")."""
    ver = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "iproute2"], text=True,
                         capture_output=True).stdout.strip()
    upstream = ver.split(":")[-1].rsplit("-", 1)[0]
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+~:-]*", ver) or not re.fullmatch(r"[0-9][0-9A-Za-z.+~]*", upstream):
        raise LabUnavailable(f"dpkg reports iproute2 version {ver!r}: not a Debian version")
    tree = os.path.join(CACHE_DIR, "apt-src", "src", f"iproute2-{upstream}")
    if os.path.exists(os.path.join(tree, "tc", "tc_util.h")):
        return tree
    base = kernels.apt_base("src", "deb-src http://deb.debian.org/debian bookworm main\n"
                            "deb-src http://deb.debian.org/debian-security bookworm-security main\n")
    os.makedirs(os.path.join(base, "src"), exist_ok=True)
    opts = kernels.apt_options(base)
    say(f"fetching iproute2 {ver} source (apt-get source --download-only, own lists dir)")
    try:
        _run(["apt-get", *opts, "update"])
        _run(["apt-get", *opts, "source", "--download-only", f"iproute2={ver}"], cwd=os.path.join(base, "src"))
    except subprocess.CalledProcessError as e:
        raise LabUnavailable(f"apt-get source iproute2={ver} failed: {e.stderr.strip()[-300:]}")
    orig = glob.glob(os.path.join(base, "src", f"iproute2_{upstream}.orig.tar.*"))
    if not orig:
        raise LabUnavailable(f"no iproute2_{upstream}.orig tarball after apt-get source")
    _run(["tar", "-xf", orig[0], "-C", os.path.join(base, "src")])
    return tree


def build_sch_ckcd(repo: str, kernel: str | None = None) -> tuple[str, str]:
    """Build sch_ckcd.ko with DKMS, as `make dkms` does on a switch host, for the kernel to boot
    (kernels.resolve(kernel); None is the installed headers'), and q_ckcd.so from datapath/kernel;
    return their paths.

    scripts/dkms.sh --build-only registers this checkout's sources as sch_ckcd/<version> (the
    version hashes them, so the tree DKMS builds is always the one under test) and builds it;
    the module is copied to datapath/kernel/build/dkms/<kernel>/sch_ckcd.ko (decompressed when
    DKMS compressed it) and nothing stays registered (tests/kernel/kbuild.py): a version left
    registered would be built and installed by DKMS for every kernel installed later. A rebuild
    costs about 6 s, so none is skipped. The plugin is the same for every kernel: it is built
    for the host's tc, which every lab boot runs."""
    ko, _ = kbuild.dkms_module(repo, kernels.resolve(kernel))
    return ko, build_plugin(repo)


def build_plugin(repo: str) -> str:
    """q_ckcd.so for the host's tc (which every lab boot runs, whatever its kernel); its path."""
    src = ensure_iproute2_src()
    res = subprocess.run(["make", "-s", "-C", os.path.join(repo, "datapath", "kernel"), "plugin",
                          f"IPROUTE2_SRC={src}"], text=True, capture_output=True)
    if res.returncode:
        raise RuntimeError(f"make plugin in datapath/kernel failed:\n{res.stdout}{res.stderr}")
    return os.path.join(repo, "datapath", "kernel", "build", "q_ckcd.so")


# ---- initramfs: newc cpio written here, so the lab needs no cpio package ----------

class Cpio:
    """A newc archive; the kernel unpacks concatenated (even separately gzipped) ones."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.ino = 1000
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"") -> None:
        self.ino += 1
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
        hdr = b"070701" + b"".join(b"%08X" % v for v in fields) + name.encode() + b"\0"
        self.parts.append(hdr + b"\0" * (-len(hdr) % 4))
        self.parts.append(data + b"\0" * (-len(data) % 4))

    def mkdir(self, path: str) -> None:
        path = path.strip("/")
        if not path or path in self.dirs:
            return
        self.mkdir(os.path.dirname(path))
        self.dirs.add(path)
        self._entry(path, stat.S_IFDIR | 0o755)

    def add_bytes(self, path: str, data: bytes, mode: int = 0o755) -> None:
        path = path.strip("/")
        self.mkdir(os.path.dirname(path))
        self._entry(path, stat.S_IFREG | mode, data)

    def add_file(self, path: str, src: str) -> None:
        with open(src, "rb") as f:
            self.add_bytes(path, f.read(), stat.S_IMODE(os.stat(src).st_mode) or 0o644)

    def add_symlink(self, path: str, target: str) -> None:
        path = path.strip("/")
        self.mkdir(os.path.dirname(path))
        self._entry(path, stat.S_IFLNK | 0o777, target.encode())

    def gz(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return gzip.compress(b"".join(self.parts), compresslevel=1)


INIT = f"""#!/bin/busybox sh
/bin/busybox mkdir -p /bb /proc /sys /dev /run /tmp /var/run
/bin/busybox --install -s /bb
export PATH=/usr/sbin:/usr/bin:/sbin:/bin:/bb TC=/usr/sbin/tc IP=/usr/sbin/ip
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
ln -s /proc/self/fd /dev/fd 2>/dev/null
# Keep the serial console for the script's output; the kernel log stays in dmesg.
echo 1 > /proc/sys/kernel/printk
ip link set lo up
echo "{START_MARK}"
cd /lab && sh /lab/script.sh 2>&1
echo "{EXIT_MARK} $?@@"
sync
poweroff -f
"""


def ensure_base_initramfs(ver: str, modules=DEFAULT_MODULES, programs=HOST_PROGRAMS,
                          data_files=()) -> str:
    """busybox, the host's programs (tc/ip/kmod/iperf3, and e.g. Open vSwitch's) with their
    libraries, host data files at their own paths, and the module closure."""
    root = ensure_image(ver)
    # Named by what it holds: the layout, the modules, and the host files' size and time,
    # so an upgraded tc (which the plugin is then built for) gets a new initramfs.
    stamp = ",".join(f"{p}:{os.path.getsize(p)}.{int(os.path.getmtime(p))}"
                     for p in (*programs, *data_files) if os.path.exists(p))
    tag = zlib.crc32(stamp.encode())
    out = os.path.join(CACHE_DIR, f"initramfs-{ver}-L{INITRAMFS_LAYOUT}-{'+'.join(sorted(modules))}-{tag:08x}.gz")
    if os.path.exists(out):
        return out
    say(f"building the initramfs ({', '.join(modules)})")
    mdir = module_dir(root, ver)
    cpio = Cpio()
    cpio.add_file("bin/busybox", BUSYBOX)
    cpio.add_bytes("init", INIT.encode())
    programs = [p for p in programs if os.path.exists(p)]
    for prog in programs:
        cpio.add_file(prog, prog)
    for path in data_files:
        cpio.add_file(path, path)
    for lib in sorted(libraries(programs)):
        cpio.add_file(lib, lib)  # the content, under the name the loader opens
    cpio.add_symlink("sbin/modprobe", "/usr/bin/kmod")
    cpio.add_symlink("sbin/rmmod", "/usr/bin/kmod")
    cpio.add_symlink("sbin/insmod", "/usr/bin/kmod")
    cpio.add_symlink("sbin/lsmod", "/usr/bin/kmod")
    for rel in module_closure(mdir, modules):
        cpio.add_file(f"lib/modules/{ver}/{rel}", os.path.join(mdir, rel))
    # The full index: modprobe resolves only what it is asked for, all of which is here.
    for idx in glob.glob(os.path.join(mdir, "modules.*")):
        cpio.add_file(f"lib/modules/{ver}/{os.path.basename(idx)}", idx)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(cpio.gz())
    os.replace(tmp, out)
    return out


@dataclasses.dataclass
class LabResult:
    exit_status: int | None  # None: no exit marker (timeout or crash)
    output: str              # the script's output (between the markers)
    console: str             # everything qemu printed
    seconds: float
    timed_out: bool
    # When each step (`@@BEGIN name` .. `@@END name`) ran, in seconds after load.t0, as the
    # host read its markers from the console; and the host's CPU sampled during the boot.
    step_times: dict = dataclasses.field(default_factory=dict)
    load: HostLoad | None = None

    def steal_pct(self, step: str) -> float | None:
        """The hypervisor's mean steal while the step ran (None: no sample in its window)."""
        if self.load is None or step not in self.step_times:
            return None
        return self.load.steal_pct(*self.step_times[step])


class Steps(dict):
    """{step: (exit status, output)} of a script whose steps print `@@BEGIN name` and
    `@@END name rc=N` (anything may follow N); `steal` holds each step's mean host steal (%)
    where the boot was sampled, `disturbed` the steps measured while the hypervisor withheld
    the CPU (tests.hostload.is_disturbed)."""

    def __init__(self, res: "LabResult | None" = None, output: str | None = None):
        super().__init__()
        self.steal: dict[str, float] = {}
        text = res.output if res is not None else output
        for m in re.finditer(r"@@BEGIN (\w+)\n(.*?)@@END \1 rc=(\d+)", text or "", re.S):
            self[m.group(1)] = (int(m.group(3)), m.group(2))
            pct = res.steal_pct(m.group(1)) if res is not None else None
            if pct is not None:
                self.steal[m.group(1)] = pct

    def disturbed(self, names=None) -> dict[str, float]:
        """{step: steal %} of those of names (all steps by default) measured on a disturbed host."""
        return {n: p for n, p in self.steal.items() if (names is None or n in names) and is_disturbed(p)}


EXTRA_MODULE_RE = re.compile(r"([A-Za-z0-9_-]+)\.ko(?:\.xz)?")
# The run's exit status when an extra module does not load (the script then does not run).
EXTRA_MODULE_FAILED = 125


@dataclasses.dataclass
class ExtraModules:
    """Out-of-tree modules one boot loads before its script (run's and Vm's extra_modules)."""
    files: dict[str, bytes]  # guest path (lab/extra/NAME.ko) -> the module, decompressed
    needs: tuple[str, ...]   # in-tree modules they depend on (their modinfo's depends), modprobed first
    prelude: str             # the shell lines that load them all, in the order given


def extra_modules_for(paths, ver: str) -> ExtraModules:
    """Check each host module (.ko or .ko.xz) was built for ver (its vermagic), before a boot is
    spent on it; a module's in-tree dependencies come into the initramfs and are loaded first,
    the ones among paths in their given order. Raises ValueError for a module that cannot load."""
    files: dict[str, bytes] = {}
    names, needs, lines = [], [], []
    for path in paths:
        m = EXTRA_MODULE_RE.fullmatch(os.path.basename(path))
        if not m:
            raise ValueError(f"extra module {path}: the file name must be NAME.ko or NAME.ko.xz")
        info = kbuild.modinfo(path)
        vermagic = (info.get("vermagic") or [""])[0].split()
        if vermagic[:1] != [ver]:
            raise ValueError(f"extra module {path} was built for {' '.join(vermagic[:1]) or 'no kernel'}, "
                             f"not {ver}")
        deps = [d for d in ",".join(info.get("depends", [])).split(",") if d]
        bad = [d for d in deps if not re.fullmatch(r"[A-Za-z0-9_-]+", d)]
        if bad:
            raise ValueError(f"extra module {path} names impossible dependencies {bad}")
        needs += [d for d in deps if d.replace("-", "_") not in names and d not in needs]
        names.append(m.group(1).replace("-", "_"))
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rb") as f:
            files[f"lab/extra/{m.group(1)}.ko"] = f.read()
        lines.append(f'insmod /lab/extra/{m.group(1)}.ko || {{ echo "kernel-lab: insmod {m.group(1)}.ko failed"; '
                     f"exit {EXTRA_MODULE_FAILED}; }}")
    needs = [d for d in needs if d.replace("-", "_") not in names]
    prelude = "".join(f'modprobe {d} || {{ echo "kernel-lab: modprobe {d} failed"; exit {EXTRA_MODULE_FAILED}; }}\n'
                      for d in needs) + "".join(line + "\n" for line in lines)
    return ExtraModules(files, tuple(needs), prelude)


def _initrd(path: str, kernel: str | None, script: str, modules, programs=HOST_PROGRAMS, data_files=(),
            extra_modules=(), files: dict[str, str] | None = None,
            entries: dict[str, str] | None = None) -> tuple[str, str]:
    """Write one boot's initrd to path: the cached base initramfs and a small cpio with the
    script as /lab/script.sh (after the extra modules' prelude: the script then runs as
    /lab/main.sh), entries (guest path -> text), the extra modules and files (guest path ->
    host file). Returns (the kernel's version, its vmlinuz)."""
    check_prerequisites(kernel)
    ver = kernels.resolve(kernel)
    extras = extra_modules_for(extra_modules, ver)
    root = ensure_image(ver)
    base = ensure_base_initramfs(ver, tuple(dict.fromkeys((*modules, *extras.needs))), programs, data_files)
    cpio = Cpio()
    if extras.files:
        cpio.add_bytes("lab/script.sh", (extras.prelude + "exec sh /lab/main.sh\n").encode())
        cpio.add_bytes("lab/main.sh", script.encode())
    else:
        cpio.add_bytes("lab/script.sh", script.encode())
    for guest, text in (entries or {}).items():
        cpio.add_bytes(guest, text.encode())
    for guest, data in extras.files.items():
        cpio.add_bytes(guest, data, 0o644)
    for guest, host in (files or {}).items():
        cpio.add_file(guest, host)
    with open(path, "wb") as f, open(base, "rb") as b:
        shutil.copyfileobj(b, f)
        f.write(cpio.gz())
    return ver, vmlinuz(root, ver)


def run(script: str, files: dict[str, str] | None = None, timeout_s: float = 240.0,
        modules=DEFAULT_MODULES, memory_mb: int = 1024, kernel: str | None = None,
        extra_modules=(), programs=HOST_PROGRAMS, invalid=None) -> LabResult:
    """Boot the lab VM, run script (shell text) as /lab/script.sh, return its result.

    files maps guest paths (relative to /, e.g. "lab/sch_ckcd.ko") to host files. kernel is
    the kernel to boot (kernels.resolve: None or "6.1" the installed headers', "6.12", "7.3" or
    a whole version of those lines). extra_modules are host paths of out-of-tree modules built
    for that kernel, loaded in order before the script runs (extra_modules_for); one that does
    not load ends the run with exit status EXTRA_MODULE_FAILED and says why. programs are the
    host programs the guest gets, with their libraries (HOST_PROGRAMS; e.g. bpftool as well).
    invalid(step, output) names why a measured step's run measured the host rather than the
    test (or returns None), beside the steal that quiet_judge checks.
    """
    with tempfile.TemporaryDirectory(prefix="ckcd-lab-") as tmp:
        initrd = os.path.join(tmp, "initrd.gz")
        ver, kimage = _initrd(initrd, kernel, script, modules, programs, extra_modules=extra_modules, files=files)
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb), "-smp", str(VCPUS), "-cpu", CPU,
               "-nographic", "-no-reboot", "-nic", "none",
               "-kernel", kimage, "-initrd", initrd,
               "-append", "console=ttyS0 panic=-1 oops=panic quiet loglevel=1"]
        for attempt in (1, 2):
            say(f"booting {ver} under qemu (TCG), timeout {timeout_s:.0f} s")
            with HostLoad() as load:
                judge = quiet_judge(load, invalid=invalid)
                console, seconds, timed_out, step_times = _boot(cmd, timeout_s, load.t0, judge)
            if attempt == 2 or not died_before_start(console, timed_out):
                break
            say(f"the kernel died before the script started ({last_line(console)}): booting once more")
    status = None
    m = re.search(re.escape(EXIT_MARK) + r" (\d+)@@", console)
    if m:
        status = int(m.group(1))
    start = console.find(START_MARK)
    body = console[start + len(START_MARK):] if start >= 0 else console
    body = body[:m.start() - (start + len(START_MARK))] if (m and start >= 0) else body
    say(f"VM done in {seconds:.1f} s, script exit {status}{' (TIMEOUT)' if timed_out else ''}")
    return LabResult(status, body.strip("\n"), console, seconds, timed_out, step_times, load)


# How long one boot may wait, in all, for a spell of steal to pass before it runs a step again
# (wait_for_quiet_host); the boot's timeout grows by what it waited.
QUIET_WAIT_BUDGET_S = 240.0


def _invalid_or_none(invalid, name: str, output: str) -> str | None:
    """invalid(name, output), or None when there is none or it could not read the output: it
    runs on the console's reader thread, which must never die (qemu's console would no longer be
    drained, and the boot would end as a timeout); the step's own test reads the output again."""
    if invalid is None:
        return None
    try:
        return invalid(name, output)
    except Exception as err:  # noqa: BLE001 - any reader's error, said and survived
        say(f"{name}: its output could not be judged ({type(err).__name__}: {err}); it stands")
        return None


def quiet_judge(load: HostLoad, budget_s: float = QUIET_WAIT_BUDGET_S, invalid=None):
    """The host's answer to a measured step: run it again if the hypervisor withheld the CPU
    while it ran (the experiments' STEAL_HIGH_PCT) or invalid(step, output) names another sign
    that the guest, not what the step tests, set the result; once a spell of steal has passed
    (at most budget_s of waiting per boot). Under TCG the guest's every packet is the host's
    CPU, so such a step measured the host (docs/kernel.md)."""
    left = [budget_s]

    def judge(name: str, window: tuple[float, float], output: str = "") -> bool:
        pct = load.steal_pct(*window)
        why = f"the hypervisor stole {pct:.0f} % of the CPU" if is_disturbed(pct) else \
            _invalid_or_none(invalid, name, output)
        if not why:
            return False
        quiet, waited = wait_for_quiet_host(left[0]) if left[0] > 0 else (False, 0.0)
        left[0] -= waited
        say(f"{name}: {why}; running it again "
            + (f"after {waited:.0f} s, the host quiet" if quiet else
               f"at once, the host still busy after {waited:.0f} s ({max(left[0], 0):.0f} s of waiting left)"))
        return True
    return judge


STEP_MARK = re.compile(rb"^@@(BEGIN|END|ASK) (\w+)(?: (\d+))?")
# A measured step (MEASURED) runs at most this many times.
MEASURE_TRIES = 3
# The guest's side: `measured NAME CMD...` is `step NAME CMD...` (which the script defines)
# followed by a question to the host on the console; while the host answers that the step ran
# on a disturbed host, it runs again. Without an answer (a host that does not judge)
# the step stands; the host may first wait for a spell of steal to pass (quiet_judge).
MEASURED = f"""measured() {{ n=$1; t=1
  while step "$@"; echo "@@ASK $n $t"; read -r -t {int(QUIET_WAIT_BUDGET_S) + 60} v && [ "$v" = @@AGAIN ] && [ $t -lt {MEASURE_TRIES} ]; do
    t=$((t+1)); done; }}
"""


def _boot(cmd: list[str], timeout_s: float, t0: float, judge=None) -> tuple[str, float, bool, dict]:
    """Run qemu until it exits or timeout_s passes; (its console, seconds, whether it timed
    out, {step: (begin, end)} in seconds after t0 as the step markers reached the host).
    judge(step, (begin, end), output) answers a measured step's question (MEASURED) before its
    last try: true to run it again."""
    t_start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    lines: list[bytes] = []
    times: dict[str, list[float]] = {}
    first_line: dict[str, int] = {}  # where each step's output starts in lines (its last try's)

    judging = [0.0]  # seconds spent in judge (waiting for a quiet host): the timeout grows by them

    def answer(name: str, tried: int) -> None:
        t = time.monotonic()  # a last try stands whatever the host was doing
        output = b"".join(lines[first_line.get(name, len(lines)):]).decode(errors="replace")
        again = judge is not None and name in times and tried < MEASURE_TRIES and \
            judge(name, tuple(times[name]), output.replace("\r\n", "\n"))
        judging[0] += time.monotonic() - t
        try:
            proc.stdin.write(b"@@AGAIN\n" if again else b"@@KEEP\n")
            proc.stdin.flush()
        except OSError:  # qemu has gone: nothing to answer
            pass

    def read() -> None:  # the console line by line, so that each step's window is known
        for line in proc.stdout:
            lines.append(line)
            m = STEP_MARK.match(line)
            if m and m.group(1) == b"ASK":
                answer(m.group(2).decode(), int(m.group(3) or MEASURE_TRIES))
            elif m:
                times.setdefault(m.group(2).decode(), [0.0, 0.0])[m.group(1) == b"END"] = time.monotonic() - t0
                if m.group(1) == b"BEGIN":
                    first_line[m.group(2).decode()] = len(lines)

    reader = threading.Thread(target=read, name="lab-console", daemon=True)
    reader.start()
    try:
        timed_out = not _exited_by(proc, lambda: t_start + timeout_s + judging[0])
    except BaseException:  # interrupted: qemu goes with us
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    reader.join()
    console = b"".join(lines).decode(errors="replace").replace("\r\n", "\n")
    steps = {name: (b, e) for name, (b, e) in times.items() if e >= b > 0}
    return console, time.monotonic() - t_start, timed_out, steps


def _exited_by(proc: subprocess.Popen, deadline) -> bool:
    """Wait for qemu until deadline() (a monotonic time it may move on); kill its process group
    if it has not exited by then. Whether it exited by itself."""
    while proc.poll() is None:
        left = deadline() - time.monotonic()
        if left <= 0:
            os.killpg(proc.pid, signal.SIGKILL)  # qemu and nothing else: its own session
            proc.wait()
            return False
        try:
            proc.wait(timeout=min(left, 5.0))
        except subprocess.TimeoutExpired:
            pass
    return True


def died_before_start(console: str, timed_out: bool) -> bool:
    """qemu ended by itself before /init started the script: the kernel panicked while booting.
    Nothing of a test has run then (extra modules load after the start mark), and under TCG a
    Debian kernel's boot dies now and then (seen once in about 50 boots of 7.3 here: a fault in
    the timer interrupt at a code address the kernel was patching, no module loaded yet), so the
    lab boots once more, saying so."""
    return not timed_out and START_MARK not in console


def last_line(console: str) -> str:
    lines = [x.strip() for x in console.splitlines() if x.strip()]
    return lines[-1][-160:] if lines else "no output"


# ---- a VM that stays up: commands over qemu's user network -------------------------

# The guest's address on qemu's user network, and the host as the guest sees it.
GUEST_IP, HOST_FROM_GUEST = "10.0.2.15", "10.0.2.2"
COMMAND_PORT = 7000  # the guest's command server (busybox nc -ll -e), forwarded to the host
COMMAND_END = "@@CKCD-CMD-END@@"
READY_MARK = "@@CKCD-VM-READY@@"

# One connection = one command: the server reads the script up to COMMAND_END, runs it with
# stdin closed, prints its exit status after a marker and hangs up. A background job must
# send its output to a file, or the connection stays open until the job ends.
SERVE = f"""#!/bin/busybox sh
f=/tmp/cmd.$$
: > $f
while IFS= read -r line; do [ "$line" = "{COMMAND_END}" ] && break; printf '%s\\n' "$line" >> $f; done
sh $f < /dev/null 2>&1
echo "{EXIT_MARK} $?@@"
rm -f $f
"""

BOOT = f"""modprobe virtio_pci && modprobe virtio_net || exit 1
$IP link set eth0 up && $IP addr add {GUEST_IP}/24 dev eth0 && $IP route add default via {HOST_FROM_GUEST} || exit 1
[ -x /lab/boot.sh ] && {{ sh /lab/boot.sh || exit 1; }}
echo "{READY_MARK}"
exec /bb/nc -ll -p {COMMAND_PORT} -e /lab/serve.sh
"""


class Vm:
    """The lab kernel booted once and kept up; `sh()` runs a script in it and returns
    (exit status, output). qemu's user network forwards host ports on 127.0.0.1 to the
    guest (`forwards`: host port -> guest port), and the guest reaches the host at
    10.0.2.2. The caller holds the lab lock; stop() (or the context manager) ends qemu
    by its PID."""

    def __init__(self, files: dict[str, str] | None = None, modules=DEFAULT_MODULES,
                 programs=HOST_PROGRAMS, data_files=(), forwards: dict[int, int] | None = None,
                 command_port: int = 17000, boot_script: str = "", memory_mb: int = 1024,
                 kernel: str | None = None, extra_modules=()):
        self.files, self.modules, self.programs, self.data_files = files or {}, modules, programs, data_files
        self.kernel, self.extra_modules = kernel, tuple(extra_modules)
        self.forwards = {command_port: COMMAND_PORT, **(forwards or {})}
        self.command_port, self.boot_script, self.memory_mb = command_port, boot_script, memory_mb
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="ckcd-vm-")
        self.console_path = os.path.join(self._tmp.name, "console.log")

    def start(self, timeout_s: float = 180.0) -> "Vm":
        initrd = os.path.join(self._tmp.name, "initrd.gz")
        entries = {"lab/serve.sh": SERVE, **({"lab/boot.sh": self.boot_script} if self.boot_script else {})}
        ver, kimage = _initrd(initrd, self.kernel, BOOT, self.modules, self.programs, self.data_files,
                              self.extra_modules, self.files, entries)
        fwd = ",".join(f"hostfwd=tcp:127.0.0.1:{h}-:{g}" for h, g in self.forwards.items())
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(self.memory_mb), "-smp", str(VCPUS), "-cpu", CPU,
               "-nographic", "-no-reboot", "-netdev", f"user,id=n0,{fwd}",
               "-device", "virtio-net-pci,netdev=n0",
               "-kernel", kimage, "-initrd", initrd,
               "-append", "console=ttyS0 panic=-1 oops=panic quiet loglevel=1"]
        for attempt in (1, 2):
            say(f"booting {ver} under qemu (TCG) with user networking, forwards {self.forwards}")
            self.t0 = time.monotonic()
            with open(self.console_path, "wb") as console:
                self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self._await_ready(time.monotonic() + timeout_s)
                break
            except RuntimeError:
                if attempt == 1 and self.proc.poll() is not None and died_before_start(self.console(), False):
                    say(f"the kernel died before the boot script started ({last_line(self.console())}): "
                        "booting once more")
                    continue
                self.stop()
                raise
            except BaseException:
                # an interrupted or failed boot (Ctrl-C, a test run stopped) must not leave qemu behind
                self.stop()
                raise
        say(f"VM up in {time.monotonic() - self.t0:.1f} s")
        return self

    def _await_ready(self, deadline: float) -> None:
        """Until the guest's command server answers; raises if qemu exits or time runs out."""
        while READY_MARK not in self.console():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.console()[-3000:]
                raise RuntimeError(f"the lab VM did not come up (qemu exit {self.proc.returncode}):\n{tail}")
            time.sleep(0.2)
        # qemu accepts on the forwarded port at once and resets the connection while nothing
        # listens in the guest yet: the VM is up when an empty command comes back.
        while True:
            try:
                if self.sh("true", timeout_s=10)[0] == 0:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the lab VM's command server does not answer")
            time.sleep(0.2)

    def console(self) -> str:
        with open(self.console_path, "rb") as f:
            return f.read().decode(errors="replace").replace("\r\n", "\n")

    def sh(self, script: str, timeout_s: float = 120.0) -> tuple[int | None, str]:
        """Run script in the guest; (exit status or None on timeout, its output)."""
        import socket
        with socket.create_connection(("127.0.0.1", self.command_port), timeout=10) as conn:
            conn.sendall((script.rstrip("\n") + f"\n{COMMAND_END}\n").encode())
            conn.settimeout(timeout_s)
            chunks = []
            try:
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    chunks.append(data)
            except socket.timeout:
                return None, b"".join(chunks).decode(errors="replace")
        out = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
        m = re.search(re.escape(EXIT_MARK) + r" (\d+)@@", out)
        return (int(m.group(1)) if m else None), out[:m.start()] if m else out

    def check(self, script: str, timeout_s: float = 120.0) -> str:
        """sh() that raises with the output when the script fails."""
        status, out = self.sh(script, timeout_s)
        if status != 0:
            raise RuntimeError(f"guest script failed ({status}):\n{script}\n---\n{out}")
        return out

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # qemu and nothing else: its own session
            self.proc.wait()
            say(f"VM stopped after {time.monotonic() - self.t0:.1f} s")

    def __enter__(self) -> "Vm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._tmp.cleanup()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("script", nargs="?", help="shell script to run inside the VM")
    ap.add_argument("--kernel", default=None, metavar="LINE|VERSION",
                    help=f"the kernel to boot: {', '.join(kernels.ALL_LINES)} (default {kernels.HOST_LINE}, the "
                         "installed headers'), or a whole version of one of these lines")
    ap.add_argument("--file", action="append", default=[], metavar="GUEST=HOST",
                    help="copy HOST into the guest at GUEST (e.g. lab/sch_ckcd.ko=datapath/kernel/build/sch_ckcd.ko)")
    ap.add_argument("--extra-module", action="append", default=[], metavar="PATH.ko",
                    help="an out-of-tree module built for that kernel, loaded (in the order given) before "
                         "the script runs; exit status 125 if it does not load")
    ap.add_argument("--sch-ckcd", action="store_true",
                    help="build sch_ckcd.ko for that kernel (DKMS) and the tc plugin, as /lab/sch_ckcd.ko "
                         "and /lab/q_ckcd.so")
    ap.add_argument("--print-kernel", action="store_true", help="print the version --kernel names, and exit")
    ap.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                    help="in-tree modules (and their dependencies) to put in the initramfs")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args(argv)
    files = dict(f.split("=", 1) for f in args.file)
    try:
        if args.print_kernel:
            print(kernels.resolve(args.kernel))
            return 0
        if not args.script:
            ap.error("a script is needed (or --print-kernel)")
        with open(args.script) as f:
            script = f.read()
        if args.sch_ckcd:
            ko, so = build_sch_ckcd(REPO, args.kernel)
            files.update({"lab/sch_ckcd.ko": ko, "lab/q_ckcd.so": so})
        from ovs_config.lablock import lab_lock  # one lab at a time: TCG takes a whole core
        with lab_lock():
            res = run(script, files, args.timeout, tuple(args.modules.split(",")), kernel=args.kernel,
                      extra_modules=args.extra_module)
    except (LabUnavailable, ValueError) as e:
        say(str(e))
        return 2
    print(res.output)
    return 124 if res.exit_status is None else res.exit_status


if __name__ == "__main__":
    sys.exit(main())
