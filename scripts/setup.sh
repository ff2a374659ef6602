#!/usr/bin/env bash
# make setup: everything ckcd-coex needs on a fresh Debian 12 machine.
# make test runs it with --tests: also what only the tests need (clang and its
# libFuzzer runtime, for the fuzz targets of datapath/fuzz/; qemu, busybox-static
# and the kernel headers for the kernel lab of tests/kernel/, which boots Debian's
# own kernel to load sch_ckcd.ko: our machines load no modules; prometheus, to
# scrape a lab's /metrics, and chromium with chromium-driver, to test the dashboard;
# dkms, to build sch_ckcd.ko as a DKMS package; debhelper, dh-dkms, dpkg-dev and lintian, to
# build and check the switch host's Debian packages (make deb); shellcheck, for the root-run scripts;
# strace, to read the tc plugin's netlink requests; slurmctld, slurmd, slurm-client and
# munge, for the single-node Slurm cluster tests/cluster starts to test cluster/sweep.sbatch;
# bpftool and libbpf-dev, to build and load the BPF congestion controls of datapath/bpf;
# mptcpd, whose mptcpize runs the lab's MPTCP flows; tshark, to read ckcd-link's packet captures;
# debootstrap, for the Debian 13 root in which the controller's tests run again under os-ken
# on Python 3.13, built once into /var/cache/ckcd-coex/trixie).
# Idempotent: each step checks before it acts, and a finished setup prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv
STAMP=$VENV/.ckcd-setup-stamp
APT_PACKAGES="openvswitch-switch mininet iperf3 ethtool iputils-ping tcpdump iproute2 procps psmisc
  build-essential python3-venv python3-dev python3-matplotlib"
TEST_APT_PACKAGES="clang libclang-rt-14-dev qemu-system-x86 busybox-static linux-headers-amd64 kmod xz-utils
  prometheus chromium chromium-driver dkms shellcheck strace slurmctld slurmd slurm-client munge debootstrap
  debhelper dh-dkms dpkg-dev lintian
  bpftool libbpf-dev
  mptcpd tshark"
[ "${1:-}" = "--tests" ] && APT_PACKAGES="$APT_PACKAGES $TEST_APT_PACKAGES"

die() { echo "setup: $*" >&2; exit 1; }
say() { echo "setup: $*"; }

[ "$(id -u)" = 0 ] || die "must run as root (Mininet, Open vSwitch and network namespaces need it): sudo make setup"
{ command -v apt-get >/dev/null && command -v dpkg-query >/dev/null; } \
  || die "needs Debian 12 (apt-get/dpkg-query not found); install the packages in scripts/setup.sh by hand"
[ -x /usr/bin/python3 ] || die "needs /usr/bin/python3 (Debian's python3): apt-get install python3"

# 1. Debian packages, only the missing ones.
missing=""
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  say "installing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed (no network to Debian's mirrors?)"
  # shellcheck disable=SC2086
  apt-get install -y -qq $missing >/tmp/ckcd-coex-apt.log 2>&1 \
    || die "apt-get install failed; see /tmp/ckcd-coex-apt.log"
fi
# Debian's package may have started a system OVS; we never use or stop it (the lab runs its own).
# Likewise munge's may have started a system munged: the test cluster runs its own (private key
# and socket), and slurmd and slurmctld's have nothing to run without an /etc/slurm/slurm.conf.

# 2. The venv: Debian's Python with system site packages, because Mininet lives there.
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -c 'import mininet.net' 2>/dev/null \
  || die "the venv cannot import Mininet; is the Debian package 'mininet' installed?"

# 3. Python packages under exact pins; redone only when the pins or setup.py change.
if [ ! -f "$STAMP" ] || [ requirements/constraints.txt -nt "$STAMP" ] || [ setup.py -nt "$STAMP" ]; then
  say "installing Python packages (Ryu 4.34 with pins, this package editable)"
  export PIP_CONSTRAINT=$ROOT/requirements/constraints.txt PIP_BUILD_CONSTRAINT=$ROOT/requirements/constraints.txt
  export PIP_DISABLE_PIP_VERSION_CHECK=1
  "$VENV/bin/pip" install -q -r requirements/dev.txt -e ".[ryu]" \
    || die "pip install failed (see above); the pins are in requirements/constraints.txt"
  touch "$STAMP"
fi

# 4. The eventlet shim, armed at interpreter start (see ryu_app/eventlet_shim.py).
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth="$site/ckcd_coex_eventlet_shim.pth"
want="$ROOT
import ryu_app.eventlet_shim as s; s.install()"
if [ ! -f "$pth" ] || [ "$(cat "$pth")" != "$want" ]; then
  printf '%s\n' "$want" > "$pth"
fi
"$VENV/bin/python" -c 'import ryu.app.wsgi' 2>/dev/null || die "ryu.app.wsgi does not import even with the shim"

# 5. The native datapath (make itself skips what is up to date).
make -s -C datapath all >/dev/null || die "building datapath/ failed: run 'make -C datapath' to see why"

# 6. With --tests: the cached Debian 13 root with os-ken (tests/platform/trixie.py; rebuilt only
#    when its package list or requirements/os-ken.txt change).
if [ "${1:-}" = "--tests" ]; then
  "$VENV/bin/python" -m tests.platform.trixie ensure >/dev/null || die "building the trixie root failed (see above)"
fi

say "ready (.venv, Ryu 4.34, datapath built)"
