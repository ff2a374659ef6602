"""The Python package as a release ships it: `python -m build` makes the sdist and the wheel
from the checkout's files, the wheel goes into a fresh venv outside the checkout (no system
site packages, none of the checkout on the path), and `ryu-manager ckcd_coex` starts from
there and serves its REST API, metrics and dashboard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import urllib.request
import zipfile

import pytest

from experiments.lab.net import _port_open
from tests.conftest import REPO
from tests.waiting import eventually

pytestmark = pytest.mark.slow  # a venv and pip: half a minute to a minute

OF_PORT, REST_PORT = 16853, 18280
CONSTRAINTS = os.path.join(REPO, "requirements", "constraints.txt")


def _version() -> str:
    with open(os.path.join(REPO, "VERSION")) as f:
        return f.read().strip()


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """sdist and wheel built from a copy of the checkout's files (tracked and new, not ignored),
    so the build writes nothing into the checkout."""
    base = tmp_path_factory.mktemp("release")
    names = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    src = base / "src"
    for name in filter(None, names):
        if os.path.isfile(os.path.join(REPO, name)):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(open(os.path.join(REPO, name), "rb").read())
    out = base / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel",
                            "--outdir", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    version = _version()
    return base, out / f"ckcd-coex-{version}.tar.gz", out / f"ckcd_coex-{version}-py3-none-any.whl"


def test_sdist_and_wheel_carry_the_version_and_the_runtime_files(dists):
    """Rule: both artifacts carry VERSION's version in their names, and the files the
    controller and the runner read at run time: the dashboard, the scenarios, their traces and
    workloads, the state cluster's schema, the shim's .pth
    (wheel); VERSION and CHANGELOG.md (sdist). No tests in the wheel."""
    _, sdist, wheel = dists
    members = set(zipfile.ZipFile(wheel).namelist())
    for name in ("ckcd_coex.py", "ckcd_coex_eventlet_shim.pth", "ryu_app/ui/index.html", "ryu_app/ui/app.js",
                 "experiments/scenarios/bbr_cubic.toml", "experiments/traces/onoff.trace",
                 "experiments/workloads/websearch.cdf", "coex/ckcd_coex.ovsschema", "ryu_app/launch.py"):
        assert name in members, name
    assert not any(m.startswith("tests/") for m in members)
    top = f"ckcd-coex-{_version()}/"
    in_sdist = set(tarfile.open(sdist).getnames())
    for name in ("VERSION", "CHANGELOG.md", "setup.py", "ryu_app/ui/index.html"):
        assert top + name in in_sdist, name


def test_wheel_in_a_fresh_venv_runs_ryu_manager_ckcd_coex(dists):
    """Rule: `pip install ckcd_coex-V.whl[ryu]` into a new venv is enough to run `ryu-manager
    ckcd_coex` outside the checkout: the app is imported from the venv, REST, /metrics and the
    dashboard answer, and `ckcd-coex --help` runs."""
    base, _, wheel = dists
    venv = base / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "CKCD_COEX"))}
    env.update(PIP_CONSTRAINT=CONSTRAINTS, PIP_BUILD_CONSTRAINT=CONSTRAINTS, PIP_DISABLE_PIP_VERSION_CHECK="1",
               CKCD_COEX_DB=str(base / "policy.sqlite"))
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[ryu]"], env=env, cwd=base,
                         capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-2000:]
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import ryu_app; print(ryu_app.__file__)"],
                           env=env, cwd=base, capture_output=True, text=True, timeout=60)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr
    helped = subprocess.run([str(venv / "bin" / "ckcd-coex"), "--help"], env=env, cwd=base,
                            capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "usage" in helped.stdout.lower(), helped.stdout + helped.stderr
    log = open(base / "ryu.log", "w")
    proc = subprocess.Popen([str(venv / "bin" / "ryu-manager"), "--ofp-tcp-listen-port", str(OF_PORT),
                             "--wsapi-port", str(REST_PORT), "ckcd_coex"], env=env, cwd=base, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        eventually(lambda: proc.poll() is not None or (_port_open(OF_PORT) and _port_open(REST_PORT)),
                   timeout_s=30, what="the installed controller listening")
        assert proc.poll() is None, open(base / "ryu.log").read()
        url = f"http://127.0.0.1:{REST_PORT}"
        policy = json.load(urllib.request.urlopen(f"{url}/coex/v1/policy", timeout=10))
        assert "default" in policy["policy"]["aggregates"], policy
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
        assert "coex_switches_connected 0.0" in metrics, metrics[:500]
        ui = urllib.request.urlopen(f"{url}/coex/v1/ui/", timeout=10).read().decode()
        assert "<html" in ui.lower(), ui[:300]
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(10)
    text = open(base / "ryu.log").read()
    assert "controller loaded (OpenFlow 1.3, ryu 4.34" in text, text
    assert str(base / "policy.sqlite") in text, text
