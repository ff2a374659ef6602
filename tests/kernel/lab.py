"""The kernel lab: boot Debian 12's own kernel under qemu and run a shell script in it.

Our machines load no kernel modules (docs/kernel.md, "The kernel lab"), but qemu can boot a
real kernel that does. This module fetches the linux-image package matching the installed
linux-headers (so a module built against those headers loads), unpacks it into a cache
outside the repository (never installs it: that would run initramfs and bootloader
hooks), builds a busybox-static initramfs holding the host's own tc, ip and kmod with the
libraries ldd names and the in-tree modules a test asks for, and boots it under TCG.

Everything is cached and rebuilt only when missing, so a second run costs only the boot.
One run = one boot: the guest runs the given script, prints its exit status between
markers on the serial console, and powers off; on timeout the host kills qemu by PID.
Vm instead keeps one boot up with qemu's user network: the host sends it scripts through a
forwarded port while host programs (the controller) talk to the guest's services
(tests/kernel/ovs_lab.py, the switch host).

    python -m tests.kernel.lab script.sh [--file GUEST=HOST ...] [--modules sch_htb,veth]
"""

import argparse
import dataclasses
import glob
import gzip
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import zlib

CACHE_DIR = os.environ.get("CKCD_KERNEL_LAB_DIR", "/var/cache/ckcd-coex/kernel-lab")
# What every lab boot can load; their dependencies come along (modules.dep closure).
# netem delays the ACK path for the TCP tests (an RTT), tcp_bbr is BBR (cubic is built in).
DEFAULT_MODULES = ("veth", "sch_htb", "sch_choke", "sch_codel", "sch_red", "sch_sfb", "sch_netem", "tcp_bbr")  # fq_codel built in
# Host programs copied into the guest with their libraries. Busybox runs its own tc/ip
# applets before files on PATH: guest scripts call these by full path ($TC, $IP).
# ethtool turns the veths' offloads off, so a qdisc's packet limit counts MTU frames (docs/architecture.md).
# Two vCPUs, each a host thread of qemu's multi-threaded TCG: the guest's senders, receivers and
# softirqs (OVS, HTB, the qdisc under test) run on both host cores. With one, a host CPU about half
# as fast as the one the traffic tests were tuned on could not fill their 20 Mbit/s links (13 of
# 15.3 Mbit/s, measured on an Intel Xeon at 2.5 GHz against an AMD EPYC's 18-19).
VCPUS = 2
HOST_PROGRAMS = ("/usr/sbin/tc", "/usr/sbin/ip", "/usr/bin/kmod", "/usr/bin/iperf3", "/usr/sbin/ethtool")
BUSYBOX = "/bin/busybox"
EXIT_MARK = "@@CKCD-LAB-EXIT"
START_MARK = "@@CKCD-LAB-START@@"
# Bump when the initramfs layout or /init changes, so cached ones are rebuilt.
INITRAMFS_LAYOUT = 3


def say(msg: str) -> None:
    print(f"kernel-lab: {msg}", file=sys.stderr, flush=True)


class LabUnavailable(RuntimeError):
    """A prerequisite is missing; the message says which and how to get it."""


def kernel_version() -> str:
    """The version of the installed linux-headers (the module is built against it)."""
    env = os.environ.get("CKCD_KERNEL_VERSION")
    if env:
        return env
    # the newest ABI, compared as numbers ("6.1.0-56" after "6.1.0-9"), as linux-headers-amd64 tracks it
    found = sorted((os.path.basename(p)[len("linux-headers-"):]
                    for p in glob.glob("/usr/src/linux-headers-*-amd64")),
                   key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
    if not found:
        raise LabUnavailable("no /usr/src/linux-headers-*-amd64: apt-get install linux-headers-amd64 "
                             "(make setup-tests does)")
    return found[-1]


def headers_dir(ver: str) -> str:
    return f"/usr/src/linux-headers-{ver}"


def check_prerequisites() -> None:
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
    kernel_version()


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def ensure_image(ver: str) -> str:
    """Unpack linux-image-<ver> into the cache; return its root (has boot/, lib/modules/)."""
    root = os.path.join(CACHE_DIR, f"linux-image-{ver}")
    stamp = os.path.join(root, ".ckcd-unpacked")
    if os.path.exists(stamp):
        return root
    debs = os.path.join(CACHE_DIR, "debs")
    os.makedirs(debs, exist_ok=True)
    pattern = os.path.join(debs, f"linux-image-{ver}_*.deb")
    if not glob.glob(pattern):
        say(f"downloading linux-image-{ver} (apt-get download; not installed)")
        try:
            _run(["apt-get", "download", f"linux-image-{ver}"], cwd=debs)
        except subprocess.CalledProcessError as e:
            raise LabUnavailable(f"apt-get download linux-image-{ver} failed: {e.stderr.strip()[-300:]}")
    deb = sorted(glob.glob(pattern))[-1]
    say(f"unpacking {os.path.basename(deb)}")
    shutil.rmtree(root, ignore_errors=True)
    _run(["dpkg-deb", "-x", deb, root])
    # The package ships no modules.dep; the guest's modprobe needs one.
    _run(["depmod", "-b", root, ver])
    open(stamp, "w").close()
    return root


def vmlinuz(root: str, ver: str) -> str:
    return os.path.join(root, "boot", f"vmlinuz-{ver}")


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
    out: list[str] = []
    todo = []
    for n in names:
        if n.replace("-", "_") not in by_name:
            raise LabUnavailable(f"module {n} not in linux-image's modules.dep")
        todo.append(by_name[n.replace("-", "_")])
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
    base = os.path.join(CACHE_DIR, "apt-src")
    tree = os.path.join(base, "src", f"iproute2-{upstream}")
    if os.path.exists(os.path.join(tree, "tc", "tc_util.h")):
        return tree
    os.makedirs(os.path.join(base, "lists", "partial"), exist_ok=True)
    os.makedirs(os.path.join(base, "src"), exist_ok=True)
    with open(os.path.join(base, "sources.list"), "w") as f:
        f.write("deb-src http://deb.debian.org/debian bookworm main\n"
                "deb-src http://deb.debian.org/debian-security bookworm-security main\n")
    opts = ["-o", f"Dir::Etc::SourceList={base}/sources.list", "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={base}/lists"]
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


def build_sch_ckcd(repo: str) -> tuple[str, str]:
    """Build sch_ckcd.ko with DKMS, as `make dkms` does on a switch host, and q_ckcd.so from
    datapath/kernel; return their paths.

    scripts/dkms.sh --build-only registers this checkout's sources as sch_ckcd/<version> (the
    version hashes them, so the tree DKMS builds is always the one under test) and builds it
    for kernel_version(); the module is copied to datapath/kernel/build/dkms/sch_ckcd.ko, then
    the registration and /usr/src/sch_ckcd-<version> are removed again: a version left
    registered would be built and installed by DKMS for every kernel installed later (unless
    it was installed before this call: an operator's, left alone). A rebuild costs about 6 s,
    so none is skipped. DKMS signs with a throwaway key in a temporary directory (it reads
    mok_signing_key and mok_certificate from the environment), so no /var/lib/dkms/mok.key
    is created. One build at a time across checkouts (a lock file), at make -j1."""
    import fcntl

    kdir = os.path.join(repo, "datapath", "kernel")
    script = os.path.join(repo, "scripts", "dkms.sh")
    kver = kernel_version()
    src = ensure_iproute2_src()
    res = subprocess.run(["make", "-s", "-C", kdir, "plugin", f"IPROUTE2_SRC={src}"], text=True, capture_output=True)
    if res.returncode:
        raise RuntimeError(f"make plugin in datapath/kernel failed:\n{res.stdout}{res.stderr}")
    if shutil.which("dkms") is None:
        raise LabUnavailable("dkms not found: apt-get install dkms (make setup-tests does)")
    version = _run(["bash", script, "--print-version"]).stdout.strip()
    if not re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+~-]*", version):
        raise RuntimeError(f"scripts/dkms.sh --print-version gave {version!r}")
    arch = os.uname().machine
    built = os.path.join("/var/lib/dkms", "sch_ckcd", version, kver, arch, "module", "sch_ckcd.ko")
    out = os.path.join(kdir, "build", "dkms", "sch_ckcd.ko")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    os.makedirs("/run/lock", exist_ok=True)
    with open("/run/lock/ckcd-coex-dkms-tests.lock", "w") as lock, tempfile.TemporaryDirectory() as keys:
        fcntl.flock(lock, fcntl.LOCK_EX)
        status = subprocess.run(["dkms", "status", "-m", "sch_ckcd", "-v", version], text=True,
                                capture_output=True).stdout
        operators = ": installed" in status
        env = dict(os.environ, mok_signing_key=os.path.join(keys, "mok.key"),
                   mok_certificate=os.path.join(keys, "mok.pub"))
        try:
            res = subprocess.run(["bash", script, "--build-only", "-k", kver, "-j", "1"], text=True,
                                 capture_output=True, env=env, timeout=900)
            if res.returncode or not os.path.exists(built):
                log = os.path.join("/var/lib/dkms", "sch_ckcd", version, "build", "make.log")
                tail = open(log).read()[-3000:] if os.path.exists(log) else ""
                raise RuntimeError(f"scripts/dkms.sh --build-only -k {kver} failed (exit {res.returncode}):\n"
                                   f"{res.stdout}{res.stderr}{tail}")
            shutil.copyfile(built, out + ".tmp")
            os.replace(out + ".tmp", out)
        finally:
            if not operators:
                subprocess.run(["dkms", "remove", "-m", "sch_ckcd", "-v", version, "--all"],
                               capture_output=True)
                shutil.rmtree(os.path.join("/usr/src", f"sch_ckcd-{version}"), ignore_errors=True)
    return out, os.path.join(kdir, "build", "q_ckcd.so")


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


def run(script: str, files: dict[str, str] | None = None, timeout_s: float = 240.0,
        modules=DEFAULT_MODULES, memory_mb: int = 1024) -> LabResult:
    """Boot the lab VM, run script (shell text) as /lab/script.sh, return its result.

    files maps guest paths (relative to /, e.g. "lab/sch_ckcd.ko") to host files.
    """
    check_prerequisites()
    ver = kernel_version()
    root = ensure_image(ver)
    base = ensure_base_initramfs(ver, modules)
    extra = Cpio()
    extra.add_bytes("lab/script.sh", script.encode())
    for guest, host in (files or {}).items():
        extra.add_file(guest, host)
    with tempfile.TemporaryDirectory(prefix="ckcd-lab-") as tmp:
        initrd = os.path.join(tmp, "initrd.gz")
        with open(initrd, "wb") as f, open(base, "rb") as b:
            shutil.copyfileobj(b, f)
            f.write(extra.gz())
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(memory_mb), "-smp", str(VCPUS),
               "-nographic", "-no-reboot", "-nic", "none",
               "-kernel", vmlinuz(root, ver), "-initrd", initrd,
               "-append", "console=ttyS0 panic=-1 oops=panic quiet loglevel=1"]
        say(f"booting {ver} under qemu (TCG), timeout {timeout_s:.0f} s")
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            raw, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # qemu and nothing else: its own session
            raw, _ = proc.communicate()
        except BaseException:  # interrupted: qemu goes with us
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        seconds = time.monotonic() - t0
    console = raw.decode(errors="replace").replace("\r\n", "\n")
    status = None
    m = re.search(re.escape(EXIT_MARK) + r" (\d+)@@", console)
    if m:
        status = int(m.group(1))
    start = console.find(START_MARK)
    body = console[start + len(START_MARK):] if start >= 0 else console
    body = body[:m.start() - (start + len(START_MARK))] if (m and start >= 0) else body
    say(f"VM done in {seconds:.1f} s, script exit {status}{' (TIMEOUT)' if timed_out else ''}")
    return LabResult(status, body.strip("\n"), console, seconds, timed_out)


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
                 command_port: int = 17000, boot_script: str = "", memory_mb: int = 1024):
        self.files, self.modules, self.programs, self.data_files = files or {}, modules, programs, data_files
        self.forwards = {command_port: COMMAND_PORT, **(forwards or {})}
        self.command_port, self.boot_script, self.memory_mb = command_port, boot_script, memory_mb
        self.proc: subprocess.Popen | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="ckcd-vm-")
        self.console_path = os.path.join(self._tmp.name, "console.log")

    def start(self, timeout_s: float = 180.0) -> "Vm":
        check_prerequisites()
        ver = kernel_version()
        root = ensure_image(ver)
        base = ensure_base_initramfs(ver, self.modules, self.programs, self.data_files)
        extra = Cpio()
        extra.add_bytes("lab/script.sh", BOOT.encode())
        extra.add_bytes("lab/serve.sh", SERVE.encode())
        if self.boot_script:
            extra.add_bytes("lab/boot.sh", self.boot_script.encode())
        for guest, host in self.files.items():
            extra.add_file(guest, host)
        initrd = os.path.join(self._tmp.name, "initrd.gz")
        with open(initrd, "wb") as f, open(base, "rb") as b:
            shutil.copyfileobj(b, f)
            f.write(extra.gz())
        fwd = ",".join(f"hostfwd=tcp:127.0.0.1:{h}-:{g}" for h, g in self.forwards.items())
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", str(self.memory_mb), "-smp", str(VCPUS),
               "-nographic", "-no-reboot", "-netdev", f"user,id=n0,{fwd}",
               "-device", "virtio-net-pci,netdev=n0",
               "-kernel", vmlinuz(root, ver), "-initrd", initrd,
               "-append", "console=ttyS0 panic=-1 oops=panic quiet loglevel=1"]
        say(f"booting {ver} under qemu (TCG) with user networking, forwards {self.forwards}")
        self.t0 = time.monotonic()
        with open(self.console_path, "wb") as console:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=console,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._await_ready(time.monotonic() + timeout_s)
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
    ap.add_argument("script", help="shell script to run inside the VM")
    ap.add_argument("--file", action="append", default=[], metavar="GUEST=HOST",
                    help="copy HOST into the guest at GUEST (e.g. lab/sch_ckcd.ko=datapath/kernel/build/sch_ckcd.ko)")
    ap.add_argument("--modules", default=",".join(DEFAULT_MODULES),
                    help="in-tree modules (and their dependencies) to put in the initramfs")
    ap.add_argument("--timeout", type=float, default=240.0)
    args = ap.parse_args(argv)
    files = dict(f.split("=", 1) for f in args.file)
    with open(args.script) as f:
        script = f.read()
    from ovs_config.lablock import lab_lock  # one lab at a time: TCG takes a whole core
    try:
        with lab_lock():
            res = run(script, files, args.timeout, tuple(args.modules.split(",")))
    except LabUnavailable as e:
        say(str(e))
        return 2
    print(res.output)
    return 124 if res.exit_status is None else res.exit_status


if __name__ == "__main__":
    sys.exit(main())
