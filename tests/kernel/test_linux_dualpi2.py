"""Rules of tests/kernel/linux_dualpi2.py that need no VM, no root and no network (make check):
which kernels it builds Linux's sch_dualpi2 for, what it takes out of the source package, and
what it prunes from its cache."""

import io
import os
import signal
import subprocess
import sys
import tarfile
import threading

import pytest

from tests.kernel import kernels, linux_dualpi2

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


