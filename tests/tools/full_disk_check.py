#!/usr/bin/env python3
"""A full disk for `minitrain train --log` and `--save-best`, against the real binary (issue 30).

  full_disk_check.py MINITRAIN WORKDIR log|save_best FULL_DISK_LIBRARY

FULL_DISK_LIBRARY (full_disk.cpp, preloaded) makes writes to one named file fail with ENOSPC once
some bytes have gone to it, as a full file system does, on any machine and without root.

log: the metrics log fills up mid-run. The run must stop with exit 1 and an error naming the log
and "No space left on device", after writing the checkpoint of the step it had finished (and not
--save: the run did not finish); the log's complete lines stay. --resume (with room again) must
end with weights byte-identical to a run that never failed, and a log of every step but the one
whose line the disk could not hold.

save_best: the second --save-best write fills the disk. Same stop and message, naming the
--save-best file; the first best stays intact under its name (no temporary left beside it), the
checkpoint records that first best, not the one that could not be written, and --resume ends
byte-identical to the run that never failed.
"""

import json
import os
import struct
import subprocess
import sys

STEPS = 30
RUN = ["train", "--model", "mlp:8,16,1", "--data", "synthetic:512", "--batch-size", "32",
       "--steps", str(STEPS), "--device", "cpu", "--threads", "1", "--progress", "none",
       "--seed", "3", "--lr", "0.01"]


def fail(msg):
    sys.exit("FAIL: " + msg)


def run(args, env=None):
    return subprocess.run([MINITRAIN] + args, capture_output=True, text=True, timeout=300, env=env)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def metadata(path):
    """The __metadata__ of a safetensors file (fails the test if the file is not whole)."""
    data = read(path)
    if len(data) < 8:
        fail(f"{path} is {len(data)} bytes: not a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
    if 8 + n + end != len(data):
        fail(f"{path} is cut short: {len(data)} bytes, its header says {8 + n + end}")
    return header.get("__metadata__", {})


def complete_lines(path):
    with open(path) as f:
        text = f.read()
    return [json.loads(line) for line in text.split("\n")[:-1]]  # what follows the last \n is torn


def main():
    global MINITRAIN
    MINITRAIN, work, case, library = (os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3],
                                      os.path.abspath(sys.argv[4]))
    os.makedirs(work, exist_ok=True)
    os.chdir(work)
    for root, dirs, files in os.walk(".", topdown=False):
        for f in files:
            os.remove(os.path.join(root, f))
        for d in dirs:
            os.rmdir(os.path.join(root, d))

    args = RUN + ["--checkpoint-dir", "ck", "--log", "m.jsonl", "--save", "w.safetensors"]
    if case == "save_best":
        args += ["--val-split", "0.25", "--eval-every", "5", "--save-best", "b.safetensors"]
    straight = run(args)
    if straight.returncode != 0:
        fail("the straight run failed: " + straight.stdout + straight.stderr)
    os.rename("w.safetensors", "straight.safetensors")
    if case == "save_best":
        best_size = os.path.getsize("b.safetensors")
        os.remove("b.safetensors")
        val = {j["step"]: j["val_loss"] for j in complete_lines("m.jsonl") if "val_loss" in j}
        if not val[10] < val[5]:
            fail(f"the test needs a better val_loss at step 10 than at 5: {val}")
    os.remove("m.jsonl")
    for f in os.listdir("ck"):
        os.remove(os.path.join("ck", f))

    if case == "log":
        full, after = "m.jsonl", 2500  # some 8 lines, then the disk is full mid-line
    else:
        # Room for one best and half of the next: the first evaluation's save fits, the second's
        # (every val_loss of this seeded run falls) does not.
        full, after = "b.safetensors", best_size + best_size // 2
    env = dict(os.environ, LD_PRELOAD=library, MINITRAIN_TEST_FULL_NAME=full,
               MINITRAIN_TEST_FULL_AFTER=str(after),
               ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0")
    failed = run(args, env=env)
    out = failed.stdout + failed.stderr
    if failed.returncode != 1:
        fail(f"a full disk for {full}: exit {failed.returncode}, expected 1\n{out}")
    want = "the metrics log 'm.jsonl'" if case == "log" else "'b.safetensors'"
    for text in (f"cannot write {want}", "No space left on device", "was written first",
                 "resume with --resume"):
        if text not in out:
            fail(f"the error does not say '{text}':\n{out}")
    stopped_at = int(out.split("the checkpoint of step ")[1].split()[0])
    if not 1 <= stopped_at < STEPS:
        fail(f"checkpointed at step {stopped_at}, expected mid-run\n{out}")
    if metadata("ck/checkpoint.safetensors").get("step") != str(stopped_at):
        fail(f"the checkpoint is not at step {stopped_at}: {metadata('ck/checkpoint.safetensors')}")
    if os.path.exists("w.safetensors"):
        fail("--save was written by a run that did not finish")
    lines = complete_lines("m.jsonl")
    if [j["step"] for j in lines] != list(range(1, len(lines) + 1)):
        fail(f"the log's complete lines are not steps 1..{len(lines)}: {[j['step'] for j in lines]}")
    if case == "log":
        if len(lines) != stopped_at - 1:
            fail(f"the log has {len(lines)} complete lines; the run failed writing step {stopped_at}'s")
    else:
        if len(lines) != stopped_at or "val_loss" not in lines[-1]:
            fail(f"the log has {len(lines)} lines, the last {lines[-1] if lines else None}; "
                 f"expected step {stopped_at}'s with its val_loss")
        meta = metadata("b.safetensors")  # whole, and the first best's
        if meta.get("step") != "5":
            fail(f"b.safetensors holds step {meta.get('step')}, expected the first best (step 5)")
        left = [f for f in os.listdir(".") if f.startswith(".b.safetensors")]
        if left:
            fail(f"temporaries left beside b.safetensors: {left}")
        record = json.loads(metadata("ck/checkpoint.safetensors")["validation"])
        if record.get("best_step") != 5:
            fail(f"the checkpoint records the best at step {record.get('best_step')}, but only "
                 f"step 5's was written: {record}")

    # The disk may fill exactly at a line's newline: that step's line is then whole but for it,
    # and a resumed run keeps it (its step is the checkpoint's), as train/metrics_log.cpp's
    # kept_lines does with any last line that parses; a line cut anywhere else is dropped.
    tail = read("m.jsonl").decode(errors="replace").split("\n")[-1]
    try:
        whole_but_newline = json.loads(tail).get("step") == stopped_at
    except (ValueError, AttributeError):
        whole_but_newline = False

    resumed = run(args + ["--resume"])
    if resumed.returncode != 0:
        fail("--resume failed: " + resumed.stdout + resumed.stderr)
    if read("w.safetensors") != read("straight.safetensors"):
        fail("the resumed run's weights differ from the run that never failed")
    # The line the full disk cut short (log) was never saved: the resumed log lacks only it.
    steps = [j["step"] for j in complete_lines("m.jsonl")]
    want = [k for k in range(1, STEPS + 1)
            if case != "log" or k != stopped_at or whole_but_newline]
    if steps != want:
        fail(f"after resuming the log's steps are {steps}, expected {want}")
    print(f"ok: {case} (stopped at step {stopped_at})")


MINITRAIN = None
if __name__ == "__main__":
    main()
