"""Rules of tests/kernel/linux_dualpi2.py that need no VM, no root and no network (make check):
which kernels it builds Linux's sch_dualpi2 for, what it takes out of the source package, which
cache it trusts, when it reuses a build, and what it prunes from its cache."""

import io
import os
import signal
import subprocess
import sys
import tarfile
import threading

import pytest

from tests.kernel import kbuild, kernels, linux_dualpi2

V73 = "7.3.4+deb13-amd64"
MEMBER = "linux-source-7.3/net/sched/sch_dualpi2.c"
SOURCE = b"// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause\n/* the kernel's file */\n"


@pytest.mark.parametrize("bad", ["6.12.117+deb13-amd64", "6.1.0-56-amd64", "7.3.4+deb13-amd64/../../x",
                                 "7.3.4+deb13-arm64", ""])
def test_only_a_lab_kernel_from_6_17_on_is_built_for(bad, monkeypatch):
    """Rule: Linux's qdisc exists from 6.17 on, so a version of an older line, of no line, or not
    of a Debian amd64 kernel's form is refused before it names a package, a path or a command."""
    monkeypatch.setattr(kernels, "resolve", lambda line: pytest.fail("a bad version must not be resolved"))
    with pytest.raises(kernels.LabUnavailable):
        linux_dualpi2.sch_dualpi2(bad or "not-a-version")


def _deb(tmp_path, members: list[tuple[str, bytes | str]]) -> str:
    """A .deb holding ./usr/src/linux-source-7.3.tar.xz with members, in order (bytes: a file,
    str: a symlink); a name may come twice."""
    pkg = tmp_path / "pkg"
    (pkg / "usr" / "src").mkdir(parents=True)
    (pkg / "DEBIAN").mkdir()
    (pkg / "DEBIAN" / "control").write_text("Package: linux-source-7.3\nVersion: 7.3.4-1\nArchitecture: all\n"
                                            "Maintainer: lab <lab@example.org>\nDescription: test\n")
    with tarfile.open(pkg / "usr" / "src" / "linux-source-7.3.tar.xz", "w:xz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    deb = str(tmp_path / "linux-source-7.3_7.3.4-1_all.deb")
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(pkg), deb], check=True,
                   capture_output=True)
    return deb


def _extract(deb: str, out) -> None:
    linux_dualpi2._extract(deb, "./usr/src/linux-source-7.3.tar.xz", MEMBER, str(out))


def test_the_named_member_alone_comes_out_of_the_package(tmp_path):
    """Rule: only the one member named comes out of the package's inner tarball, streamed into
    the cache file; a neighbour whose name a glob would match is not taken, and nothing else
    is written."""
    deb = _deb(tmp_path, [(MEMBER, SOURCE), (MEMBER + ".orig", b"// SPDX-License-Identifier: x\nnot this\n"),
                          ("linux-source-7.3/Makefile", b"all:\n")])
    out = tmp_path / "cache" / "sch_dualpi2.c"
    out.parent.mkdir()
    _extract(deb, out)
    assert out.read_bytes() == SOURCE
    assert os.listdir(out.parent) == ["sch_dualpi2.c"]


@pytest.mark.parametrize("members", [[(MEMBER, "/etc/passwd")], [(MEMBER, b"#!/bin/sh\nnot the kernel's file\n")],
                                     [("linux-source-7.3/other.c", SOURCE)],
                                     [(MEMBER, SOURCE), (MEMBER, SOURCE + b"/* and more */\n")],
                                     [(MEMBER, SOURCE), (MEMBER + "/x", SOURCE)]])
def test_a_member_that_is_not_the_kernels_source_file_is_refused(tmp_path, members):
    """Rule: a member that is a symlink, not a kernel source file, missing, stored twice (tar -xO
    would write both, one after the other) or with entries below it, is refused with
    LabUnavailable, and leaves no file behind."""
    deb = _deb(tmp_path, members)
    out = tmp_path / "cache" / "sch_dualpi2.c"
    out.parent.mkdir()
    with pytest.raises(kernels.LabUnavailable, match="did not come out of"):
        _extract(deb, out)
    assert os.listdir(out.parent) == []


def test_a_line_that_moved_on_prunes_only_its_own_older_builds(tmp_path, monkeypatch):
    """Rule: building for a new version of a line removes that line's older builds; another
    line's directory, and anything not named like a version, stay."""
    monkeypatch.setattr(kernels, "CACHE_DIR", str(tmp_path))
    root = tmp_path / "sch_dualpi2"
    for name in ("7.3.3+deb13-amd64", V73, "6.12.117+deb13-amd64", "notes"):
        (root / name).mkdir(parents=True)
    linux_dualpi2._prune(kernels.LINES["7.3"], V73)
    assert sorted(os.listdir(root)) == sorted([V73, "6.12.117+deb13-amd64", "notes"])


# Fake dpkg-deb stages: one that floods stderr past a pipe's 64 KiB and fails, one that hangs.
FAKE_DPKG_DEB = {"floods": "import os, sys\nopen(sys.argv[0] + '.pid', 'w').write(str(os.getpid()))\n"
                           "sys.stderr.write('dpkg-deb: warning\\n' * 20000)\nsys.exit(1)\n",
                 "hangs": "import os, sys, time\nopen(sys.argv[0] + '.pid', 'w').write(str(os.getpid()))\n"
                          "time.sleep(120)\n"}


@pytest.fixture
def deadline():
    """Fails a test that blocks (a pipeline stuck on a full stderr pipe) instead of hanging it;
    only a main thread can take a signal."""
    def expired(signum, frame):
        raise TimeoutError("the extraction blocked")
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("stage", ["floods", "hangs", "missing"])
def test_a_failing_stage_ends_the_pipeline_cleanly(tmp_path, monkeypatch, deadline, stage):
    """Rule: a stage that writes more to stderr than a pipe holds, hangs past the deadline, or is
    not installed, ends in LabUnavailable naming it: no stage is left running, no .part stays."""
    deb = _deb(tmp_path, [(MEMBER, SOURCE)])
    fake = tmp_path / "bin" / "dpkg-deb"
    fake.parent.mkdir()
    if stage != "missing":
        fake.write_text(f"#!{sys.executable}\n{FAKE_DPKG_DEB[stage]}")
        fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}" if stage != "missing" else str(fake.parent))
    monkeypatch.setattr(linux_dualpi2, "EXTRACT_TIMEOUT_S", 2)
    out = tmp_path / "cache" / "sch_dualpi2.c"
    out.parent.mkdir()
    with pytest.raises(kernels.LabUnavailable, match={"floods": "dpkg-deb exit 1", "hangs": "took over 2 s",
                                                      "missing": "cannot run dpkg-deb"}[stage]):
        _extract(deb, out)
    assert os.listdir(out.parent) == []
    if stage != "missing":
        with pytest.raises(ProcessLookupError):
            os.kill(int((tmp_path / "bin" / "dpkg-deb.pid").read_text()), 0)


def test_a_planted_part_file_is_replaced_not_written_through(tmp_path):
    """Rule: a stale sch_dualpi2.c.part, even a symlink to another file, is removed and created
    anew (O_EXCL|O_NOFOLLOW): what it pointed to is not written."""
    deb = _deb(tmp_path, [(MEMBER, SOURCE)])
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep\n")
    out = tmp_path / "cache" / "sch_dualpi2.c"
    out.parent.mkdir()
    os.symlink(victim, str(out) + ".part")
    _extract(deb, out)
    assert out.read_bytes() == SOURCE and victim.read_bytes() == b"keep\n"
    assert os.listdir(out.parent) == ["sch_dualpi2.c"]


class FakeLab:
    """The cache in a tmp dir, with apt, the download and kbuild faked: what sch_dualpi2 would
    fetch and build is recorded in calls, and the Debian version apt reports is settable."""

    def __init__(self, tmp_path, monkeypatch):
        self.root = tmp_path / "lab"
        self.vdir = self.root / "sch_dualpi2" / V73
        self.deb_version = "7.3.4-1~bpo13+1"
        self.ko_bytes = b"\x7fELF a module"
        self.calls: list[str] = []
        monkeypatch.setattr(kernels, "CACHE_DIR", str(self.root))
        monkeypatch.setattr(kernels, "line_apt", lambda line: [])
        monkeypatch.setattr(linux_dualpi2, "_package_version", lambda apt, package: self.deb_version)
        monkeypatch.setattr(linux_dualpi2, "_fetch_source", self.fetch)
        monkeypatch.setattr(linux_dualpi2, "_build", self.build)
        monkeypatch.setattr(kbuild, "modinfo", lambda path: {"vermagic": [f"{V73} SMP mod_unload"]})

    def fetch(self, apt, origin, dest):
        assert origin["version"] == self.deb_version
        self.calls.append("fetch")
        linux_dualpi2._write(dest, SOURCE)

    def build(self, version, src, ko, log):
        self.calls.append("build")
        linux_dualpi2._write(ko, self.ko_bytes)
        linux_dualpi2._write(log, b"")

    def run(self) -> list[str]:
        """The calls one sch_dualpi2() made."""
        self.calls.clear()
        assert linux_dualpi2.sch_dualpi2(V73) == str(self.vdir / "sch_dualpi2.ko")
        return self.calls


@pytest.fixture
def fake_lab(tmp_path, monkeypatch):
    return FakeLab(tmp_path, monkeypatch)


def test_a_build_is_reused_only_for_the_same_debian_version_and_files(fake_lab):
    """Rule: the cached .ko is reused while SOURCE names the Debian version linux-image-V has now
    and the .c and .ko still have the sha256 it recorded; a new revision at the same ABI (same
    vermagic) fetches and builds again, a changed .ko builds again, a changed .c fetches again."""
    assert fake_lab.run() == ["fetch", "build"]
    assert fake_lab.run() == []
    fake_lab.deb_version = "7.3.4-1~bpo13+2"
    assert fake_lab.run() == ["fetch", "build"]
    (fake_lab.vdir / "sch_dualpi2.ko").write_bytes(b"\x7fELF another module")
    assert fake_lab.run() == ["build"]
    (fake_lab.vdir / "sch_dualpi2.c").write_bytes(SOURCE + b"/* changed */\n")
    assert fake_lab.run() == ["fetch", "build"]
    assert fake_lab.run() == []


def test_a_cache_of_the_old_form_or_a_damaged_module_is_built_again(fake_lab, monkeypatch):
    """Rule: a SOURCE without hashes (an older cache) fetches again, and a .ko modinfo cannot
    read (struct.error on a truncated ELF) is built again, not a crash."""
    fake_lab.vdir.mkdir(parents=True)
    (fake_lab.vdir / "SOURCE").write_text("linux-source-7.3 7.3.4-1~bpo13+1 (trixie-backports), "
                                          f"member {MEMBER}\n")
    (fake_lab.vdir / "sch_dualpi2.c").write_bytes(SOURCE)
    (fake_lab.vdir / "sch_dualpi2.ko").write_bytes(fake_lab.ko_bytes)
    fake_lab.ko_bytes = b"\x7fELF\x02\x01\x01"  # its hash recorded, its headers cut short
    assert fake_lab.run() == ["fetch", "build"]
    monkeypatch.setattr(kbuild, "modinfo", REAL_MODINFO)
    assert fake_lab.run() == ["build"]


def test_a_download_an_interrupted_run_left_is_removed(fake_lab):
    """Rule: a download-* directory in the cache (a killed run's, up to a whole .deb) is removed
    under the lock; the rest of the cache stays."""
    stale = fake_lab.root / "sch_dualpi2" / "download-x1y2"
    stale.mkdir(parents=True)
    (stale / "linux-source-7.3_7.3.4-1~bpo13+1_all.deb").write_bytes(b"167 MB")
    (fake_lab.root / "sch_dualpi2" / "notes").write_text("kept\n")
    fake_lab.run()
    assert sorted(os.listdir(fake_lab.root / "sch_dualpi2")) == [".lock", V73, "notes"]


@pytest.mark.parametrize("where", ["cache", "module dir", "version dir"])
@pytest.mark.parametrize("how", ["world-writable", "group-writable", "another uid's", "a symlink"])
def test_a_cache_others_can_write_is_refused(fake_lab, tmp_path, monkeypatch, where, how):
    """Rule: the cache root, sch_dualpi2's directory and a version's must be directories (not
    symlinks) of the effective uid that neither group nor others may write, or nothing is read,
    fetched or built there: anyone who can plant a name in them could have root write through it."""
    path = {"cache": fake_lab.root, "module dir": fake_lab.root / "sch_dualpi2", "version dir": fake_lab.vdir}[where]
    if how == "a symlink":
        (tmp_path / "elsewhere").mkdir()
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(tmp_path / "elsewhere", path)
    else:
        path.mkdir(parents=True)
        path.chmod({"world-writable": 0o777, "group-writable": 0o775}.get(how, 0o755))
    if how == "another uid's" and os.geteuid() == 0:
        os.chown(path, 65534, -1)
    elif how == "another uid's":  # not root: the cache root is then the one found foreign
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(path).st_uid + 1)
    with pytest.raises(kernels.LabUnavailable, match="refusing the kernel lab's cache"):
        fake_lab.run()
    assert fake_lab.calls == []


def test_a_planted_lock_symlink_is_not_followed(fake_lab, tmp_path):
    """Rule: the lock is opened without O_TRUNC and without following a symlink: a .lock planted
    as a link to another file is refused, and that file is untouched."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep\n")
    (fake_lab.root / "sch_dualpi2").mkdir(parents=True)
    os.symlink(victim, fake_lab.root / "sch_dualpi2" / ".lock")
    with pytest.raises(kernels.LabUnavailable, match="cannot open the lock"):
        fake_lab.run()
    assert victim.read_bytes() == b"keep\n" and fake_lab.calls == []


REAL_MODINFO = kbuild.modinfo
