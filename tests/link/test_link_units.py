"""Runs the C unit tests of ckcd-link's pure parts (frame validation and
classification - including runt frames, which a veth cannot carry -, the
JSON request parser, rate/delay parsing): datapath/link/unit_test.c."""

import subprocess
from pathlib import Path

import pytest

BINARY = Path(__file__).resolve().parents[2] / "datapath" / "build" / "link-unit-test"


@pytest.mark.skipif(not BINARY.exists(), reason="make -C datapath first")
def test_link_unit_tests_pass():
    p = subprocess.run([str(BINARY)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 failures" in p.stdout
