"""cluster/sweep.sbatch without Slurm: run with bash and fake SLURM_ARRAY_* variables against a fake
checkout whose ckcd-coex records its argv. It runs as root on cluster nodes, so it must build exactly
`ckcd-coex run SCENARIO... OPTION... --shard I/N --out OUTDIR/shardI`, each argument one word, and
refuse a bad argument or shard environment with a clear message before it runs anything."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.cluster.conftest import make_fake_sudo
from tests.conftest import REPO

SCRIPT = os.path.join(REPO, "cluster", "sweep.sbatch")
SHARD_1_OF_3 = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "2"}


def run_script(tmp_path, args, env, cwd=None):
    """bash cluster/sweep.sbatch ARGS with only ENV (and PATH): nothing of the caller's SLURM_* leaks in."""
    bindir = os.path.join(str(tmp_path), "fakebin")
    if not os.path.isdir(bindir):
        make_fake_sudo(tmp_path)
    full = {"PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "FAKE_RECORD": str(tmp_path / "argv"),
            "SUDO_RECORD": str(tmp_path / "sudo"), **env}
    return subprocess.run(["bash", SCRIPT, *args], env=full, cwd=cwd or str(tmp_path), capture_output=True,
                          text=True, timeout=30)


def recorded_argv(tmp_path):
    with open(tmp_path / "argv", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0")[:-1]]


def test_builds_the_exact_shard_command(tmp_path, fake_checkout):
    """Rule (one word per argument): spaces, commas and globs reach ckcd-coex unchanged, the run options
    follow the scenarios, --shard I/N and --out OUTDIR/shardI come last, and it runs in the checkout
    (through `sudo -n --` when not root)."""
    out = str(tmp_path / "out dir*")
    got = run_script(tmp_path, [out + "/", "bbr_cubic", "my runs/a b.toml", "--", "--repeat", "2", "--only",
                                "droptail,ckcd", "--seed", "7"],
                     {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    assert got.returncode == 3, got.stderr  # the fake's exit code for shard 1 is the script's
    assert recorded_argv(tmp_path) == ["run", "bbr_cubic", "my runs/a b.toml", "--repeat", "2", "--only",
                                       "droptail,ckcd", "--seed", "7", "--shard", "1/3", "--out",
                                       out + "/shard1"]
    with open(os.path.join(out, "shard1", "cwd")) as f:
        assert f.read().strip() == os.path.realpath(fake_checkout)
    assert os.path.exists(tmp_path / "sudo") == (os.geteuid() != 0)
    assert "sweep.sbatch: shard 1/3 on " in got.stdout


def test_relative_outdir_is_relative_to_the_checkout(tmp_path, fake_checkout):
    got = run_script(tmp_path, ["results/sweep", "bbr_cubic"],
                     {"CKCD_COEX_DIR": fake_checkout, "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "1",
                      "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "0"})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(tmp_path)[-4:] == ["--shard", "0/1", "--out", "results/sweep/shard0"]
    assert os.path.isdir(os.path.join(fake_checkout, "results", "sweep", "shard0"))


def test_finds_the_checkout_above_the_submit_dir(tmp_path, fake_checkout):
    """Without CKCD_COEX_DIR: SLURM_SUBMIT_DIR or the nearest directory above it that is a checkout."""
    sub = os.path.join(fake_checkout, "results", "x")
    os.makedirs(sub)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"SLURM_SUBMIT_DIR": sub, **SHARD_1_OF_3},
                     cwd="/")
    assert got.returncode == 3, got.stderr
    assert recorded_argv(tmp_path)[-4:] == ["--shard", "1/3", "--out", str(tmp_path / "o" / "shard1")]


def test_reruns_some_shards_of_n(tmp_path, fake_checkout):
    """`sbatch --array=3 --export=ALL,CKCD_SWEEP_SHARDS=8`: task 3 alone is shard 3/8."""
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic", "--", "--resume"],
                     {"CKCD_COEX_DIR": fake_checkout, "CKCD_SWEEP_SHARDS": "8", "SLURM_ARRAY_TASK_ID": "3",
                      "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "3"})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(tmp_path) == ["run", "bbr_cubic", "--resume", "--shard", "3/8", "--out",
                                       str(tmp_path / "o" / "shard3")]


NO_ARRAY = {k: None for k in SHARD_1_OF_3}
REFUSED = [
    # (what, args, environment over SHARD_1_OF_3 (None: unset), the message)
    ("no arguments", [], {}, "needs OUTDIR and at least one scenario"),
    ("no scenario", ["OUT"], {}, "needs OUTDIR and at least one scenario"),
    ("options only", ["OUT", "--", "--repeat", "2"], {}, "at least one scenario before `--`"),
    ("empty OUTDIR", ["", "bbr_cubic"], {}, "OUTDIR is empty"),
    ("newline in OUTDIR", ["out\nsweep.sbatch: shard 0/1", "bbr_cubic"], {}, "OUTDIR $'out\\nsweep.sbatch"),
    ("tab in OUTDIR", ["out\tx", "bbr_cubic"], {}, "has a control character"),
    ("OUTDIR an option", ["--help", "bbr_cubic"], {}, "OUTDIR --help starts with '-'"),
    ("option before --", ["OUT", "bbr_cubic", "--repeat", "2"], {}, "SCENARIO_OR_TOML --repeat starts with '-'"),
    ("--out in options", ["OUT", "bbr_cubic", "--", "--out", "/etc"], {}, "sets --shard and --out itself"),
    ("--out= in options", ["OUT", "bbr_cubic", "--", "--out=/etc"], {}, "sets --shard and --out itself"),
    ("abbreviated --shard", ["OUT", "bbr_cubic", "--", "--sha=0/1"], {}, "sets --shard and --out itself"),
    ("second --", ["OUT", "bbr_cubic", "--", "--", "x"], {}, "a second `--`"),
    ("not an array task", ["OUT", "bbr_cubic"], NO_ARRAY, "not an array task"),
    ("index not a number", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_ID": "1;id"}, "is not a shard number"),
    ("index octal-looking", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_ID": "01"}, "is not a shard number"),
    ("index negative", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_ID": "-1"}, "is not a shard number"),
    ("count missing", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_COUNT": None}, "SLURM_ARRAY_TASK_COUNT '' is not"),
    ("count not a number", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_COUNT": "$(id)"}, "is not a number of shards"),
    ("index beyond count", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "3"},
     "not 0..N-1"),
    ("array from 1", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "3"},
     "the array is 1..3 with 3 task(s), not 0..N-1"),
    ("stepped array", ["OUT", "bbr_cubic"], {"SLURM_ARRAY_TASK_MAX": "4"}, "not 0..N-1"),
    ("shards not a number", ["OUT", "bbr_cubic"], {"CKCD_SWEEP_SHARDS": "x"}, "CKCD_SWEEP_SHARDS x is not"),
    ("index beyond shards", ["OUT", "bbr_cubic"], {"CKCD_SWEEP_SHARDS": "1"}, "shard index 1 is not below"),
    ("zero shards", ["OUT", "bbr_cubic"], {"CKCD_SWEEP_SHARDS": "0"}, "must be at least 1"),
]


@pytest.mark.parametrize("what,args,env,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refuses_before_running_anything(tmp_path, fake_checkout, what, args, env, message):
    """Rule (refuse first): a bad argument or shard environment exits 2 with a message naming it,
    and ckcd-coex never runs."""
    full = {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3, **env}
    got = run_script(tmp_path, args, {k: v for k, v in full.items() if v is not None})
    assert got.returncode == 2, (got.stdout, got.stderr)
    assert got.stderr.startswith("sweep.sbatch: ") and message in got.stderr, got.stderr
    assert not os.path.exists(tmp_path / "argv"), "ckcd-coex ran"


def test_refuses_a_directory_that_is_no_checkout(tmp_path):
    """CKCD_COEX_DIR, when set, must be a checkout: no falling back to another one."""
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"CKCD_COEX_DIR": str(tmp_path), **SHARD_1_OF_3})
    assert got.returncode == 2 and "is not a ckcd-coex checkout" in got.stderr, got.stderr
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"SLURM_SUBMIT_DIR": str(tmp_path), **SHARD_1_OF_3}, cwd="/")
    assert got.returncode == 2 and "no ckcd-coex checkout" in got.stderr, got.stderr


def test_shellcheck_finds_nothing():
    """Rule (shell scripts pass shellcheck), as tests/unit/test_shellcheck.py holds the other root-run scripts."""
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck not found: run `make setup-tests` (installs Debian's shellcheck)")
    out = subprocess.run(["shellcheck", "--severity=style", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and not out.stdout.strip(), out.stdout + out.stderr


def test_sbatch_directives():
    """One task per node at a time: the script asks for the whole node, and names its output per task."""
    with open(SCRIPT) as f:
        directives = [ln.split(None, 1)[1].strip() for ln in f if ln.startswith("#SBATCH")]
    assert "--exclusive" in directives
    assert {"--nodes=1", "--ntasks=1", "--output=%x-%A_%a.out"} <= set(directives)
    assert any(d.startswith("--job-name=") for d in directives)
