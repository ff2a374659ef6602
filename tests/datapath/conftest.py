"""Datapath tests build datapath/ once per session and drive build/ckcd-replay."""

from __future__ import annotations

import pytest

import replaylib


@pytest.fixture(scope="session", autouse=True)
def replay_binary() -> str:
    return replaylib.build()
