"""The project version a batch records (experiments/batch/provenance.py), in a scratch git repository:
what makes two shards one version, and what does not."""

from __future__ import annotations

import subprocess

import pytest

from experiments.batch import provenance


@pytest.fixture
def repo(tmp_path, monkeypatch):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                       env={"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": "/usr/bin:/bin",
                            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@t"})
    git("init", "-q")
    (tmp_path / "mod.py").write_text("X = 1\n")
    git("add", "mod.py")
    git("commit", "-q", "-m", "one")
    monkeypatch.setattr(provenance, "REPO_DIR", str(tmp_path))
    return tmp_path


def test_a_clean_checkout_is_its_commit(repo):
    v = provenance.project_version()
    assert len(v["commit"]) == 40 and v["dirty"] is False and v["diff_sha256"] is None


def test_a_job_output_file_in_the_checkout_does_not_change_the_version(repo):
    """Rule: Slurm writes each array task's output into the submit directory (the checkout) and
    it grows while the shards run; shards started at different times are still one version."""
    clean = provenance.project_version()
    (repo / "ckcd-sweep-7_0.out").write_text("shard 0 ...\n")
    first = provenance.project_version()
    (repo / "ckcd-sweep-7_0.out").write_text("shard 0 ...\nmore\n")
    (repo / "ckcd-sweep-7_1.out").write_text("shard 1 ...\n")
    assert provenance.project_version() == first == clean


def test_changed_or_new_code_is_another_version(repo):
    clean = provenance.project_version()
    (repo / "new_module.py").write_text("Y = 2\n")  # untracked code changes what a run does
    untracked = provenance.project_version()
    assert untracked["dirty"] and untracked["commit"] == clean["commit"]
    (repo / "new_module.py").write_text("Y = 3\n")
    assert provenance.project_version()["diff_sha256"] != untracked["diff_sha256"]
    (repo / "new_module.py").unlink()
    (repo / "mod.py").write_text("X = 2\n")  # a tracked change
    changed = provenance.project_version()
    assert changed["dirty"] and changed["diff_sha256"] not in (None, untracked["diff_sha256"])


def test_no_git_is_an_unknown_version(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "REPO_DIR", str(tmp_path))  # not a repository
    assert provenance.project_version()["commit"] is None
