"""The Python a plot check runs a plot script under: the first of $MINITRAIN_PYTHON, the checking
interpreter and /usr/bin/python3 that can import matplotlib (shared by check_plot_bench.py and
check_plot_metrics.py, which sit beside this file)."""
import os
import subprocess
import sys


def has_matplotlib(python):
    try:
        return subprocess.run([python, "-c", "import matplotlib"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def pick_python():
    """None when no candidate has matplotlib: the caller runs the checks that need none and skips."""
    for python in (os.environ.get("MINITRAIN_PYTHON"), sys.executable, "/usr/bin/python3"):
        if python and has_matplotlib(python):
            return python
    return None
