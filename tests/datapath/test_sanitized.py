"""The datapath under AddressSanitizer + UndefinedBehaviorSanitizer, and its three parsers of
outside input under libFuzzer.

- `make -C datapath sanitize` builds every program into datapath/build-san/ with
  -fsanitize=address,undefined -fno-sanitize-recover=all: any memory error, leak or
  undefined behaviour aborts the program. This whole directory's replay suite is rerun
  against that ckcd-replay (every discipline, reconfiguration, bands, the CLI's refusals),
  and the link's unit tests run sanitized. ckcd-link itself runs sanitized in
  tests/link/test_control_socket.py.
- `make -C datapath fuzz` builds the libFuzzer targets of datapath/fuzz/ (clang; `make test`
  installs it): the control socket's JSON parser, the core's spec parser with its
  describe-parses-back-to-itself property, and frame validation/classification. Each runs
  for FUZZ_SECONDS from its committed corpus (datapath/fuzz/corpus/<target>/); what it finds
  new goes to a temporary directory, never into the repository. A crash fails the test with
  libFuzzer's report (and the input it saved under that directory).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds and runs every program under sanitizers and libFuzzer: minutes

REPO = Path(__file__).resolve().parents[2]
DATAPATH = REPO / "datapath"
SAN = DATAPATH / "build-san"
FUZZ = DATAPATH / "build-fuzz"
# Long enough for millions of inputs per target on our 2 cores (fuzz_spec, the slowest,
# runs ~30k/s), short enough that three targets add about a minute to `make test`.
FUZZ_SECONDS = int(os.environ.get("CKCD_FUZZ_SECONDS", "20"))
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=86",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


def make(target: str) -> None:
    p = subprocess.run(["make", "-s", "-C", str(DATAPATH), target], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"make -C datapath {target} failed:\n{p.stdout}{p.stderr}"


@pytest.fixture(scope="module")
def sanitized_build() -> Path:
    make("sanitize")
    return SAN


def test_replay_suite_passes_under_asan_and_ubsan(sanitized_build):
    env = {**os.environ, **SANITIZER_ENV, "CKCD_REPLAY_BIN": str(sanitized_build / "ckcd-replay")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(REPO / "tests" / "datapath"), "--deselect",
                        "tests/datapath/test_sanitized.py", "--ignore",
                        str(Path(__file__))],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    tail = "\n".join(p.stdout.splitlines()[-30:])
    assert p.returncode == 0, f"the replay suite failed with the sanitized ckcd-replay:\n{tail}\n{p.stderr[-3000:]}"
    assert " passed" in tail


def test_link_unit_tests_pass_under_asan_and_ubsan(sanitized_build):
    p = subprocess.run([str(sanitized_build / "link-unit-test")], capture_output=True, text=True,
                       env={**os.environ, **SANITIZER_ENV}, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 failures" in p.stdout


@pytest.fixture(scope="module")
def fuzz_build() -> Path:
    make("fuzz")
    return FUZZ


@pytest.mark.parametrize("target", ["json", "spec", "frame"])
def test_fuzz_target_finds_nothing(fuzz_build, target, tmp_path):
    corpus = DATAPATH / "fuzz" / "corpus" / target
    assert any(corpus.iterdir()), f"{corpus} has no seed inputs"
    p = subprocess.run([str(fuzz_build / f"fuzz_{target}"), f"-max_total_time={FUZZ_SECONDS}",
                        "-rss_limit_mb=2048", "-timeout=10", f"-artifact_prefix={tmp_path}/",
                        str(tmp_path), str(corpus)],
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    runs = [line for line in p.stderr.splitlines() if line.startswith("Done ")]
    assert p.returncode == 0, f"fuzz_{target} found a failure:\n{p.stderr[-6000:]}"
    assert runs, p.stderr[-2000:]
    print(f"fuzz_{target}: {runs[-1]}")
