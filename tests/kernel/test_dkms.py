"""sch_ckcd as a DKMS package (scripts/dkms.sh, `make dkms`), built for Debian 12's kernel.

The rule: DKMS builds the module from exactly the tree the script copies into
/usr/src/sch_ckcd-<version>, for the kernel of the installed linux-headers (which this
machine does not run), and the test leaves nothing behind. Our machines load no kernel
modules, so the script runs in --build-only mode (dkms add and build; never `dkms install`,
which would write under /lib/modules), and teardown removes the registration (`dkms remove
sch_ckcd/<version> --all`) and /usr/src/sch_ckcd-<version>, also when a test failed. DKMS
signs what it builds: with a throwaway key in a temporary directory here (DKMS reads
mok_signing_key and mok_certificate from the environment), so no /var/lib/dkms/mok.key is
created. The build runs at make -j1, under the lock lab.build_sch_ckcd takes too.
"""

from __future__ import annotations

import fcntl
import filecmp
import glob
import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO
from tests.kernel import lab

pytestmark = pytest.mark.lab  # needs root and a lab: namespaces, Open vSwitch, Mininet, ckcd-link or the kernel VM

SCRIPT = os.path.join(REPO, "scripts", "dkms.sh")
LOCK = "/run/lock/ckcd-coex-dkms-tests.lock"


def sh(*args, env=None, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), text=True, capture_output=True, env=env, timeout=timeout)


def dkms_status(version: str) -> str:
    return sh("dkms", "status", "-m", "sch_ckcd", "-v", version).stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """scripts/dkms.sh --build-only for lab.kernel_version(); yields (version, kver, result).
    Fails (not skips) without root or dkms: `make test` installs dkms."""
    if os.geteuid() != 0:
        pytest.fail("DKMS needs root")
    if shutil.which("dkms") is None:
        pytest.fail("dkms not found: apt-get install dkms (make setup-tests does)")
    kver = lab.kernel_version()
    version = sh("bash", SCRIPT, "--print-version").stdout.strip()
    assert re.fullmatch(r"[0-9A-Za-z][0-9A-Za-z.+~-]*", version), version
    keys = tmp_path_factory.mktemp("mok")
    env = dict(os.environ, mok_signing_key=str(keys / "mok.key"), mok_certificate=str(keys / "mok.pub"))
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert ": installed" not in dkms_status(version), \
            f"sch_ckcd/{version} is installed on this machine: not ours to remove"
        try:
            # A run killed before its teardown may have left this version: start clean, so the build is real.
            sh("dkms", "remove", "-m", "sch_ckcd", "-v", version, "--all")
            shutil.rmtree(f"/usr/src/sch_ckcd-{version}", ignore_errors=True)
            res = sh("bash", SCRIPT, "--build-only", "-k", kver, "-j", "1", env=env)
            log = f"/var/lib/dkms/sch_ckcd/{version}/build/make.log"
            assert res.returncode == 0, (res.stdout + res.stderr
                                         + (open(log).read()[-3000:] if os.path.exists(log) else ""))
            yield version, kver, env, res
        finally:
            sh("dkms", "remove", "-m", "sch_ckcd", "-v", version, "--all")
            shutil.rmtree(f"/usr/src/sch_ckcd-{version}", ignore_errors=True)
            assert dkms_status(version) == "", "dkms remove left the registration"
            assert not os.path.exists(f"/var/lib/dkms/sch_ckcd/{version}")


def module_path(version: str, kver: str) -> str:
    return f"/var/lib/dkms/sch_ckcd/{version}/{kver}/{os.uname().machine}/module/sch_ckcd.ko"


def test_built_where_dkms_keeps_it_and_not_installed(built):
    version, kver, _, res = built
    assert os.path.isfile(module_path(version, kver)), res.stdout
    status = dkms_status(version)
    assert f"sch_ckcd/{version}, {kver}, {os.uname().machine}: built" in status, status
    assert not glob.glob(f"/lib/modules/{kver}/updates/dkms/sch_ckcd.ko*")


def test_modinfo_names_the_kernel_and_the_module(built):
    version, kver, _, _ = built
    info = {}
    for line in sh("modinfo", module_path(version, kver)).stdout.splitlines():
        key, _, value = line.partition(":")
        if not key.startswith(("\t", " ")):
            info[key.strip()] = value.strip()
    assert info["vermagic"].split()[0] == kver, info["vermagic"]
    assert info["name"] == "sch_ckcd"
    assert "qdisc" in info["description"], info["description"]
    assert info["license"] == "GPL"
    assert info.get("signer") == "DKMS module signing key", "DKMS did not sign the module"


def test_source_tree_is_exactly_the_module_sources(built):
    """kernel/ (the Makefile, Kbuild, the module's sources, compat/) and core/ side by side,
    identical to the checkout; nothing of the plugin, the agent or a build."""
    version, _, _, _ = built
    tree = f"/usr/src/sch_ckcd-{version}"
    files = {os.path.relpath(os.path.join(d, f), tree) for d, _, fs in os.walk(tree) for f in fs}
    core = {f"core/{os.path.basename(p)}" for p in glob.glob(os.path.join(REPO, "datapath/core/*.[ch]"))}
    compat = {f"kernel/compat/{os.path.basename(p)}" for p in glob.glob(os.path.join(REPO, "datapath/kernel/compat/*.h"))}
    kernel = files - core - compat - {"dkms.conf"}
    assert core | compat <= files
    assert {"kernel/Makefile", "kernel/Kbuild", "kernel/sch_ckcd_qdisc.c", "kernel/ckcd_nl.h"} <= kernel
    assert all(re.fullmatch(r"kernel/[^/]+", f) for f in kernel), kernel
    assert not kernel & {"kernel/q_ckcd.c", "kernel/ckcd-qdisc-agent", "kernel/dkms.conf"}
    for f in files - {"dkms.conf"}:
        src = os.path.join(REPO, "datapath", f)
        assert filecmp.cmp(src, os.path.join(tree, f), shallow=False), f"{f} differs from {src}"
    conf = open(os.path.join(tree, "dkms.conf")).read()
    assert f'PACKAGE_VERSION="{version}"' in conf and '\nPACKAGE_NAME="sch_ckcd"' in conf


def test_second_run_changes_nothing(built):
    version, kver, env, _ = built
    before = os.stat(module_path(version, kver)).st_mtime_ns
    res = sh("bash", SCRIPT, "--build-only", "-k", kver, "-j", "1", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "building" not in res.stdout and "copying" not in res.stdout, res.stdout
    assert os.stat(module_path(version, kver)).st_mtime_ns == before


def test_other_sources_under_the_same_version_are_refused(built, tmp_path):
    """A checkout whose sources differ gets another version; forced onto this one with --version,
    the script stops before touching DKMS or /usr/src."""
    version, kver, env, _ = built
    for part in ("scripts/dkms.sh", "VERSION", "datapath/kernel", "datapath/core"):
        src, dst = os.path.join(REPO, part), tmp_path / part
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build")) if os.path.isdir(src)
         else shutil.copy(src, dst))
    with open(tmp_path / "datapath/core/ckcd.c", "a") as f:
        f.write("/* another tree */\n")
    other = str(tmp_path / "scripts/dkms.sh")
    assert sh("bash", other, "--print-version").stdout.strip() != version
    tree = f"/usr/src/sch_ckcd-{version}"
    before = os.stat(os.path.join(tree, "core", "ckcd.c")).st_mtime_ns
    res = sh("bash", other, "--build-only", "-k", kver, "-j", "1", "--version", version, env=env)
    assert res.returncode == 1 and "holds other sources" in res.stderr, res.stdout + res.stderr
    assert os.stat(os.path.join(tree, "core", "ckcd.c")).st_mtime_ns == before
    assert "another tree" not in open(os.path.join(tree, "core", "ckcd.c")).read()
    assert f"sch_ckcd/{version}, {kver}" in dkms_status(version)
