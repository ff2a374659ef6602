#!/usr/bin/env bash
# make deb: the switch host's Debian packages, built from this checkout with debhelper.
#
#   sch-ckcd-dkms      (all)  the module's sources under /usr/src/sch_ckcd-<version>, built by DKMS
#   ckcd-tc-plugin     (any)  q_ckcd.so where Debian's tc loads plugins, /usr/lib/<multiarch>/tc
#   ckcd-qdisc-agent   (all)  the agent in /usr/sbin, its systemd unit, /etc/default/ckcd-qdisc-agent
#
# The version is VERSION's, and debian/changelog is written from it and CHANGELOG.md's entry
# for it, so the version lives in one file. The build runs in a staged copy (the tracked tree
# is never written) and needs no network: the plugin's tc headers come from an unpacked
# iproute2 source tree of the tc the packages are for (IPROUTE2_SRC; by default the kernel
# lab's cached one for the installed iproute2, which `make test` fetches).
#
#   scripts/deb.sh [--out DIR]     packages, .buildinfo and .changes into DIR (default dist/deb)
set -euo pipefail
cd "$(dirname "$0")/.."
umask 022  # the staged copy's modes, whoever runs it

die() { echo "deb.sh: $*" >&2; exit 1; }
say() { echo "deb.sh: $*"; }

out=dist/deb
while [ $# -gt 0 ]; do
  case $1 in
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (--help lists them)" ;;
  esac
  shift
done

for tool in dpkg-buildpackage dh dh_dkms; do
  command -v "$tool" >/dev/null || die "$tool not found: apt-get install debhelper dh-dkms dpkg-dev"
done

# A native package's version: no Debian revision (no '-'), as dpkg and DKMS take it.
version=$(head -n 1 VERSION)
[[ $version =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || die "VERSION does not hold a version a native package can take: '$version'"

# tc's headers: the tree's tc/tc_util.h and include/, and include/version.h for the version
# the plugin's dependency names (debian/rules).
if [ -z "${IPROUTE2_SRC:-}" ]; then
  installed=$(dpkg-query -W -f='${Version}' iproute2 2>/dev/null) || die "iproute2 is not installed"
  upstream=${installed#*:}
  upstream=${upstream%-*}
  IPROUTE2_SRC=${CKCD_KERNEL_LAB_DIR:-/var/cache/ckcd-coex/kernel-lab}/apt-src/src/iproute2-$upstream
fi
if [ ! -f "$IPROUTE2_SRC/tc/tc_util.h" ] || [ ! -f "$IPROUTE2_SRC/include/version.h" ]; then
  die "no iproute2 source tree at '$IPROUTE2_SRC' (tc/tc_util.h): unpack the installed iproute2's
  source (apt-get source iproute2, with a deb-src line) and set IPROUTE2_SRC to it"
fi

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
src=$work/ckcd-coex-$version

# The staged tree: what debian/rules builds from, nothing else (no build/ left by a lab).
mkdir -p "$src/datapath" "$src/iproute2/tc"
cp -R debian VERSION CHANGELOG.md "$src/"
cp -R datapath/core "$src/datapath/"
cp -R datapath/kernel "$src/datapath/"
rm -rf -- "$src/datapath/kernel/build"
cp -R "$IPROUTE2_SRC/include" "$src/iproute2/"
cp "$IPROUTE2_SRC"/tc/*.h "$src/iproute2/tc/"

bash scripts/deb-changelog.sh "$version" CHANGELOG.md debian/control > "$src/debian/changelog" \
  || die "cannot write debian/changelog for $version (above)"

say "building $version in $src"
log=$out/ckcd-coex_${version}_build.log
if ! (cd "$src" && dpkg-buildpackage --build=binary --no-sign) > "$log" 2>&1; then
  tail -n 60 "$log" >&2
  die "dpkg-buildpackage failed: the end of $log is above"
fi

# dpkg-buildpackage writes beside the tree: the packages (and the plugin's -dbgsym), the
# .buildinfo and the .changes that names them all.
find "$work" -maxdepth 1 -type f \( -name '*.deb' -o -name '*.buildinfo' -o -name '*.changes' \) \
  -exec mv -f -t "$out" -- {} +
say "built into $out:"
(cd "$out" && ls -1 -- *_"$version"_*.deb)
