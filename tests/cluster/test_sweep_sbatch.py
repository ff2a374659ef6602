"""cluster/sweep.sbatch without Slurm: run with bash and fake SLURM_ARRAY_* variables against a fake
checkout whose ckcd-coex records its argv and environment. It runs as root on cluster nodes, so it
must build exactly `ckcd-coex run SCENARIO... OPTION... --shard I/N --out OUTDIR/shardI`, each argument
one word, and refuse with a clear message before it runs anything: a bad argument or shard
environment, a run option it does not know, a checkout other than CKCD_COEX_DIR or the submit
directory, and, as root, a checkout or an OUTDIR that another user could have planted or could
redirect. As root ckcd-coex gets a clean environment; as another user it goes through `sudo -n`,
and a sudo that will not run it is a refusal (2), not a failed run (1).

The tests that need the script to run as root are skipped when the tests do not run as root (the
files they plant must be root's and another user's). Those that need it to run as another user
put it in a user namespace when the tests run as root (as_another_user below)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.cluster.conftest import make_fake_checkout, make_fake_sudo
from tests.conftest import REPO

SCRIPT = os.path.join(REPO, "cluster", "sweep.sbatch")
SHARD_1_OF_3 = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "2"}
SHARD_0_OF_1 = {"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_MAX": "0"}
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OTHER_UID = 65534  # nobody: "another user" for the files the root tests plant
IN_NAMESPACE_UID = 1000  # the script's $EUID when as_another_user puts it in a user namespace

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the script's root checks run only as root, "
                                "and planting another user's files needs root")


def as_another_user(argv: list[str]) -> list[str]:
    """argv run by a user other than root. When the tests are not root, as it is. As root, in a new user
    namespace where this process's uid is IN_NAMESPACE_UID: the script's $EUID is not 0, while the
    files the test made (root's) stay its own to read and write."""
    if os.geteuid() != 0:
        return argv
    return ["unshare", "--user", f"--map-user={IN_NAMESPACE_UID}", f"--map-group={IN_NAMESPACE_UID}", *argv]


def run_script(tmp_path, args, env, cwd=None, user=False):
    """bash cluster/sweep.sbatch ARGS with only ENV (and PATH, a fake sudo first): nothing of the
    caller's SLURM_* leaks in. user=True: run by another user than root (as_another_user)."""
    bindir = os.path.join(str(tmp_path), "fakebin")
    if not os.path.isdir(bindir):
        make_fake_sudo(tmp_path)
    full = {"PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "SUDO_RECORD": str(tmp_path / "sudo"), **env}
    argv = ["bash", SCRIPT, *args]
    return subprocess.run(as_another_user(argv) if user else argv, env=full, cwd=cwd or str(tmp_path),
                          capture_output=True, text=True, timeout=30)


def _nul_list(path) -> list[str]:
    with open(path, "rb") as f:
        return [a.decode() for a in f.read().split(b"\0")[:-1]]


def recorded_argv(checkout) -> list[str]:
    """The argv the fake ckcd-coex of this checkout last ran with."""
    return _nul_list(os.path.join(checkout, "ran.argv"))


def recorded_environ(checkout) -> dict[str, str]:
    """The environment the fake ckcd-coex of this checkout last started with."""
    return dict(e.split("=", 1) for e in _nul_list(os.path.join(checkout, "ran.environ")))


def ran(checkout) -> bool:
    return os.path.exists(os.path.join(checkout, "ran.argv"))


def sudo_calls(tmp_path) -> list[str]:
    path = tmp_path / "sudo"
    return path.read_text().splitlines() if path.exists() else []


def assert_refused(got, checkout, *messages):
    """Exit 2, a message on stderr naming what is wrong, and ckcd-coex never ran."""
    assert got.returncode == 2, (got.stdout, got.stderr)
    assert got.stderr.startswith("sweep.sbatch: "), got.stderr
    for message in messages:
        assert message in got.stderr, got.stderr
    assert not ran(checkout), "ckcd-coex ran"


# -- what it runs ----------------------------------------------------------------------------------

def test_builds_the_exact_shard_command(tmp_path, fake_checkout):
    """Rule (one word per argument): spaces, commas and globs reach ckcd-coex unchanged, the run options
    follow the scenarios, --shard I/N and --out OUTDIR/shardI come last, and it runs in the checkout
    (through `sudo -n --` when not root)."""
    out = str(tmp_path / "out dir*")
    got = run_script(tmp_path, [out + "/", "bbr_cubic", "my runs/a b.toml", "--", "--repeat", "2", "--only",
                                "droptail,ckcd", "--seed", "7"],
                     {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    assert got.returncode == 3, got.stderr  # the fake's exit code for shard 1 is the script's
    assert recorded_argv(fake_checkout) == ["run", "bbr_cubic", "my runs/a b.toml", "--repeat", "2", "--only",
                                            "droptail,ckcd", "--seed", "7", "--shard", "1/3", "--out",
                                            out + "/shard1"]
    with open(os.path.join(out, "shard1", "cwd")) as f:
        assert f.read().strip() == os.path.realpath(fake_checkout)
    assert bool(sudo_calls(tmp_path)) == (os.geteuid() != 0)
    assert "sweep.sbatch: shard 1/3 on " in got.stdout


def test_passes_every_allowed_run_option_in_both_forms(tmp_path, fake_checkout):
    """Rule (run options): --repeat, --duration, --only, --seed, --until-trusted and --extra-max, with
    their value as the next word or after `=` (the only way to give one that starts with '-'),
    --no-shuffle and --resume pass."""
    options = ["--repeat", "3", "--duration=60", "--only", "ckcd", "--seed=-5", "--no-shuffle", "--resume",
               "--duration", "30.5", "--only=", "--repeat=2", "--seed", "11", "--until-trusted", "3",
               "--extra-max=2"]
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic", "--", *options],
                     {"CKCD_COEX_DIR": fake_checkout, **SHARD_0_OF_1})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(fake_checkout) == ["run", "bbr_cubic", *options, "--shard", "0/1", "--out",
                                            str(tmp_path / "o" / "shard0")]


def test_relative_outdir_is_relative_to_the_checkout(tmp_path, fake_checkout):
    got = run_script(tmp_path, ["results/sweep", "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_0_OF_1})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(fake_checkout)[-4:] == ["--shard", "0/1", "--out", "results/sweep/shard0"]
    assert os.path.isdir(os.path.join(fake_checkout, "results", "sweep", "shard0"))


def test_reruns_some_shards_of_n_and_says_the_array_size_is_overridden(tmp_path, fake_checkout):
    """`sbatch --array=3 --export=ALL,CKCD_SWEEP_SHARDS=8`: task 3 alone is shard 3/8; since a
    CKCD_SWEEP_SHARDS left in the submitter's shell would do the same silently, a warning says so."""
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic", "--", "--resume"],
                     {"CKCD_COEX_DIR": fake_checkout, "CKCD_SWEEP_SHARDS": "8", "SLURM_ARRAY_TASK_ID": "3",
                      "SLURM_ARRAY_TASK_COUNT": "1", "SLURM_ARRAY_TASK_MIN": "3", "SLURM_ARRAY_TASK_MAX": "3"})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(fake_checkout) == ["run", "bbr_cubic", "--resume", "--shard", "3/8", "--out",
                                            str(tmp_path / "o" / "shard3")]
    warnings = [ln for ln in got.stderr.splitlines() if ln.startswith("sweep.sbatch: warning: ")]
    assert len(warnings) == 1 and "CKCD_SWEEP_SHARDS=8 overrides the array's size" in warnings[0], got.stderr


def test_no_run_options_at_all(tmp_path, fake_checkout):
    """No `--`: the command has no run options (an empty array, expanded so that bash < 4.4 under
    `set -u` takes it too: see test_empty_arrays_are_expanded_for_old_bash)."""
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_0_OF_1})
    assert got.returncode == 0, got.stderr
    assert recorded_argv(fake_checkout) == ["run", "bbr_cubic", "--shard", "0/1", "--out",
                                            str(tmp_path / "o" / "shard0")]


def test_empty_arrays_are_expanded_for_old_bash():
    """Rule (bash < 4.4): under `set -u`, "${a[@]}" of an empty array is an unbound-variable error
    there (bash 4.4 changed it, so no bash here shows it). An array that may be empty (the run options,
    the variables kept for ckcd-coex) is expanded as ${a[@]+"${a[@]}"}; only arrays that always hold
    something are expanded plainly."""
    never_empty = {"scenarios", "cmd"}  # at least one scenario is required; cmd always has ckcd-coex
    with open(SCRIPT) as f:
        text = f.read()
    guarded = set(re.findall(r'\$\{(\w+)\[@\]\+"\$\{\1\[@\]\}"\}', text))
    plain = re.sub(r'\$\{(\w+)\[@\]\+"\$\{\1\[@\]\}"\}', "", text)
    unguarded = set(re.findall(r'\$\{(\w+)\[@\]\}', plain))
    assert "options" in guarded and "options" not in unguarded
    assert unguarded <= never_empty, f"plain expansions of arrays that may be empty: {unguarded - never_empty}"


# -- refusals of arguments and shard environments ------------------------------------------------

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
    ("OUTDIR with ..", ["results/../../etc", "bbr_cubic"], {}, "has a '..' component"),
    ("OUTDIR ending in ..", ["/tmp/x/..", "bbr_cubic"], {}, "has a '..' component"),
    ("option before --", ["OUT", "bbr_cubic", "--repeat", "2"], {}, "SCENARIO_OR_TOML --repeat starts with '-'"),
    ("--out in options", ["OUT", "bbr_cubic", "--", "--out", "/etc"], {}, "sets --shard and --out itself"),
    ("--out= in options", ["OUT", "bbr_cubic", "--", "--out=/etc"], {}, "sets --shard and --out itself"),
    ("abbreviated --shard", ["OUT", "bbr_cubic", "--", "--sha=0/1"], {}, "sets --shard and --out itself"),
    ("second --", ["OUT", "bbr_cubic", "--", "--", "x"], {}, "a second `--`"),
    # Run options: only the eight, written out in full.
    ("--help", ["OUT", "bbr_cubic", "--", "--help"], {}, "run option --help is not one this script passes on"),
    ("-h", ["OUT", "bbr_cubic", "--", "-h"], {}, "run option -h is not one"),
    ("abbreviated --help", ["OUT", "bbr_cubic", "--", "--he"], {}, "run option --he is not one"),
    ("abbreviated --repeat", ["OUT", "bbr_cubic", "--", "--rep", "2"], {}, "run option --rep is not one"),
    ("abbreviated --no-shuffle", ["OUT", "bbr_cubic", "--", "--no-shuf"], {}, "run option --no-shuf is not one"),
    ("abbreviated --seed=", ["OUT", "bbr_cubic", "--", "--se=3"], {}, "run option --se=3 is not one"),
    ("a flag with a value", ["OUT", "bbr_cubic", "--", "--resume=yes"], {}, "run option --resume=yes is not one"),
    ("another run option", ["OUT", "bbr_cubic", "--", "--verbose"], {}, "run option --verbose is not one"),
    ("a word after the options", ["OUT", "bbr_cubic", "--", "--resume", "seed001"], {},
     "run option seed001 is not one"),
    ("a value missing", ["OUT", "bbr_cubic", "--", "--repeat"], {}, "run option --repeat needs a value"),
    ("abbreviated --until-trusted", ["OUT", "bbr_cubic", "--", "--until", "3"], {}, "run option --until is not one"),
    ("abbreviated --extra-max=", ["OUT", "bbr_cubic", "--", "--extra=2"], {}, "run option --extra=2 is not one"),
    ("--extra-max without its value", ["OUT", "bbr_cubic", "--", "--extra-max"], {},
     "run option --extra-max needs a value"),
    ("--until-trusted -1 unjoined", ["OUT", "bbr_cubic", "--", "--until-trusted", "-1"], {},
     "write --until-trusted=-1 if you mean it"),
    ("an option as a value", ["OUT", "bbr_cubic", "--", "--only", "--help"], {},
     "the value --help of run option --only starts with '-'"),
    ("a negative value unjoined", ["OUT", "bbr_cubic", "--", "--seed", "-5"], {}, "write --seed=-5 if you mean it"),
    ("control character in a value", ["OUT", "bbr_cubic", "--", "--only", "a\nb"], {}, "has a control character"),
    # The shard environment.
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
    # CKCD_SWEEP_SHARDS=2 left in the shell from an earlier batch, now a 3-task array: task 1 alone
    # would pass as shard 1/2, and tasks 0 and 2 would both run shard 0/2's runs.
    ("array beyond shards", ["OUT", "bbr_cubic"], {"CKCD_SWEEP_SHARDS": "2"},
     "the array's highest task 2 is not below CKCD_SWEEP_SHARDS=2"),
    ("shards without the array's max", ["OUT", "bbr_cubic"],
     {"CKCD_SWEEP_SHARDS": "8", "SLURM_ARRAY_TASK_MAX": None}, "SLURM_ARRAY_TASK_MAX '' is not a shard number"),
]


@pytest.mark.parametrize("what,args,env,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refuses_before_running_anything(tmp_path, fake_checkout, what, args, env, message):
    """Rule (refuse first): a bad argument or shard environment exits 2 with a message naming it,
    and ckcd-coex never runs."""
    full = {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3, **env}
    got = run_script(tmp_path, args, {k: v for k, v in full.items() if v is not None})
    assert_refused(got, fake_checkout, message)


# -- the checkout ----------------------------------------------------------------------------------

def test_the_checkout_is_exactly_the_submit_dir(tmp_path, fake_checkout):
    """Without CKCD_COEX_DIR: SLURM_SUBMIT_DIR itself, wherever the job starts."""
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"],
                     {"SLURM_SUBMIT_DIR": fake_checkout, **SHARD_1_OF_3}, cwd="/")
    assert got.returncode == 3, got.stderr
    assert recorded_argv(fake_checkout)[-4:] == ["--shard", "1/3", "--out", str(tmp_path / "o" / "shard1")]
    with open(tmp_path / "o" / "shard1" / "cwd") as f:
        assert f.read().strip() == os.path.realpath(fake_checkout)


def test_not_a_checkout_above_the_submit_dir(tmp_path, fake_checkout):
    """Rule (no search): a submit directory inside a checkout is not the checkout; the refusal names
    both ways to give one."""
    sub = os.path.join(fake_checkout, "results", "x")
    os.makedirs(sub)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"SLURM_SUBMIT_DIR": sub, **SHARD_1_OF_3},
                     cwd="/")
    assert_refused(got, fake_checkout, "no ckcd-coex checkout", "CKCD_COEX_DIR is not set", "SLURM_SUBMIT_DIR",
                   sub)


def test_not_the_directory_the_job_started_in(tmp_path):
    """Rule (no fallback to `.`): slurmstepd starts a job in /tmp when its submit directory is missing on
    the node, and anyone can plant ckcd_coex.py and .venv/bin/ckcd-coex there: the script must not
    run them, with the submit directory missing or with no submit directory at all."""
    planted_tmp = tmp_path / "tmp"
    planted = make_fake_checkout(planted_tmp)  # /tmp/ckcd_coex.py and /tmp/.venv/bin/ckcd-coex, in effect
    for env in ({"SLURM_SUBMIT_DIR": str(tmp_path / "missing on this node")}, {}):
        got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {**env, **SHARD_1_OF_3}, cwd=planted)
        assert_refused(got, planted, "no ckcd-coex checkout", "CKCD_COEX_DIR", "SLURM_SUBMIT_DIR")


def test_refuses_a_directory_that_is_no_checkout(tmp_path):
    """CKCD_COEX_DIR, when set, must be a checkout given by its absolute path: no falling back to another one."""
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"CKCD_COEX_DIR": str(tmp_path), **SHARD_1_OF_3})
    assert got.returncode == 2 and "is not a ckcd-coex checkout" in got.stderr, got.stderr
    checkout = make_fake_checkout(tmp_path / "elsewhere")
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"CKCD_COEX_DIR": "elsewhere/checkout", **SHARD_1_OF_3})
    assert_refused(got, checkout, "CKCD_COEX_DIR elsewhere/checkout is not an absolute path")
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"SLURM_SUBMIT_DIR": str(tmp_path), **SHARD_1_OF_3}, cwd="/")
    assert got.returncode == 2 and "no ckcd-coex checkout" in got.stderr, got.stderr


def test_refuses_a_checkout_path_with_an_equals_sign(tmp_path):
    """env(1) and sudo take a leading NAME=VALUE word for a variable: /srv/a=b/.venv/bin/ckcd-coex would
    never be run as a command."""
    checkout = make_fake_checkout(tmp_path / "a=b")
    got = run_script(tmp_path, ["OUT", "bbr_cubic"], {"CKCD_COEX_DIR": checkout, **SHARD_1_OF_3})
    assert_refused(got, checkout, "has a '='")


def _plant(path, *, uid=0, mode=None):
    if uid:
        os.lchown(path, uid, uid)
    if mode is not None:
        os.chmod(path, mode)


# (what, how to spoil the fake checkout (a function of the checkout path), the message)
UNTRUSTED_CHECKOUTS = [
    ("checkout another user's", lambda c: _plant(c, uid=OTHER_UID), "the checkout", "is owned by uid 65534"),
    ("checkout group-writable", lambda c: _plant(c, mode=0o775), "the checkout", "writable by group or others"),
    (".venv world-writable", lambda c: _plant(f"{c}/.venv", mode=0o757), "the checkout's .venv",
     "writable by group or others"),
    (".venv/bin another user's", lambda c: _plant(f"{c}/.venv/bin", uid=OTHER_UID), "the checkout's .venv/bin",
     "is owned by uid 65534"),
    ("ckcd-coex another user's", lambda c: _plant(f"{c}/.venv/bin/ckcd-coex", uid=OTHER_UID),
     "the checkout's ckcd-coex", "is owned by uid 65534"),
    ("ckcd-coex group-writable", lambda c: _plant(f"{c}/.venv/bin/ckcd-coex", mode=0o775),
     "the checkout's ckcd-coex", "writable by group or others (mode 0775)"),
]


@needs_root
@pytest.mark.parametrize("what,spoil,which,message", UNTRUSTED_CHECKOUTS, ids=[u[0] for u in UNTRUSTED_CHECKOUTS])
def test_as_root_refuses_a_checkout_another_user_controls(tmp_path, fake_checkout, what, spoil, which, message):
    """Rule (root runs only root's): the checkout, .venv, .venv/bin and ckcd-coex must be root's and
    writable by no one else, or another user could have put the ckcd-coex that root runs."""
    spoil(fake_checkout)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    assert_refused(got, fake_checkout, which, message, "refusing to run it as root")


@needs_root
def test_as_root_refuses_a_symlinked_venv(tmp_path):
    """.venv a symlink (even root's, to root's venv): the script checks what it runs, not where a link points."""
    checkout = make_fake_checkout(tmp_path)
    os.rename(f"{checkout}/.venv", tmp_path / "venv")
    os.symlink(tmp_path / "venv", f"{checkout}/.venv")
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"CKCD_COEX_DIR": checkout, **SHARD_1_OF_3})
    assert_refused(got, checkout, "the checkout's .venv", "is a symbolic link, not a directory")


# (what, the parent directory's owner and mode, the message; None: accepted)
CHECKOUT_PARENTS = [
    ("another user's", OTHER_UID, 0o755, "is owned by uid 65534, not root"),
    ("world-writable", 0, 0o777, "is writable by group or others and not sticky (mode 0777)"),
    ("group-writable", 0, 0o775, "is writable by group or others and not sticky (mode 0775)"),
    ("sticky and world-writable, as /tmp", 0, 0o1777, None),
]


@needs_root
@pytest.mark.parametrize("what,uid,mode,message", CHECKOUT_PARENTS, ids=[p[0] for p in CHECKOUT_PARENTS])
def test_as_root_the_directories_above_the_checkout(tmp_path, what, uid, mode, message):
    """Rule: every directory above the checkout, up to /, is root's and others cannot rename what is in
    it (not writable by group or others, or sticky: a root clone in /tmp is fine)."""
    parent = tmp_path / "parent"
    checkout = make_fake_checkout(parent)
    _plant(parent, uid=uid, mode=mode)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"CKCD_COEX_DIR": checkout, **SHARD_1_OF_3})
    if message is None:
        assert got.returncode == 3 and ran(checkout), got.stderr
    else:
        assert_refused(got, checkout, f"the directory {parent} above the checkout", message)


# -- as root: OUTDIR -------------------------------------------------------------------------------

def _mkdirs(path):
    """path and its missing parents, each 0755 whatever the umask (root's own directories, no more)."""
    missing = []
    while not os.path.exists(path):
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        d.mkdir()
        os.chmod(d, 0o755)


def _outdir_symlink_of_another_user(t):
    _mkdirs(t / "real")
    os.symlink(t / "real", t / "out")
    os.lchown(t / "out", OTHER_UID, OTHER_UID)
    return str(t / "out")


def _ancestor_symlink_of_another_user(t):
    _mkdirs(t / "real")
    os.symlink(t / "real", t / "link")
    os.lchown(t / "link", OTHER_UID, OTHER_UID)
    return str(t / "link" / "sweep")


def _root_symlink_to_another_users_directory(t):
    _mkdirs(t / "alice")
    os.chown(t / "alice", OTHER_UID, OTHER_UID)
    os.symlink(t / "alice", t / "out")  # root's link: what it points to is another user's
    return str(t / "out")


def _outdir_of_another_user(t):
    _mkdirs(t / "out")
    os.chown(t / "out", OTHER_UID, OTHER_UID)
    return str(t / "out")


def _shard_dir_of_another_user(t):
    _mkdirs(t / "out" / "shard1")
    os.chown(t / "out" / "shard1", OTHER_UID, OTHER_UID)
    return str(t / "out")


def _ancestor_of_another_user(t):
    _mkdirs(t / "home" / "alice")
    os.chown(t / "home" / "alice", OTHER_UID, OTHER_UID)
    return str(t / "home" / "alice" / "results")


def _world_writable_ancestor(t):
    _mkdirs(t / "shared" / "results")
    os.chmod(t / "shared", 0o777)
    return str(t / "shared" / "results" / "sweep")


def _missing_in_a_sticky_directory(t):
    _mkdirs(t / "tmp")
    os.chmod(t / "tmp", 0o1777)
    return str(t / "tmp" / "sweep")  # anyone could mkdir it first


def _existing_in_a_sticky_directory(t):
    _mkdirs(t / "tmp" / "sweep")
    os.chmod(t / "tmp", 0o1777)
    return str(t / "tmp" / "sweep")  # root's, made beforehand: fine


def _root_symlink_to_a_root_directory(t):
    _mkdirs(t / "real")
    os.symlink(t / "real", t / "out")
    return str(t / "out")


# (what, makes the directories under tmp_path and returns OUTDIR, the message; None: accepted)
OUTDIRS = [
    ("OUTDIR another user's symlink", _outdir_symlink_of_another_user, "/t/out is a symlink owned by uid 65534, not root"),
    ("a directory above it another user's symlink", _ancestor_symlink_of_another_user,
     "/t/link is a symlink owned by uid 65534, not root"),
    ("root's symlink to another user's directory", _root_symlink_to_another_users_directory,
     "/t/alice) is owned by uid 65534, not root"),
    ("OUTDIR another user's", _outdir_of_another_user, "/t/out is owned by uid 65534, not root"),
    ("OUTDIR/shardI another user's", _shard_dir_of_another_user, "/t/out/shard1 is owned by uid 65534, not root"),
    ("a directory above it another user's", _ancestor_of_another_user,
     "/t/home/alice is owned by uid 65534, not root"),
    ("a directory above it world-writable", _world_writable_ancestor,
     "/t/shared is writable by group or others and not sticky (mode 0777)"),
    ("OUTDIR to be made in a sticky directory", _missing_in_a_sticky_directory, "anyone could create it first"),
    ("OUTDIR made in a sticky directory", _existing_in_a_sticky_directory, None),
    ("root's symlink to root's directory", _root_symlink_to_a_root_directory, None),
]


@needs_root
@pytest.mark.parametrize("what,make,message", OUTDIRS, ids=[o[0] for o in OUTDIRS])
def test_as_root_writes_only_where_root_controls(tmp_path, fake_checkout, what, make, message):
    """Rule (root writes only into root's directories): OUTDIR/shardI's existing components, as written
    and as resolved, are root's and not writable by others unless sticky, no symlink among them is
    another user's, and its missing part is not made where others may write at all."""
    t = tmp_path / "t"
    _mkdirs(t)
    outdir = make(t)
    got = run_script(tmp_path, [outdir, "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    if message is None:
        assert got.returncode == 3 and ran(fake_checkout), got.stderr
        assert os.path.isdir(os.path.join(outdir, "shard1"))
    else:
        assert_refused(got, fake_checkout, "OUTDIR's", message)
        assert "root writes results only into directories root controls" in got.stderr


@needs_root
def test_as_root_a_relative_outdir_is_checked_in_the_checkout(tmp_path, fake_checkout):
    """A relative OUTDIR is the checkout's (the script runs there), and is checked there: not in the
    directory the job started in, where `results` does not exist."""
    _mkdirs(tmp_path / "alice")
    os.chown(tmp_path / "alice", OTHER_UID, OTHER_UID)
    os.symlink(tmp_path / "alice", os.path.join(fake_checkout, "results"))
    os.lchown(os.path.join(fake_checkout, "results"), OTHER_UID, OTHER_UID)
    got = run_script(tmp_path, ["results/sweep", "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    assert_refused(got, fake_checkout, f"OUTDIR's {fake_checkout}/results is a symlink owned by uid 65534")


# -- as root: the environment ----------------------------------------------------------------------

@needs_root
@pytest.mark.parametrize("lab_lock", [None, "/run/ckcd-test lab.lock"])
def test_as_root_ckcd_coex_gets_a_clean_environment(tmp_path, fake_checkout, lab_lock):
    """Rule (nothing of the submitter's environment): ckcd-coex runs with PATH of the system's
    directories, LC_ALL=C, HOME=/root and CKCD_LAB_LOCK when it is set; not PYTHONPATH (which code
    Python imports), LD_PRELOAD, the submitter's PATH (which iperf3 and git run), HOME, SLURM_*."""
    planted = {"PYTHONPATH": str(tmp_path / "planted"), "LD_PRELOAD": "", "HOME": "/home/alice",
               "LC_ALL": "de_DE.UTF-8", "CKCD_LINK_BIN": str(tmp_path / "planted" / "ckcd-link"),
               "SLURM_JOB_ID": "7", "SLURM_SUBMIT_DIR": fake_checkout, "PYTHONSTARTUP": "x"}
    env = {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3, **planted}
    if lab_lock:
        env["CKCD_LAB_LOCK"] = lab_lock
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], env)
    assert got.returncode == 3, got.stderr
    want = {"PATH": SYSTEM_PATH, "LC_ALL": "C", "HOME": "/root"}
    if lab_lock:
        want["CKCD_LAB_LOCK"] = lab_lock
    assert recorded_environ(fake_checkout) == want


@needs_root
def test_as_root_the_scripts_own_commands_come_from_the_system(tmp_path, fake_checkout):
    """As root the submitter's PATH does not choose the script's commands either: an `env` or `stat`
    first in it (or in the directory the job started in, through an empty PATH entry) is not run."""
    bindir = make_fake_sudo(tmp_path)
    for name in ("env", "stat", "id"):
        with open(os.path.join(bindir, name), "w") as f:
            f.write(f"#!/bin/sh\ntouch {tmp_path}/planted-{name}-ran\nexit 0\n")
        os.chmod(os.path.join(bindir, name), 0o755)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"], {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3})
    assert got.returncode == 3, got.stderr
    assert not [p for p in os.listdir(tmp_path) if p.startswith("planted-")]
    assert not sudo_calls(tmp_path)  # root: no sudo, whatever `id` would say


# -- as another user: sudo -------------------------------------------------------------------------

def test_as_another_user_ckcd_coex_runs_through_sudo(tmp_path, fake_checkout):
    """Rule (sudo): the script asks `sudo -n -l -- CKCD_COEX` first, then runs `sudo -n -- CKCD_COEX run ...`;
    $EUID says who it runs as, not an `id` in the submitter's PATH."""
    bindir = make_fake_sudo(tmp_path)
    with open(os.path.join(bindir, "id"), "w") as f:
        f.write("#!/bin/sh\necho 0\n")  # `id -u` would say root
    os.chmod(os.path.join(bindir, "id"), 0o755)
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic", "--", "--resume"],
                     {"CKCD_COEX_DIR": fake_checkout, **SHARD_1_OF_3}, user=True)
    assert got.returncode == 3, got.stderr
    ckcd_coex = os.path.join(os.path.realpath(fake_checkout), ".venv", "bin", "ckcd-coex")
    assert sudo_calls(tmp_path) == [f"-n -l -- {ckcd_coex}",
                                    f"-n -- {ckcd_coex} run bbr_cubic --resume --shard 1/3 --out {tmp_path}/o/shard1"]
    assert recorded_argv(fake_checkout)[0] == "run"


def test_as_another_user_a_sudo_that_will_not_run_it_is_a_refusal(tmp_path, fake_checkout):
    """Rule (exit status 2 for a refusal): no sudo rule, or one that wants a password, exits 2 with a
    message before anything runs, not 1 as a failed run would."""
    got = run_script(tmp_path, [str(tmp_path / "o"), "bbr_cubic"],
                     {"CKCD_COEX_DIR": fake_checkout, "FAKE_SUDO_DENY": "1", **SHARD_1_OF_3}, user=True)
    assert_refused(got, fake_checkout, "sudo will not run", "without a password", "NOPASSWD")
    assert sudo_calls(tmp_path) == [f"-n -l -- {os.path.realpath(fake_checkout)}/.venv/bin/ckcd-coex"]


# -- the script itself -----------------------------------------------------------------------------

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
