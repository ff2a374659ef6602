#!/usr/bin/env bash
# make dkms: sch_ckcd.ko as a DKMS package on a switch host, as root. Copies exactly the
# module's sources (datapath/kernel's module files, datapath/core) into
# /usr/src/sch_ckcd-<version>/, then `dkms add`, `dkms build` and `dkms install` for the
# running kernel; DKMS rebuilds it for every kernel installed later (AUTOINSTALL).
#
# The version is VERSION's plus a hash of the copied files (0.1.0+1a2b3c4d5e6f): one version
# names one source tree, with or without git, so a second run with the same sources finds
# everything done and does nothing, and changed sources become a new version, never a
# silent overwrite. Installing a version removes the other registered versions (one
# sch_ckcd per host).
#
#   scripts/dkms.sh                       add, build and install for the running kernel
#   scripts/dkms.sh --build-only -k KVER  add and build for KVER only (nothing installed)
#   scripts/dkms.sh --remove              remove every sch_ckcd version from DKMS and /usr/src
#   scripts/dkms.sh --print-version       the version these sources get (needs no root)
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=sch_ckcd
VERSION_RE='^[0-9A-Za-z][0-9A-Za-z.+~-]*$'
usage() {
  cat <<EOF
usage: $0 [--build-only] [-k KVER] [-j JOBS] [--version V [--replace]] | --remove | --print-version
  --build-only     dkms add and build, no install (the tests use this)
  -k KVER          the kernel to build for (default: the running one, $(uname -r))
  -j JOBS          parallel make jobs for the build (default: DKMS's, one per CPU)
  --version V      use V instead of VERSION's version + the sources' hash
  --replace        if V is registered with other sources, remove it first (else: refuse)
  --remove         remove every registered $NAME version and its /usr/src tree
  --print-version  print the version these sources get, and exit
EOF
}
die() { echo "dkms.sh: $*" >&2; exit 1; }
say() { echo "dkms.sh: $*"; }

mode=install kver=$(uname -r) jobs="" version="" replace=no
while [ $# -gt 0 ]; do
  case $1 in
    --build-only) mode=build ;;
    --remove) mode=remove ;;
    --print-version) mode=print ;;
    --replace) replace=yes ;;
    -k) [ $# -ge 2 ] || die "-k needs a kernel version"; kver=$2; shift ;;
    -j) [ $# -ge 2 ] || die "-j needs a number"; jobs=$2; shift ;;
    --version) [ $# -ge 2 ] || die "--version needs a value"; version=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument: $1" ;;
  esac
  shift
done
[[ $kver =~ $VERSION_RE ]] || die "not a kernel version: '$kver'"
[ -z "$jobs" ] || [[ $jobs =~ ^[1-9][0-9]*$ ]] || die "-j wants a positive number, not '$jobs'"

# Stage the tree the version names (also for --print-version: the hash needs it).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make -s -C datapath/kernel dkms-tree DEST="$stage/tree" >/dev/null \
  || die "make -C datapath/kernel dkms-tree failed"
chmod -R u=rwX,go=rX "$stage/tree"
if [ -z "$version" ]; then
  base=$(head -n 1 VERSION)
  [[ $base =~ $VERSION_RE ]] || die "VERSION does not hold a version: '$base'"
  hash=$(cd "$stage/tree" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum)
  version=$base+${hash:0:12}
fi
[[ $version =~ $VERSION_RE ]] || die "not a version DKMS and a path can take: '$version'"
if [ "$mode" = print ]; then echo "$version"; exit 0; fi

[ "$(id -u)" = 0 ] || die "must run as root (DKMS writes /usr/src, /var/lib/dkms, /lib/modules)"
command -v dkms >/dev/null || die "dkms not found: apt-get install dkms"

exec 9>"/run/$NAME-dkms.lock"  # root's /run: a user cannot hold or plant it, as in /run/lock
flock -n 9 || { say "waiting for another run of this script"; flock 9; }

# The versions DKMS has registered ("name/version, kernel, arch: state" or "name/version: added";
# DKMS before 2.8 wrote "name, version, ...").
registered() { dkms status -m "$NAME" 2>/dev/null | sed -E -n "s#^$NAME(/|, )([^,:]+)[,:].*#\\2#p" | sort -u; }
is_registered() { registered | grep -qxF -- "$1"; }
state() { dkms status -m "$NAME" -v "$1" -k "$2" 2>/dev/null; }
# A version the Debian package sch-ckcd-dkms installed (make deb) is dpkg's: its tree is the
# package's files and its registration comes and goes with the package, so this script
# neither removes nor replaces it.
packaged() { command -v dpkg-query >/dev/null && dpkg-query -S "/usr/src/$NAME-$1" >/dev/null 2>&1; }
# Unregister one version and delete its tree; $1 is checked against VERSION_RE first, and
# the tree must be one of ours (its dkms.conf names the package) and not the package's.
remove_version() {
  local v=$1 dir
  [[ $v =~ $VERSION_RE ]] || die "refusing to remove a version named '$v'"
  ! packaged "$v" || die "$NAME/$v belongs to the Debian package sch-ckcd-dkms: apt-get purge sch-ckcd-dkms removes it"
  dir=/usr/src/$NAME-$v
  if is_registered "$v"; then say "dkms remove $NAME/$v --all"; dkms remove -m "$NAME" -v "$v" --all >/dev/null; fi
  if [ -d "$dir" ] && grep -qx "PACKAGE_NAME=\"$NAME\"" "$dir/dkms.conf" 2>/dev/null; then rm -rf -- "$dir"; fi
}

if [ "$mode" = remove ]; then
  found=""
  for v in $(registered); do
    if packaged "$v"; then say "leaving $NAME/$v: the Debian package sch-ckcd-dkms's (apt-get purge sch-ckcd-dkms)"
    else found="$found$v "; remove_version "$v"; fi
  done
  for dir in /usr/src/"$NAME"-*; do
    [ -d "$dir" ] && ! packaged "${dir#/usr/src/"$NAME"-}" && remove_version "${dir#/usr/src/"$NAME"-}"
  done
  say "removed ${found:-nothing registered }from DKMS and /usr/src; a loaded module stays until rmmod $NAME (after its qdiscs are deleted)"
  exit 0
fi

# Installing removes every other version (one sch_ckcd per host): not the package's.
if [ "$mode" = install ]; then
  for v in $(registered); do
    ! packaged "$v" || die "$NAME/$v is installed by the Debian package sch-ckcd-dkms: upgrade that" \
      "package (make deb) instead, or apt-get purge sch-ckcd-dkms before make dkms (one $NAME per host)"
  done
fi

[ -e "/lib/modules/$kver/build/Makefile" ] \
  || die "no kernel headers for $kver (/lib/modules/$kver/build): apt-get install linux-headers-$kver"
sed -i "s/@VERSION@/$version/" "$stage/tree/dkms.conf"
grep -qx "PACKAGE_VERSION=\"$version\"" "$stage/tree/dkms.conf" || die "dkms.conf has no PACKAGE_VERSION=\"@VERSION@\" line"

# The tree under /usr/src: reused when identical, else replaced only when asked.
dest=/usr/src/$NAME-$version
if [ -e "$dest" ] || is_registered "$version"; then
  if [ -d "$dest" ] && diff -r -q "$stage/tree" "$dest" >/dev/null 2>&1; then
    :
  elif [ ! -e "$dest" ]; then
    say "$NAME/$version is registered but $dest is gone: registering it again"
    remove_version "$version"
  elif [ "$replace" = yes ]; then
    say "$dest holds other sources: removing $NAME/$version first (--replace)"
    remove_version "$version"
    [ ! -e "$dest" ] || die "$dest is not a $NAME DKMS tree (no dkms.conf naming it): move it away"
  else
    die "$dest holds other sources than these under the same version: rerun with --replace to remove" \
        "$NAME/$version and install these, or remove it yourself (dkms remove $NAME/$version --all; rm -r $dest)"
  fi
fi
if [ ! -d "$dest" ]; then
  say "copying the sources into $dest"
  rm -rf -- "$dest.new"
  cp -R --preserve=timestamps "$stage/tree" "$dest.new"
  mv -- "$dest.new" "$dest"
fi

is_registered "$version" || dkms add -m "$NAME" -v "$version"
if ! state "$version" "$kver" | grep -Eq ': (built|installed)'; then
  say "building $NAME/$version for $kver (dkms build)"
  dkms build -m "$NAME" -v "$version" -k "$kver" ${jobs:+-j "$jobs"} \
    || die "dkms build failed: see /var/lib/dkms/$NAME/$version/build/make.log"
fi
arch=$(uname -m)
if [ "$mode" = build ]; then
  say "built: /var/lib/dkms/$NAME/$version/$kver/$arch/module/ (not installed)"
  exit 0
fi

for v in $(registered); do
  [ "$v" = "$version" ] || remove_version "$v"
done
if ! state "$version" "$kver" | grep -q ': installed'; then
  dkms install -m "$NAME" -v "$version" -k "$kver" ${jobs:+-j "$jobs"}
fi
say "installed $NAME/$version for $kver: $(modinfo -k "$kver" -n "$NAME")"
say "load it: modprobe $NAME; the tc plugin and the agent: docs/real-switches.md, \"On each switch host\""
