#!/usr/bin/env python3
"""Ctrl-C and SIGTERM during `minitrain train`, as a user sends them, against the real binary.

  interrupt_check.py MINITRAIN WORKDIR sigint|sigterm|twice

sigint, sigterm: the run is signalled once mid-way. It must finish the step, write the checkpoint
and --save, exit 130 (143 for SIGTERM) saying how to continue; continuing with --resume must end
with weights byte-identical to a run that was never interrupted.

twice: a second SIGINT while the first one's orderly stop is writing. The process must end at
once (killed by SIGINT) and leave the last periodic checkpoint intact: --resume from it again ends
byte-identical to the straight run. HOLD_LIBRARY (hold_in_rename.cpp, preloaded) holds the process
in its first file write after the first SIGINT, and the second is sent once it is held: no race
with the machine's load, no retry.

  interrupt_check.py MINITRAIN WORKDIR twice HOLD_LIBRARY
"""

import os
import signal
import subprocess
import sys
import time

STEPS = 100
# Wide enough that a step takes some 10 ms, so a signal lands mid-run and two signals 5 ms apart
# land in one step.
RUN = ["train", "--model", "mlp:8,512,512,1", "--data", "synthetic:2048", "--batch-size", "128",
       "--steps", str(STEPS), "--device", "cpu", "--threads", "1", "--progress", "none"]


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(args, **kw):
    return subprocess.run([MINITRAIN] + args, capture_output=True, text=True, timeout=300, **kw)


def log_lines(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def wait_for(condition, p, what, seconds=120):
    deadline = time.time() + seconds
    while not condition():
        if p.poll() is not None or time.time() > deadline:
            fail(f"the run ended (or stalled) before {what}: {p.communicate()[0]}")
        time.sleep(0.005)


def start_and_signal(args, log, after_steps, sig):
    """Starts a run, waits until its log has `after_steps` lines, sends `sig`; returns its exit
    code and its output."""
    p = subprocess.Popen([MINITRAIN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: log_lines(log) >= after_steps, p, f"step {after_steps}")
    p.send_signal(sig)
    out = p.communicate(timeout=60)[0]
    return p.returncode, out


def start_and_signal_twice(args, log, after_steps, hold_library):
    """Starts a run with hold_library preloaded, waits until its log has `after_steps` lines, arms
    the hold and sends a SIGINT; once the process is held in its next file write (the orderly
    stop's, or a periodic checkpoint's just before it), sends the second. Returns its exit code,
    its output and the seconds from the second signal to its end."""
    armed, held = os.path.abspath("hold.armed"), os.path.abspath("hold.held")
    env = dict(os.environ, LD_PRELOAD=hold_library, MINITRAIN_TEST_HOLD_ARMED=armed,
               MINITRAIN_TEST_HOLD_HELD=held)
    p = subprocess.Popen([MINITRAIN] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
    wait_for(lambda: log_lines(log) >= after_steps, p, f"step {after_steps}")
    open(armed, "w").close()
    p.send_signal(signal.SIGINT)
    wait_for(lambda: os.path.exists(held), p, "it was held in a file write after the first SIGINT")
    sent = time.time()
    p.send_signal(signal.SIGINT)
    out = p.communicate(timeout=120)[0]
    return p.returncode, out, time.time() - sent


def same_file(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def main():
    global MINITRAIN
    MINITRAIN, work, case = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3]
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    for f in os.listdir("."):
        if os.path.isfile(f):
            os.remove(f)

    straight = run(RUN + ["--save", "straight.safetensors"])
    if straight.returncode != 0:
        fail("the straight run failed: " + straight.stdout + straight.stderr)

    ck = f"ck_{case}"
    args = RUN + ["--checkpoint-dir", ck, "--save", "w.safetensors", "--log", "m.jsonl"]
    if case == "twice":
        args += ["--checkpoint-every", "5"]
        code, out, took = start_and_signal_twice(args, "m.jsonl", 12, os.path.abspath(sys.argv[4]))
        if code != -signal.SIGINT:
            fail(f"two SIGINTs: exit {code}, expected death by SIGINT\n{out}")
        if took > 5:
            fail(f"two SIGINTs: the process took {took:.1f} s to end, expected at once")
        if not os.path.exists(f"{ck}/checkpoint.safetensors"):
            fail("no checkpoint left from before the signals")
    else:
        sig = signal.SIGINT if case == "sigint" else signal.SIGTERM
        code, out = start_and_signal(args, "m.jsonl", 5, sig)
        want = 128 + sig
        if code != want:
            fail(f"exit {code}, expected {want}\n{out}")
        name = "SIGINT" if case == "sigint" else "SIGTERM"
        if f"interrupted by {name} after step" not in out or "run the same command with --resume" not in out:
            fail("the message does not say what happened and how to continue:\n" + out)
        stopped_at = int(out.split(f"interrupted by {name} after step ")[1].split()[0])
        if not 5 <= stopped_at < STEPS:
            fail(f"stopped after step {stopped_at}, expected mid-run\n{out}")
        if log_lines("m.jsonl") != stopped_at:
            fail(f"the log has {log_lines('m.jsonl')} lines, the run stopped after step {stopped_at}")
        for f in (f"{ck}/checkpoint.safetensors", "w.safetensors"):
            if not os.path.exists(f):
                fail(f"{f} was not written on the way out\n{out}")

    resumed = run(args + ["--resume"])
    if resumed.returncode != 0:
        fail("--resume failed: " + resumed.stdout + resumed.stderr)
    if not same_file("w.safetensors", "straight.safetensors"):
        fail("the interrupted-then-resumed run's weights differ from the straight run's")
    if log_lines("m.jsonl") != STEPS:
        fail(f"after resuming the log has {log_lines('m.jsonl')} lines, expected {STEPS}")
    print(f"ok: {case}")


MINITRAIN = None
if __name__ == "__main__":
    main()
