"""The switch host's Debian packages (`make deb`, scripts/deb.sh): built, checked by lintian,
installed, upgraded and purged in a throwaway Debian 13 root.

The rules, each named in the test that checks it:
- the packages carry VERSION's version and hold what docs/real-switches.md says they hold;
- lintian finds no error or warning (each override is justified in its file);
- installing builds sch_ckcd with DKMS for the root's one kernel, puts q_ckcd.so where that
  root's tc finds plugins, installs the agent and its unit, enables the unit and does not
  start it in a chroot;
- an upgrade leaves DKMS with the new version only, the new agent, and the operator's
  /etc/default file as the operator left it;
- a purge leaves nothing behind.

The packages are built on this machine (Debian 12) and installed into an overlay over the
cached trixie root (tests/platform/trixie.py; nothing persists). The second version is a copy
of the sources with VERSION bumped, a CHANGELOG.md entry for it and one line added to the
agent, so the upgraded agent can be told from the first. Every command in the root runs with
a private tmpfs on /run, so no systemd is ever reached from it (the host's /run is bound into
the root otherwise): debhelper's snippets see no /run/systemd/system and neither reload nor
start a unit, and /usr/sbin/policy-rc.d exits 101, as in any chroot, so invoke-rc.d and
deb-systemd-invoke start nothing either. DKMS builds for exactly one kernel: the headers
linux-headers-amd64 pulls; any other kernel's packages are purged from the overlay first.
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO
from tests.platform import trixie

pytestmark = pytest.mark.lab  # needs root: an overlay mount, chroot, dpkg and DKMS in it

PACKAGES = ("sch-ckcd-dkms", "ckcd-tc-plugin", "ckcd-qdisc-agent")
MULTIARCH = "x86_64-linux-gnu"
PLUGIN = f"/usr/lib/{MULTIARCH}/tc/q_ckcd.so"
AGENT = "/usr/sbin/ckcd-qdisc-agent"
DEFAULTS = "/etc/default/ckcd-qdisc-agent"
UNIT = "ckcd-qdisc-agent.service"
# The parts of the checkout scripts/deb.sh builds from, copied for the second version.
SOURCES = ("scripts/deb.sh", "scripts/deb-changelog.sh", "VERSION", "CHANGELOG.md", "debian",
           "datapath/kernel", "datapath/core")
# Debian's own chroot convention: "action forbidden by policy", so nothing is started.
POLICY_RC_D = "#!/bin/sh\n# a chroot: start no service\nexit 101\n"
# Run inside the root: a private /run (mount namespace of trixie.command) hides the host's.
PRIVATE_RUN = 'mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/lock && exec "$@"'
ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C",
       "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root"}


def sh(*argv, cwd=REPO, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), cwd=cwd, env=env, text=True, capture_output=True, timeout=timeout)


def inside(root: str, *argv, cwd: str, timeout=900) -> subprocess.CompletedProcess:
    """argv in the root, with a private /run and a clean environment (no TC_LIB_DIR)."""
    cmd = trixie.command(["sh", "-c", PRIVATE_RUN, "sh", *argv], cwd=cwd, root=root)
    return subprocess.run(cmd, env=ENV, text=True, capture_output=True, timeout=timeout)


def must(res: subprocess.CompletedProcess, what: str) -> str:
    if res.returncode != 0:
        pytest.fail(f"{what} failed (exit {res.returncode}):\n{res.stdout[-4000:]}\n{res.stderr[-4000:]}")
    return res.stdout


# --- building ------------------------------------------------------------------------------------

@dataclasses.dataclass
class Build:
    version: str
    out: str
    agent: str  # the agent script the packages were built from

    def deb(self, package: str) -> str:
        found = glob.glob(os.path.join(self.out, f"{package}_{self.version}_*.deb"))
        assert len(found) == 1, (package, os.listdir(self.out))
        return found[0]


def iproute2_headers() -> str:
    """The installed iproute2's unpacked source (tc's plugin headers), as the kernel lab caches it."""
    from tests.kernel import lab
    try:
        return lab.ensure_iproute2_src()
    except lab.LabUnavailable as e:
        pytest.fail(f"iproute2 source for the plugin's headers: {e}")


def build(src_root: str, out: str, iproute2: str) -> Build:
    res = sh("bash", os.path.join(src_root, "scripts", "deb.sh"), "--out", out,
             env=dict(os.environ, IPROUTE2_SRC=iproute2))
    must(res, f"scripts/deb.sh in {src_root}")
    with open(os.path.join(src_root, "VERSION")) as f:
        version = f.read().split()[0]
    return Build(version, out, os.path.join(src_root, "datapath", "kernel", "ckcd-qdisc-agent"))


def next_version_sources(dest: str, version: str) -> str:
    """A copy of the sources as the next release would have them: VERSION bumped, its
    CHANGELOG.md entry, and the agent changed by one comment line."""
    for part in SOURCES:
        src, dst = os.path.join(REPO, part), os.path.join(dest, part)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.isdir(src):
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build"))
        else:
            shutil.copy(src, dst)
    bumped = f"{version}+upgrade1"
    with open(os.path.join(dest, "VERSION"), "w") as f:
        f.write(bumped + "\n")
    path = os.path.join(dest, "CHANGELOG.md")
    with open(path) as f:
        text = f.read()
    entry = f"## {bumped} — {datetime.date.today().isoformat()}\n\n### Changed\n- The upgrade test's release.\n\n"
    at = text.index("\n## ") + 1
    with open(path, "w") as f:
        f.write(text[:at] + entry + text[at:])
    with open(os.path.join(dest, "datapath", "kernel", "ckcd-qdisc-agent"), "a") as f:
        f.write("# the upgrade test's release\n")
    return dest


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> tuple[Build, Build]:
    """This checkout's packages and the next version's, built as `make deb` builds them."""
    for tool in ("dpkg-buildpackage", "dh", "dh_dkms", "lintian"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} not found: apt-get install debhelper dh-dkms dpkg-dev lintian "
                        "(make setup-tests does)")
    iproute2 = iproute2_headers()
    first = build(REPO, str(tmp_path_factory.mktemp("deb-first")), iproute2)
    src = next_version_sources(str(tmp_path_factory.mktemp("deb-next-src")), first.version)
    second = build(src, str(tmp_path_factory.mktemp("deb-next")), iproute2)
    return first, second


# --- the root's lifecycle ------------------------------------------------------------------------

@dataclasses.dataclass
class Stage:
    """What one stage left in the root, read while the overlay was mounted."""
    out: dict[str, subprocess.CompletedProcess]
    files: dict[str, bytes | None]  # path in the root -> its bytes (None: absent)
    paths: list[str]                # every path the overlay's upper layer holds


@dataclasses.dataclass
class Lifecycle:
    kver: str
    install: Stage
    upgrade: Stage
    purge: Stage


def one_kernel(root: str, cwd: str) -> str:
    """Purge every kernel package but those of the kernel linux-headers-amd64 pulls, so DKMS
    builds for exactly one; return that kernel's release."""
    dep = must(inside(root, "dpkg-query", "-W", "-f=${Depends}", "linux-headers-amd64", cwd=cwd),
               "dpkg-query linux-headers-amd64")
    m = re.match(r"linux-headers-(\S+)", dep)
    assert m, dep
    kver = m.group(1)
    abi = kver.rsplit("-", 1)[0]  # 6.12.117+deb13 of 6.12.117+deb13-amd64
    listed = inside(root, "dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n",
                    "linux-headers-*", "linux-image-*", "linux-kbuild-*", cwd=cwd).stdout.splitlines()
    others = [p.split()[0] for p in listed
              if p.split()[1:] == ["ii"] and re.match(r"linux-(headers|image|kbuild)-[0-9]", p) and abi not in p]
    if others:
        must(inside(root, "apt-get", "purge", "-y", "-q", *others, cwd=cwd), f"purging {others} in the root")
    builds = sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(f"{root}/usr/lib/modules/*/build"))
    assert builds == [kver], f"the root should hold one kernel's headers, {kver}; it holds {builds}"
    return kver


WATCHED = (AGENT, PLUGIN, DEFAULTS, f"/usr/lib/systemd/system/{UNIT}",
           f"/etc/systemd/system/multi-user.target.wants/{UNIT}")


def observe(root: str, upper: str, cwd: str, kver: str) -> Stage:
    queries = {
        "dkms": ["dkms", "status", "-m", "sch_ckcd"],
        "dpkg": ["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n", *PACKAGES],
        "enabled": ["systemctl", "is-enabled", UNIT],
        **{f"dpkg -L {p}": ["dpkg", "-L", p] for p in PACKAGES},
    }
    out = {name: inside(root, *argv, cwd=cwd) for name, argv in queries.items()}
    watched = [*WATCHED, *(p[len(root):] for p in glob.glob(f"{root}/usr/src/sch_ckcd-*/dkms.conf")),
               *(p[len(root):] for p in glob.glob(f"{root}/usr/lib/modules/{kver}/updates/dkms/sch_ckcd.ko*")),
               *(p[len(root):] for p in glob.glob(f"{root}/var/lib/dkms/sch_ckcd/*/{kver}/*/module/sch_ckcd.ko*"))]
    files = {}
    for path in watched:
        if os.path.islink(root + path):  # an absolute link points into the root, not here
            files[path] = b"-> " + os.readlink(root + path).encode()
            continue
        try:
            with open(root + path, "rb") as f:
                files[path] = f.read()
        except FileNotFoundError:
            files[path] = None
    paths = sorted(os.path.relpath(os.path.join(d, n), upper) for d, ds, fs in os.walk(upper) for n in ds + fs)
    return Stage(out, files, paths)


def install(root: str, cwd: str, b: Build) -> subprocess.CompletedProcess:
    """As an operator installs them: apt with the packages' paths (it checks dependencies)."""
    return inside(root, "apt-get", "install", "-y", "-q", *(b.deb(p) for p in PACKAGES), cwd=cwd)


@pytest.fixture(scope="module")
def lifecycle(builds, tmp_path_factory) -> Lifecycle:
    """Install the first version into a scratch trixie root, upgrade to the second, purge;
    what each stage left is recorded before the overlay goes."""
    if os.geteuid() != 0:
        pytest.fail("the packages' test needs root (overlay mount, chroot, dpkg in the root)")
    first, second = builds
    try:
        trixie.ensure_packages("deb", ("dkms", "linux-headers-amd64"))
    except trixie.ChrootUnavailable as e:
        pytest.fail(f"the trixie root with dkms and kernel headers: {e}")
    work = str(tmp_path_factory.mktemp("deb-root"))
    try:
        with trixie.scratch_root(work) as root:
            return run_lifecycle(root, os.path.join(work, "upper"), os.path.dirname(first.out), first, second)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the overlay's layers: tens of MB a run


def run_lifecycle(root: str, upper: str, cwd: str, first: Build, second: Build) -> Lifecycle:
    with open(root + "/usr/sbin/policy-rc.d", "w") as f:
        f.write(POLICY_RC_D)
    os.chmod(root + "/usr/sbin/policy-rc.d", 0o755)
    kver = one_kernel(root, cwd)
    must(install(root, cwd, first), f"installing {first.version} in the root")
    checks = {"tc": inside(root, "unshare", "--net", "tc", "qdisc", "add", "dev", "lo", "root", "ckcd", "help",
                           cwd=cwd),
              "agent --help": inside(root, AGENT, "--help", cwd=cwd),
              # The root has no manual pages (minbase); the unit's man: links are checked on
              # the host (tests/unit/test_qdisc_agent.py).
              "verify": inside(root, "systemd-analyze", "verify", "--man=no", f"/usr/lib/systemd/system/{UNIT}",
                               cwd=cwd),
              # An operator's `make dkms` on top of the package, which it must leave alone.
              "make dkms": inside(root, "bash", os.path.join(REPO, "scripts", "dkms.sh"), "-k", kver, cwd=cwd)}
    installed = observe(root, upper, cwd, kver)
    installed.out.update(checks)
    # The operator's setting, which the upgrade must keep (the file is a conffile).
    with open(root + DEFAULTS, "a") as f:
        f.write('CKCD_QDISC_AGENT_OPTS="--interval 2"\n')
    must(install(root, cwd, second), f"upgrading to {second.version} in the root")
    upgraded = observe(root, upper, cwd, kver)
    must(inside(root, "dpkg", "--purge", *PACKAGES, cwd=cwd), "dpkg --purge in the root")
    purged = observe(root, upper, cwd, kver)
    return Lifecycle(kver, installed, upgraded, purged)



# --- the packages as built -----------------------------------------------------------------------

def deb_field(deb: str, field: str) -> str:
    return must(sh("dpkg-deb", "--field", deb, field), f"dpkg-deb --field {deb}").strip()


def deb_files(deb: str) -> set[str]:
    listing = must(sh("dpkg-deb", "--contents", deb), f"dpkg-deb --contents {deb}")
    return {line.split()[5].removeprefix(".") for line in listing.splitlines() if not line.startswith("d")}


def test_every_package_has_VERSIONs_version(builds):
    """Rule (one version in one place): each package's version, and its changelog's top entry,
    is the VERSION file's; the next version's copy, bumped there only, gives the bumped one."""
    for b in builds:
        for package in PACKAGES:
            deb = b.deb(package)
            assert deb_field(deb, "Version") == b.version, deb
        changes = glob.glob(os.path.join(b.out, f"ckcd-coex_{b.version}_*.changes"))
        assert len(changes) == 1 and deb_field_changes(changes[0], "Version") == b.version
    with open(os.path.join(REPO, "VERSION")) as f:
        assert builds[0].version == f.read().strip()


def deb_field_changes(changes: str, field: str) -> str:
    with open(changes) as f:
        m = re.search(rf"^{field}: (.*)$", f.read(), re.M)
    assert m, changes
    return m.group(1)


def test_packages_hold_what_the_docs_say(builds):
    """Rule (docs/real-switches.md, "Installing from the Debian packages"): sch-ckcd-dkms holds the
    module's tree under /usr/src/sch_ckcd-<version> with its dkms.conf, and nothing of the plugin
    or agent; ckcd-tc-plugin holds q_ckcd.so in Debian's tc plugin directory and depends on an
    iproute2 at least as new as the headers it was built with; ckcd-qdisc-agent holds the agent
    in /usr/sbin, its unit and a conffile /etc/default/ckcd-qdisc-agent."""
    b = builds[0]
    tree = f"/usr/src/sch_ckcd-{b.version}"
    dkms = deb_files(b.deb("sch-ckcd-dkms"))
    assert {f"{tree}/dkms.conf", f"{tree}/kernel/Makefile", f"{tree}/kernel/Kbuild",
            f"{tree}/kernel/sch_ckcd_qdisc.c", f"{tree}/core/aqm.h"} <= dkms
    assert not {p for p in dkms if re.search(r"q_ckcd|qdisc-agent|\.service$|/build/", p)}, dkms
    assert PLUGIN in deb_files(b.deb("ckcd-tc-plugin"))
    with open(os.path.join(iproute2_headers(), "include", "version.h")) as f:
        tc_version = re.search(r'version\[\] = "([0-9.]+)"', f.read()).group(1)
    assert f"iproute2 (>= {tc_version})" in deb_field(b.deb("ckcd-tc-plugin"), "Depends")
    agent = deb_files(b.deb("ckcd-qdisc-agent"))
    assert {AGENT, DEFAULTS} <= agent and any(p.endswith(f"/systemd/system/{UNIT}") for p in agent), agent
    conffiles = must(sh("dpkg-deb", "--info", b.deb("ckcd-qdisc-agent"), "conffiles"), "dpkg-deb --info")
    assert conffiles.split() == [DEFAULTS]


def test_lintian_finds_no_error_or_warning(builds):
    """Rule (Debian policy as lintian checks it): no error and no warning on any package of the
    .changes, the overrides shipped in the packages (each with its reason) applied."""
    b = builds[0]
    changes = glob.glob(os.path.join(b.out, "*.changes"))
    res = sh("lintian", "--fail-on", "error,warning", *changes)
    tags = [line for line in res.stdout.splitlines() if re.match(r"[EW]: ", line)]
    assert res.returncode == 0 and not tags, res.stdout + res.stderr


# --- installed, upgraded, purged -----------------------------------------------------------------

def dkms_lines(stage: Stage) -> list[str]:
    return [line for line in stage.out["dkms"].stdout.splitlines() if line.strip()]


def test_install_builds_the_module_for_the_roots_kernel(builds, lifecycle):
    """Rule (dh_dkms, dkms.conf AUTOINSTALL): installing sch-ckcd-dkms registers sch_ckcd/<version>
    and builds and installs it for the installed headers' kernel, the only one in the root; the
    module DKMS installed is the one it built, for that kernel."""
    first, kver = builds[0], lifecycle.kver
    assert dkms_lines(lifecycle.install) == [f"sch_ckcd/{first.version}, {kver}, x86_64: installed"]
    files = lifecycle.install.files
    installed = [p for p in files if p.startswith(f"/usr/lib/modules/{kver}/updates/dkms/") and files[p]]
    built = [p for p in files if p.startswith(f"/var/lib/dkms/sch_ckcd/{first.version}/{kver}/") and files[p]]
    assert len(installed) == 1 and len(built) == 1, sorted(files)
    assert os.path.basename(installed[0]) == os.path.basename(built[0])  # sch_ckcd.ko or .ko.xz
    assert files[installed[0]] == files[built[0]]
    conf = files[f"/usr/src/sch_ckcd-{first.version}/dkms.conf"].decode()
    assert f'PACKAGE_VERSION="{first.version}"' in conf and 'AUTOINSTALL="yes"' in conf


def test_tc_finds_the_plugin_where_the_package_puts_it(lifecycle):
    """Rule (iproute2's TC_LIB_DIR default, on Debian /usr/lib/<multiarch>/tc): the root's own tc,
    with no TC_LIB_DIR set, loads q_ckcd.so from the package and runs its option parser (`ckcd
    help` prints the core's options and sends nothing to the kernel; a private network
    namespace besides)."""
    tc = lifecycle.install.out["tc"]
    assert "Unknown qdisc" not in tc.stderr, tc.stderr
    assert "Usage: ... ckcd [ disc NAME ]" in tc.stderr and "Options of ckcd:" in tc.stderr, tc.stderr
    assert PLUGIN in lifecycle.install.out["dpkg -L ckcd-tc-plugin"].stdout.split()


def test_agent_and_unit_installed_enabled_and_not_started(builds, lifecycle):
    """Rule (dh_installsystemd, Debian policy 9.3): the agent runs from /usr/sbin, its unit passes
    `systemd-analyze verify` in the root and runs /usr/sbin/ckcd-qdisc-agent with the options of
    /etc/default/ckcd-qdisc-agent, and installing enables the unit; in a chroot nothing starts
    it (no systemd, policy-rc.d says 101), and the install still succeeds."""
    stage = lifecycle.install
    assert stage.files[AGENT] == open(builds[0].agent, "rb").read()
    assert "Usage: ckcd-qdisc-agent" in stage.out["agent --help"].stdout, stage.out["agent --help"]
    verify = stage.out["verify"]
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stdout + verify.stderr
    unit = stage.files[f"/usr/lib/systemd/system/{UNIT}"].decode()
    assert re.search(r"^ExecStart=/usr/sbin/ckcd-qdisc-agent --interval 1 \$CKCD_QDISC_AGENT_OPTS$", unit, re.M)
    assert re.search(rf"^EnvironmentFile=-{DEFAULTS}$", unit, re.M)
    assert stage.out["enabled"].stdout.strip() == "enabled", stage.out["enabled"]
    assert stage.files[f"/etc/systemd/system/multi-user.target.wants/{UNIT}"] == f"-> /usr/lib/systemd/system/{UNIT}".encode()


def test_make_dkms_leaves_the_packages_module_alone(builds, lifecycle):
    """Rule (dpkg owns a package's files; one sch_ckcd per host): `make dkms` (scripts/dkms.sh) on a
    host where sch-ckcd-dkms installed the module refuses, saying so, before it registers, builds
    or removes anything: DKMS still lists the package's version alone and its tree is whole."""
    res = lifecycle.install.out["make dkms"]
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"sch_ckcd/{builds[0].version} is installed by the Debian package sch-ckcd-dkms" in res.stderr, res.stderr
    assert dkms_lines(lifecycle.install) == [f"sch_ckcd/{builds[0].version}, {lifecycle.kver}, x86_64: installed"]
    assert not [p for p in lifecycle.install.paths if re.match(r"usr/src/sch_ckcd-.*\+", p)]
    assert lifecycle.install.files[f"/usr/src/sch_ckcd-{builds[0].version}/dkms.conf"] is not None


def test_upgrade_leaves_only_the_new_module_and_agent(builds, lifecycle):
    """Rule (dh_dkms's prerm removes the old version, the new postinst builds the new one): after
    the upgrade DKMS holds the new version alone, installed for the kernel, the old tree is gone
    from /usr/src, the agent is the new version's, and the unit is still enabled."""
    first, second = builds
    stage, kver = lifecycle.upgrade, lifecycle.kver
    assert sorted(stage.out["dpkg"].stdout.split("\n")[:-1]) == sorted(
        f"{p} {second.version} ii " for p in PACKAGES), stage.out["dpkg"].stdout
    assert dkms_lines(stage) == [f"sch_ckcd/{second.version}, {kver}, x86_64: installed"]
    for old in (f"usr/src/sch_ckcd-{first.version}", f"var/lib/dkms/sch_ckcd/{first.version}"):
        assert not [p for p in stage.paths if p == old or p.startswith(old + "/")], old
    assert f"usr/src/sch_ckcd-{second.version}/dkms.conf" in stage.paths
    built = [p for p in stage.files if p.startswith(f"/var/lib/dkms/sch_ckcd/{second.version}/{kver}/")]
    installed = [p for p in stage.files if p.startswith(f"/usr/lib/modules/{kver}/updates/dkms/")]
    assert len(built) == 1 and len(installed) == 1 and stage.files[built[0]] == stage.files[installed[0]]
    assert stage.files[AGENT] == open(second.agent, "rb").read() != open(first.agent, "rb").read()
    assert stage.out["enabled"].stdout.strip() == "enabled"


def test_upgrade_keeps_the_operators_default_file(lifecycle):
    """Rule (dpkg conffiles, Debian policy 10.7.3): /etc/default/ckcd-qdisc-agent as the operator
    changed it survives an upgrade whose version of the file is unchanged."""
    text = lifecycle.upgrade.files[DEFAULTS].decode()
    assert text.endswith('CKCD_QDISC_AGENT_OPTS="--interval 2"\n'), text


def test_purge_leaves_nothing_behind(lifecycle):
    """Rule (Debian policy 6.8 and 10.7.3, purge): after `dpkg --purge` of the three packages dpkg
    knows none of them, DKMS no sch_ckcd, and no file of theirs remains: no /usr/src tree, no
    /var/lib/dkms/sch_ckcd, no module, plugin, agent, unit, enablement link or /etc/default
    file; and nothing anywhere in the root's changed layer carries "ckcd" or "sch_ckcd" in
    its name (every file the packages or their scripts wrote does)."""
    stage = lifecycle.purge
    for package in PACKAGES:
        res = stage.out[f"dpkg -L {package}"]
        assert res.returncode != 0 and "is not installed" in res.stderr, (package, res.stdout)
    assert dkms_lines(stage) == []
    assert {p: v for p, v in stage.files.items() if v is not None} == {}
    left = [p for p in stage.paths if "ckcd" in os.path.basename(p).lower()]
    assert left == [], left
