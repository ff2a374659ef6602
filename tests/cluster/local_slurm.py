"""A single-node Slurm cluster on this machine, private to one test: `with LocalSlurm(run_dir) as slurm`.

It starts a munged of its own (a fresh key, a private socket), renders cluster/slurm.conf.in into
run_dir (this host as the one node, ports picked free, never 6817/6818) and starts slurmctld and
slurmd in the foreground as its children, then waits until sinfo shows the node idle. `env` is
what a Slurm command needs to reach this cluster (SLURM_CONF); `sbatch()` submits, `wait_job()`
waits for every task of a job (or array) to end and gives each one's state and exit code.

On exit it cancels every job of the cluster, then stops what it started, by PID: slurmd and
slurmctld, any slurmstepd or job process they left (found by a marker in their environment, which
slurmd's children inherit, and scanned for again until none is left, so a process forked meanwhile
is stopped too), munged last; SIGTERM, then SIGKILL after a bounded wait. A process is known by its
PID and start time, and signalled through a pidfd, so a PID reused by another process is never
signalled. Each step runs even when an earlier one raised (a daemon that will not die). It removes
only the socket directory it made under /run; run_dir and all in it stay for reading. If the
harness itself is killed (SIGKILL skips every teardown), its daemons still get SIGTERM from the
kernel (PR_SET_PDEATHSIG), and the next LocalSlurm stops the slurmstepd and job processes left
with a dead harness's marker before it starts.

Needs root (slurmd runs jobs as their users, munged's key must be root's) and Debian's slurmctld,
slurmd, slurm-client and munge (`make setup-tests`). No accounting: a finished job's state and
exit code come from slurmctld's job records, which the config keeps for an hour (MinJobAge).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from tests.waiting import eventually

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONF_TEMPLATE = os.path.join(REPO, "cluster", "slurm.conf.in")
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue", "scontrol", "scancel")
PARTITION = "test"  # cluster/slurm.conf.in's only partition
MARKER = "CKCD_LOCAL_SLURM"  # in the environment of every process this cluster starts
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE", "OUT_OF_MEMORY"}
SOCKET_DIR_PREFIX = "ckcd-slurm-"  # /run/ckcd-slurm-<harness PID>-XXXX: munged's socket
STRAY_GRACE_S = 3.0  # SIGTERM to SIGKILL for strays; slurmstepd ignores SIGTERM
# slurmstepd binds a UNIX socket SPOOL/NODE_JOB.STEP (each id up to 10 digits), and a socket's
# path has at most 107 bytes.
MAX_SOCKET_PATH = 107


def prerequisites_missing() -> str | None:
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd, munged's key)"
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        return (f"missing {', '.join(missing)}: run `make setup-tests` "
                "(Debian's slurmctld, slurmd, slurm-client, munge)")
    return None


@dataclasses.dataclass(frozen=True)
class TaskEnd:
    """How one job (or one array task) ended, from `scontrol show job`."""
    job_id: str  # the task's own job id
    task_id: int | None  # its array index; None for a job that is not an array
    state: str  # COMPLETED, FAILED, CANCELLED, ...
    exit_code: int  # the batch script's exit status
    signal: int  # the signal that ended it, 0 if none
    node: str

    @property
    def ok(self) -> bool:
        return self.state == "COMPLETED" and self.exit_code == 0 and self.signal == 0


def _free_ports(n: int) -> list[int]:
    """n distinct TCP ports free now (all held open until all are chosen)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _clean_environ() -> dict[str, str]:
    """This process's environment without what would steer Slurm's commands elsewhere: another
    cluster's SLURM_CONF, a job's SLURM_* (when the tests run inside one), SBATCH_PARTITION and
    the like (options), SQUEUE_FORMAT and the like (output formats the harness parses)."""
    steering = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCONTROL_", "SCANCEL_")
    return {k: v for k, v in os.environ.items() if not k.startswith(steering)}


try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: not in a forked child
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent():
    """In a daemon before exec: SIGTERM it if the harness dies without its teardown (SIGKILL).

    Only a safety net for the daemons (slurmstepd, forked later, does not inherit it): the
    teardown stops everything normally."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _parse_job_line(line: str) -> TaskEnd | None:
    def field(name):
        m = re.search(rf"(?:^| ){name}=(\S*)", line)
        return m.group(1) if m else None

    job_id, state = field("JobId"), field("JobState")
    if job_id is None or state is None:
        return None
    task = field("ArrayTaskId")
    code, _, sig = (field("ExitCode") or "0:0").partition(":")
    return TaskEnd(job_id=job_id, task_id=int(task) if task and task.isdigit() else None, state=state,
                   exit_code=int(code), signal=int(sig or 0), node=field("NodeList") or "")


class LocalSlurm:
    """A private single-node Slurm cluster; everything it writes goes under run_dir."""

    def __init__(self, run_dir: str, *, start_timeout_s: float = 60.0, stop_timeout_s: float = 10.0):
        self.run_dir = os.path.abspath(run_dir)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.node = socket.gethostname().split(".")[0]
        self.token = f"{os.getpid()}:{time.time_ns()}:{self.run_dir}"  # the harness's PID first
        self.conf = os.path.join(self.run_dir, "slurm.conf")
        self.env: dict[str, str] = {}
        self.start_s: float | None = None  # seconds from the first daemon's start to the node idle
        self._procs: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, str] = {}
        self._socket_dir: str | None = None

    # -- start -------------------------------------------------------------------------------

    def __enter__(self) -> "LocalSlurm":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        why = prerequisites_missing()
        if why:
            raise RuntimeError(why)
        if os.path.lexists(self.run_dir) and os.listdir(self.run_dir):
            raise RuntimeError(f"{self.run_dir} is not empty: a LocalSlurm needs a new or empty directory")
        spool = os.path.join(self.run_dir, "spool")
        if len(f"{spool}/{self.node}_{2**32 - 1}.{2**32 - 1}".encode()) > MAX_SOCKET_PATH:
            raise RuntimeError(f"{self.run_dir} is too long a path for Slurm's sockets in {spool}: use a shorter one")
        self._stop_orphans()
        os.makedirs(self.run_dir, mode=0o700, exist_ok=True)
        for sub in ("munge", "state", "spool", "log"):
            os.mkdir(os.path.join(self.run_dir, sub), 0o700)

        t0 = time.monotonic()
        munge_socket = self._start_munged()
        hw = self._hardware()
        with open(CONF_TEMPLATE) as f:
            text = f.read()
        ctld_port, slurmd_port = _free_ports(2)
        values = {
            "CLUSTER_NAME": "ckcdtest", "NODE_NAME": self.node, "RUN_DIR": self.run_dir,
            "MUNGE_SOCKET": munge_socket, "CTLD_PORT": str(ctld_port), "SLURMD_PORT": str(slurmd_port),
            **hw,
        }
        for key, value in values.items():
            text = text.replace(f"@{key}@", value)
        left = re.findall(r"@[A-Z_]+@", text)
        if left:
            raise RuntimeError(f"{CONF_TEMPLATE}: no value for {', '.join(sorted(set(left)))}")
        with open(self.conf, "w") as f:
            f.write(text)
        self.env = {**_clean_environ(), "SLURM_CONF": self.conf, MARKER: self.token}
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self._spawn("slurmd", ["slurmd", "-D", "-f", self.conf, "-N", self.node])
        eventually(self._node_idle, timeout_s=self.start_timeout_s, interval_s=0.2,
                   what=f"Slurm node {self.node} idle (logs in {self.run_dir}/log)")
        self.start_s = time.monotonic() - t0

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = os.path.join(self.run_dir, "log", f"{name}.out")
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env or self.env, cwd=self.run_dir, preexec_fn=_die_with_parent)
        self._procs[name] = proc
        self._logs[name] = log
        return proc

    def _start_munged(self) -> str:
        mdir = os.path.join(self.run_dir, "munge")
        key = os.path.join(mdir, "munge.key")
        # The key as Debian's create-munge-key made it: 1024 random bytes, readable by root only.
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
        try:
            os.write(fd, os.urandom(1024))
        finally:
            os.close(fd)
        # munged wants every directory above its socket searchable by all (clients of any user
        # connect to it), which run_dir's parents need not be (pytest's /tmp/pytest-of-root is
        # 0700), and a socket path fits in 107 bytes: so the socket gets a short directory of
        # its own under /run, 0711 (searchable, not listable), removed at stop. No --force.
        self._socket_dir = tempfile.mkdtemp(prefix=f"{SOCKET_DIR_PREFIX}{os.getpid()}-", dir="/run")
        os.chmod(self._socket_dir, 0o711)
        sock = os.path.join(self._socket_dir, "munge.socket")
        self.env = {**_clean_environ(), MARKER: self.token}
        self._spawn("munged", ["munged", "--foreground", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={mdir}/munged.pid", f"--log-file={mdir}/munged.log",
                               f"--seed-file={mdir}/munged.seed"])
        eventually(lambda: self._check_alive() and os.path.exists(sock), timeout_s=self.start_timeout_s,
                   what=f"munged's socket {sock}")
        return sock

    def _hardware(self) -> dict[str, str]:
        """This host as `slurmd -C` sees it: CPUs, sockets, cores, threads and memory."""
        out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=60, check=True).stdout
        line = next((ln for ln in out.splitlines() if ln.startswith("NodeName=")), "")
        found = dict(re.findall(r"(\w+)=(\S+)", line))
        want = {"CPUS": "CPUs", "BOARDS": "Boards", "SOCKETS_PER_BOARD": "SocketsPerBoard",
                "CORES_PER_SOCKET": "CoresPerSocket", "THREADS_PER_CORE": "ThreadsPerCore",
                "REAL_MEMORY": "RealMemory"}
        missing = [v for v in want.values() if not found.get(v, "").isdigit()]
        if missing:
            raise RuntimeError(f"`slurmd -C` gave no {', '.join(missing)}: {out!r}")
        return {placeholder: found[key] for placeholder, key in want.items()}

    def _check_alive(self) -> bool:
        """Raise, with its output, if a daemon we started has exited."""
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with status {proc.returncode}:\n{self.log_tail(name)}")
        return True

    def _node_idle(self) -> bool:
        self._check_alive()
        out = self.run(["sinfo", "-h", "-N", "-n", self.node, "-o", "%t"], check=False)
        return out.returncode == 0 and out.stdout.strip() == "idle"

    @property
    def daemon_pids(self) -> dict[str, int]:
        """The PIDs of the daemons it started and has not stopped: munged, slurmctld, slurmd."""
        return {name: proc.pid for name, proc in self._procs.items()}

    @property
    def socket_dir(self) -> str | None:
        """munged's socket directory under /run (None once stopped)."""
        return self._socket_dir

    def log_tail(self, name: str, lines: int = 30) -> str:
        paths = [self._logs.get(name, ""), os.path.join(self.run_dir, "log", f"{name}.log")]
        text = ""
        for p in paths:
            if p and os.path.exists(p):
                with open(p, errors="replace") as f:
                    text += "".join(f.readlines()[-lines:])
        return text

    # -- use ---------------------------------------------------------------------------------

    def run(self, argv: list[str], *, check: bool = True, timeout_s: float = 30.0,
            cwd: str | None = None) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        if check and out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {out.returncode}: {out.stderr.strip()}")
        return out

    def sbatch(self, args: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None) -> str:
        """Submit; return the job id (for an array, the array's job id). `env` adds to the job's environment."""
        out = subprocess.run(["sbatch", "--parsable", *args], env={**self.env, **(env or {})}, cwd=cwd,
                             capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch {' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
        job_id = out.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise RuntimeError(f"sbatch --parsable printed {out.stdout!r}")
        return job_id

    def job_records(self, job_id: str) -> list[TaskEnd]:
        """slurmctld's records of a job: one per array task once they are split, one per pending range."""
        out = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
        if out.returncode != 0:
            raise RuntimeError(f"scontrol knows no job {job_id}: {out.stderr.strip()}")
        return [r for r in map(_parse_job_line, out.stdout.splitlines()) if r]

    def wait_job(self, job_id: str, timeout_s: float) -> dict[int | None, TaskEnd]:
        """Wait until every task of the job has ended; return each one's end, by array index.

        Without accounting there is no sacct: slurmctld's own record of each task (kept MinJobAge
        after it ends) gives its state and exit code, so every task's code is known, not only the
        highest that `sbatch --wait` returns.
        """
        last: list[TaskEnd] = []

        def ended():
            self._check_alive()
            last[:] = self.job_records(job_id)
            return bool(last) and all(r.state in TERMINAL for r in last)

        try:
            eventually(ended, timeout_s=timeout_s, interval_s=0.2, what=f"job {job_id} ended")
        except AssertionError as err:
            states = ", ".join(f"{r.job_id}[{r.task_id}] {r.state}" for r in last)
            raise AssertionError(f"{err}; its tasks: {states or 'none'}") from None
        return {r.task_id: r for r in last}

    # -- stop --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Cancel every job, stop every process this cluster started, by PID. Safe to call twice.

        Each step runs whatever an earlier one raised (a TimeoutExpired from a daemon stuck in
        uninterruptible sleep, a KeyboardInterrupt): munged and the /run socket directory are not
        left behind because slurmd would not die. The error is raised once every step has run (of
        several, the last, with the earlier ones as its context)."""
        with contextlib.ExitStack() as later:  # its callbacks run last-pushed first, each in a finally
            later.callback(self._remove_socket_dir)
            later.callback(self._stop_child, "munged")
            later.callback(self._stop_marked)  # slurmstepd and job processes slurmd left: not our children
            later.callback(self._stop_child, "slurmctld")
            later.callback(self._stop_child, "slurmd")
            self._cancel_jobs()

    def _cancel_jobs(self) -> None:
        ctld = self._procs.get("slurmctld")
        if ctld is None or ctld.poll() is not None or not self.env.get("SLURM_CONF"):
            return
        try:
            self.run(["scancel", f"--partition={PARTITION}"], check=False, timeout_s=15)
            deadline = time.monotonic() + self.stop_timeout_s
            while time.monotonic() < deadline:
                out = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout_s=15)
                if out.returncode != 0 or not out.stdout.strip():
                    break
                time.sleep(0.2)
        except (subprocess.TimeoutExpired, OSError):
            pass  # the daemons are stopped below whatever the jobs do

    def _remove_socket_dir(self) -> None:
        if self._socket_dir:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def _stop_child(self, name: str) -> None:
        proc = self._procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(self.stop_timeout_s)

    def marked_pids(self) -> list[int]:
        """Processes that carry this cluster's marker: its daemons, slurmstepd, its jobs' processes."""
        return [pid for pid, _ in self._marked()]

    def _marked(self) -> list[tuple[int, int]]:
        """(PID, start time) of each process that carries this cluster's marker."""
        want = f"{MARKER}={self.token}".encode()
        return [(pid, start) for pid, token, start in _marked_processes() if token == want]

    def _stop_marked(self) -> None:
        daemons = {p.pid for p in self._procs.values()}
        _terminate(lambda: [(pid, start) for pid, start in self._marked() if pid not in daemons], STRAY_GRACE_S)

    def _stop_orphans(self) -> None:
        """Stop what an earlier LocalSlurm left when its process was killed (SIGKILL skips every
        teardown; its daemons die with it, but not slurmstepd and the jobs): processes marked with
        the token of a harness process that no longer exists, and its munge socket directory."""
        def orphans():
            found = []
            for pid, token, start in _marked_processes():
                owner = token.split(b"=", 1)[1].split(b":", 1)[0]
                if not (owner.isdigit() and _alive(int(owner))):
                    found.append((pid, start))
            return found

        left = orphans()
        if left:
            print(f"LocalSlurm: stopping {len(left)} process(es) a killed test cluster left: "
                  f"{' '.join(str(pid) for pid, _ in left)}", file=sys.stderr)
            _terminate(orphans, STRAY_GRACE_S)
        for name in os.listdir("/run"):
            owner = name[len(SOCKET_DIR_PREFIX):].split("-", 1)[0]
            if name.startswith(SOCKET_DIR_PREFIX) and owner.isdigit() and not _alive(int(owner)):
                shutil.rmtree(os.path.join("/run", name), ignore_errors=True)


def _start_time(pid: int) -> int | None:
    """When the process started (field 22 of /proc/PID/stat, clock ticks after boot); None when there
    is no such process, or it is a zombie. A PID and its start time name one process for good: a PID
    is reused only by a process that started later."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the command, which may hold anything
    except OSError:
        return None
    try:
        # fields[0] is field 3 (the state), so field 22 is fields[19].
        return None if fields[0] == b"Z" else int(fields[19])
    except (IndexError, ValueError):
        return None


def _marked_processes() -> list[tuple[int, bytes, int]]:
    """(PID, its MARKER=token entry, its start time) of every live process carrying a LocalSlurm marker."""
    prefix = f"{MARKER}=".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        pid = int(entry)
        start = _start_time(pid)  # before the environment: the token read next is this process's or none
        if start is None:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                tokens = [e for e in f.read().split(b"\0") if e.startswith(prefix)]
        except OSError:
            continue  # gone, or not ours to read
        if tokens and _start_time(pid) == start:  # still the same process, and not a zombie
            found.append((pid, tokens[0], start))
    return found


def _signal(pid: int, start: int, sig: int) -> None:
    """Send sig to the process that had this PID and start time when it was found, and to no other:
    if the PID now names a process that started later (reused), nothing is sent.

    Through a pidfd where there is one (Linux 5.3, Python 3.9): the pidfd is opened first and names
    the process holding the PID at that moment, the start time read after it says whether that is
    ours, and a signal sent through it reaches that process or none, never a later one. Without
    pidfds, the start time is compared just before kill(); only a PID reused within those
    microseconds could be hit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        fd = None  # no pidfd_open here
    try:
        if _start_time(pid) != start:
            return  # gone, or its PID is now another process's
        if fd is not None:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass
    finally:
        if fd is not None:
            os.close(fd)


def _terminate(scan, timeout_s: float, poll_s: float = 0.1) -> None:
    """Stop every process scan() finds, scanning again and again until it finds none: a process that
    appears meanwhile (forked by one being stopped) is stopped too, not only a snapshot of them.
    scan() gives (PID, start time) pairs, so a PID that another process has taken since is not
    signalled (_signal). SIGTERM for timeout_s, then SIGKILL (slurmstepd ignores SIGTERM); each
    process gets each signal once. After 2 * timeout_s it gives up and says what is left."""
    t0 = time.monotonic()
    sent: dict[tuple[int, int], int] = {}
    while True:
        found = scan()
        if not found:
            return
        elapsed = time.monotonic() - t0
        if elapsed > 2 * timeout_s:
            print(f"LocalSlurm: {len(found)} process(es) still there after SIGKILL: "
                  f"{' '.join(str(pid) for pid, _ in found)}", file=sys.stderr)
            return
        sig = signal.SIGKILL if elapsed >= timeout_s else signal.SIGTERM
        for proc in found:
            if sent.get(proc) != sig:
                _signal(*proc, sig)
                sent[proc] = sig
        time.sleep(poll_s)
