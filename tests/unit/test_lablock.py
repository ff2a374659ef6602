import subprocess
import sys

from ovs_config.lablock import lab_lock


def test_nested_lock_in_one_process_does_not_wait_on_itself(tmp_path):
    path = str(tmp_path / "lock")
    with lab_lock(path=path):
        with lab_lock(path=path, timeout_s=1):
            pass
        # still held after the inner one: another process cannot take it
        other = subprocess.run([sys.executable, "-c",
                                "import sys; from ovs_config.lablock import lab_lock\n"
                                f"with lab_lock(path={path!r}, timeout_s=1): pass"],
                               capture_output=True, text=True, cwd=".")
        assert other.returncode != 0 and "TimeoutError" in other.stderr
    with lab_lock(path=path, timeout_s=1):  # released at the end
        pass
