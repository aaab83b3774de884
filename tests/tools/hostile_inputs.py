#!/usr/bin/env python3
"""Hostile input against the real minitrain binary: one row per case of issue 12.

Each row builds its inputs in a fresh scratch directory, runs the binary with a time limit and
checks the exit status, words in the output, and what the row says must hold afterwards (no
file left behind, a file removed). Before the fixes these cases crashed (SIGSEGV, heap
overflow), hung (FIFOs), asked for 74 GiB, or failed late with the wrong error.

  hostile_inputs.py MINITRAIN --list          names of the rows, one per line (for CMake)
  hostile_inputs.py MINITRAIN --case NAME     run one row (ctest runs each as its own test)
  hostile_inputs.py MINITRAIN                 run every row
"""

import json
import os
import re
import resource
import struct
import subprocess
import sys
import tempfile

# The address space a row marked LIMITED gets: the CSV reader once asked for 74.5 GiB for one
# data row and a million blank lines. Such rows run on the CPU (--device cpu): a CUDA context
# reserves far more address space than this, so no limit is set where a GPU may be used.
LIMITED = 4 << 30


# ---- inputs ----------------------------------------------------------------------------------

def npy_bytes(header, data=b""):
    """An .npy v1.0 file whose header dict is `header` verbatim (no checks: it is hostile)."""
    text = header.encode("latin-1") if isinstance(header, str) else header
    text += b" " * ((64 - (10 + len(text) + 1) % 64) % 64) + b"\n"
    if len(text) > 0xFFFF:
        return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(text)) + text + data
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def npy_f32(rows, values):
    cols = len(values) // rows
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    return npy_bytes(header, struct.pack("<%df" % len(values), *values))


def safetensors_bytes(header_json, data=b""):
    text = header_json.encode("utf-8") if isinstance(header_json, str) else header_json
    return struct.pack("<Q", len(text)) + text + data


def mlp_3_1_weights(weight, bias):
    """The weights of --model mlp:3,1 as safetensors: 0.weight [1, 3], 0.bias [1]."""
    header = ('{"0.bias":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
              '"0.weight":{"dtype":"F32","shape":[1,3],"data_offsets":[4,16]}}')
    return safetensors_bytes(header, struct.pack("<f", bias) + struct.pack("<3f", *weight))


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


def dead_pid():
    """The pid of a process that has exited and been reaped."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid

# ---- minitrain export (issue 34) ----

def mlp_3_1_file(d, name="w.safetensors", metadata=None):
    """mlp:3,1's weights, with a __metadata__ object when given."""
    header = ('{"0.bias":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
              '"0.weight":{"dtype":"F32","shape":[1,3],"data_offsets":[4,16]}')
    if metadata is not None:
        header += ',"__metadata__":' + metadata
    header += "}"
    return write(f"{d}/{name}", safetensors_bytes(header, struct.pack("<f", 0.5) + struct.pack("<3f", 1, 2, 3)))


GOOD_META = '{"format":"pt","model":"mlp:3,1","activation":"relu"}'


def _nothing_in(sub):
    def check(d, out):
        left = os.listdir(f"{d}/{sub}") if os.path.isdir(f"{d}/{sub}") else []
        return f"{sub} holds {left}" if left else None
    return check


def _export_under_a_file(d):
    return ["export", "--weights", mlp_3_1_file(d, metadata=GOOD_META), "--format", "c",
            "--out", write(f"{d}/plain", "x") + "/out"]


def _export_clobber(d):
    mlp_3_1_file(d, name="m.h", metadata=GOOD_META)
    return ["export", "--weights", f"{d}/m.h", "--format", "c", "--out", d, "--name", "m"]


def _weights_unchanged(d, out):
    with open(f"{d}/m.h", "rb") as f:
        got = f.read()
    mlp_3_1_file(d, name="fresh", metadata=GOOD_META)
    with open(f"{d}/fresh", "rb") as f:
        want = f.read()
    left = sorted(n for n in os.listdir(d) if n not in ("m.h", "fresh"))
    return "m.h changed" if got != want else f"left behind: {left}" if left else None


def _onnx_clobber(d):
    w = mlp_3_1_file(d, name="w.onnx", metadata=GOOD_META)
    return ["export", "--weights", w, "--format", "onnx", "--out", w]


# ---- the table -------------------------------------------------------------------------------
# Each row: name -> (setup(dir) -> args, expected exit status, regex the output must match,
#                    optional check(dir, output) -> error text or None, time limit in seconds,
#                    and optionally an address-space limit in bytes). setup gets the row's own
# scratch directory and writes its inputs there.

SMALL_CSV = "a,b,y\n1,2,3\n4,5,6\n7,8,9\n"


def _npy_pair(d, x):
    write(f"{d}/x.npy", x)
    write(f"{d}/y.npy", npy_f32(2, [1.0, 2.0]))
    return ["train", "--data", f"{d}/x.npy", "--targets", f"{d}/y.npy", "--model", "mlp:2,1", "--steps", "2"]


def _fifo(d, name):
    os.mkfifo(f"{d}/{name}")
    return f"{d}/{name}"


def _torn_log(d):
    base = ["train", "--steps", "6", "--checkpoint-dir", f"{d}/ck", "--checkpoint-every", "3",
            "--log", f"{d}/m.jsonl", "--progress", "none"]
    first = subprocess.run([MINITRAIN] + base[:2] + ["3"] + base[3:], capture_output=True, text=True)
    assert first.returncode == 0, first.stdout + first.stderr
    with open(f"{d}/m.jsonl", "a") as f:
        f.write('{"step":4,"epoch":1,"lo')  # the write a full disk cut short
    return base + ["--resume"]


def _torn_log_check(d, out):
    steps = [l for l in open(f"{d}/m.jsonl").read().splitlines()]
    return None if len(steps) == 6 and all(l.endswith("}") for l in steps) else f"log afterwards: {steps}"


def _stale_temp(d):
    stale = f"{d}/.w.safetensors.tmp.{dead_pid()}.0"
    write(stale, b"half a checkpoint")
    return ["train", "--steps", "2", "--save", f"{d}/w.safetensors", "--progress", "none"]


def _stale_temp_check(d, out):
    left = [n for n in os.listdir(d) if ".tmp." in n]
    return f"temporaries left: {left}" if left else None


def _no_steps_ran(d, out):
    return "a step ran before the error" if re.search(r"step \d+/", out) else None


def _short_message(d, out):
    return f"message of {len(out)} bytes" if len(out) > 2000 else None


ROWS = {
    # crashes
    "npy_header_nesting_15000_deep": (
        lambda d: _npy_pair(d, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + "[" * 15000)),
        1, r"nested more than 32 deep", None, 30),
    "npy_dtype_size_overflow": (
        lambda d: _npy_pair(d, npy_bytes("{'descr': '<f4611686018427387904', 'fortran_order': False, 'shape': (2, 2), }")),
        1, r"unsupported descr '<f4611686018427387904'", None, 30),
    "npy_shape_overflow": (
        lambda d: _npy_pair(d, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }")),
        1, r"too large to address", None, 30),
    "safetensors_header_nesting_100000_deep": (
        lambda d: ["train", "--init", write(f"{d}/w.safetensors", safetensors_bytes('{"a":' + "[" * 100000)),
                   "--model", "mlp:3,1", "--steps", "1"],
        1, r"nests objects and lists more than 16 deep", None, 30),
    "safetensors_shape_overflow": (
        lambda d: ["train", "--init", write(f"{d}/w.safetensors", safetensors_bytes(
            '{"0.weight":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}')),
            "--model", "mlp:3,1", "--steps", "1"],
        1, r"too large to address", None, 30),
    "model_width_overflow": (
        lambda d: ["train", "--model", "mlp:4,4611686018427387904,1"],
        1, r"size '4611686018427387904' is too large \(at most 2147483647\)", None, 30),
    "synthetic_rows_overflow": (
        lambda d: ["train", "--data", "synthetic:1152921504606846976"],
        1, r"1152921504606846976 rows is more than", None, 30),
    "predict_model_width_overflow": (
        lambda d: ["predict", "--weights", write(f"{d}/w.safetensors", mlp_3_1_weights([1, 2, 3], 0)),
                   "--model", "mlp:3,4611686018427387904,1", "--input", write(f"{d}/x.npy", npy_f32(1, [1, 2, 3])),
                   "--output", f"{d}/p.npy"],
        1, r"is too large \(at most 2147483647\)", None, 30),
    # denial of service
    "safetensors_header_of_200000_tensors_reads_in_linear_time": (
        lambda d: ["train", "--init", write(f"{d}/w.safetensors", safetensors_bytes(
            "{" + ",".join('"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i for i in range(200000)) + "}")),
            "--model", "mlp:3,1", "--steps", "1"],
        1, r"unexpected keys \"t0\", .*\.\.\. \(200000 in all\)", _short_message, 30),
    # 2,000 columns: sized by its line count, the buffer would be 8 GB.
    "csv_one_row_and_a_million_blank_lines": (
        lambda d: ["train", "--data", write(f"{d}/t.csv", ",".join(f"c{i}" for i in range(1999)) + ",y\n" +
                                            ",".join(["1"] * 2000) + "\n" + "\n" * 1000000),
                   "--target-columns", "y", "--model", "mlp:1999,1", "--steps", "2", "--progress", "none",
                   "--device", "cpu"],
        0, r"\(1 rows\).*done: ", None, 60, LIMITED),
    # hangs
    "fifo_as_data": (
        lambda d: ["train", "--data", _fifo(d, "x.csv"), "--target-columns", "y", "--model", "mlp:2,1"],
        1, r"it is a FIFO \(named pipe\), not a regular file", None, 30),
    "fifo_as_config": (
        lambda d: ["train", "--config", _fifo(d, "run.toml")],
        1, r"it is a FIFO \(named pipe\), not a regular file", None, 30),
    "fifo_as_init": (
        lambda d: ["train", "--init", _fifo(d, "w.safetensors"), "--model", "mlp:3,1"],
        1, r"it is a FIFO \(named pipe\), not a regular file", None, 30),
    "directory_as_data": (
        lambda d: ["train", "--data", (os.mkdir(f"{d}/x.csv"), f"{d}/x.csv")[1], "--target-columns", "y"],
        1, r"it is a directory, not a regular file", None, 30),
    # recovery
    "torn_metrics_log_is_truncated_on_resume": (
        _torn_log, 0, r"warning: --log .*m\.jsonl:4: dropped a torn last line", _torn_log_check, 60),
    "stale_temporary_of_save_is_removed": (
        _stale_temp, 0, r"removed 1 temporary file\(s\) of .*w\.safetensors", _stale_temp_check, 60),
    # wrong or late errors
    "non_utf8_save_path_and_log": (
        lambda d: ["train", "--steps", "2", "--progress", "none", "--save", os.fsencode(d) + b"/w\xff.safetensors",
                   "--checkpoint-dir", os.fsencode(d) + b"/ck\xfe", "--log", os.fsencode(d) + b"/m\xff.jsonl"],
        0, r"done: ", None, 60),
    "nan_in_npy_features": (
        lambda d: _npy_pair(d, npy_f32(2, [1.0, 2.0, 3.0, float("nan")])),
        1, r"features file '.*x\.npy' holds nan at row 1, column 1", None, 30),
    "inf_in_npy_targets": (
        lambda d: ["train", "--data", write(f"{d}/x.npy", npy_f32(2, [1, 2, 3, 4])), "--targets",
                   write(f"{d}/y.npy", npy_f32(2, [1.0, float("-inf")])), "--model", "mlp:2,1"],
        1, r"targets file '.*y\.npy' holds -inf at row 1, column 0", None, 30),
    "nan_in_init_weights": (
        lambda d: ["train", "--init", write(f"{d}/w.safetensors", mlp_3_1_weights([1, float("nan"), 3], 0)),
                   "--model", "mlp:3,1", "--steps", "1"],
        1, r"tensor '0\.weight' holds nan at \[0, 1\]; weights must be finite", None, 30),
    "unwritable_save_is_found_before_the_first_step": (
        lambda d: ["train", "--steps", "100000", "--progress", "lines", "--save", "/proc/minitrain-w.safetensors"],
        1, r"--save: cannot write '/proc/minitrain-w\.safetensors'", _no_steps_ran, 30),
    "save_under_a_file_is_found_before_the_first_step": (
        lambda d: ["train", "--steps", "100000", "--progress", "lines",
                   "--save", write(f"{d}/plain", "x") + "/w.safetensors"],
        1, r"--save: cannot write .*Not a directory", _no_steps_ran, 30),
    "comm_timeout_beyond_the_clock": (
        lambda d: ["train", "--comm-timeout", "1e10"],
        1, r"--comm-timeout must be a positive number of seconds up to 1e\+06, got 1e\+10", None, 30),
    "batch_size_int64_max": (
        lambda d: ["train", "--batch-size", "9223372036854775807"],
        1, r"--batch-size must be <= 2147483647, got 9223372036854775807", None, 30),
    "epochs_2_pow_62": (
        lambda d: ["train", "--epochs", "4611686018427387904"],
        1, r"--epochs must be <= 2147483647, got 4611686018427387904", None, 30),
    "memory_cap_beyond_8_eib": (
        lambda d: ["train", "--memory-cap", "99999999999TiB"],
        1, r"--memory-cap '99999999999TiB': byte count '99999999999TiB' is too large", None, 30),
    "config_with_batch_size_spelt_twice": (
        lambda d: ["train", "--config", write(f"{d}/run.toml", "batch-size = 8\nbatch_size = 16\n")],
        1, r"run\.toml:2: key 'batch_size' sets 'batch-size', which 'batch-size' already set", None, 30),
    "config_key_of_80_kb_is_quoted_short": (
        lambda d: ["train", "--config", write(f"{d}/run.toml", "k" * 80000 + " = 1\n")],
        1, r"unknown key 'k{80}\.\.\.'", _short_message, 30),
    "csv_header_of_80_kb_is_quoted_short": (
        lambda d: ["train", "--data", write(f"{d}/t.csv", "a" * 80000 + ",b\n1,2\n"), "--target-columns", "y",
                   "--model", "mlp:1,1"],
        1, r"no column 'y' for the targets", _short_message, 30),
    # minitrain export: wrong metadata, names and outputs fail before anything is written
    "export_weights_without_metadata": (
        lambda d: ["export", "--weights", mlp_3_1_file(d), "--format", "c", "--out", f"{d}/out"],
        1, r"does not say which model it holds \(no 'model' in its metadata.*give --model", _nothing_in("out"), 30),
    "export_metadata_model_the_tensors_do_not_fit": (
        lambda d: ["export", "--weights", mlp_3_1_file(d, metadata='{"model":"mlp:3,4,1","activation":"relu"}'),
                   "--format", "c", "--out", f"{d}/out"],
        1, r"the model mlp:3,4,1 that its metadata 'model' names does not fit its tensors.*missing keys \"2\.weight\", \"2\.bias\"",
        _nothing_in("out"), 30),
    "export_metadata_activation_unknown": (
        lambda d: ["export", "--weights", mlp_3_1_file(d, metadata='{"model":"mlp:3,1","activation":"swish"}'),
                   "--format", "c", "--out", f"{d}/out"],
        1, r"swish", _nothing_in("out"), 30),
    "export_name_not_a_c_identifier": (
        lambda d: ["export", "--weights", mlp_3_1_file(d, metadata=GOOD_META), "--format", "c",
                   "--out", f"{d}/out", "--name", "9x"],
        1, r"--name .9x. is not a C identifier.*e\.g\. --name m_9x", _nothing_in("out"), 30),
    "export_into_a_directory_that_cannot_be_written": (
        lambda d: ["export", "--weights", mlp_3_1_file(d, metadata=GOOD_META), "--format", "c", "--out", "/proc"],
        1, r"/proc/\.?minitrain_model\.h", None, 30),
    "export_into_a_directory_under_a_file": (
        _export_under_a_file, 1, r"--out .*plain/out: cannot create the directory: Not a directory", None, 30),
    "export_c_over_the_weights": (
        _export_clobber, 1, r"m\.h is the --weights file .*exporting would overwrite it", _weights_unchanged, 30),
    "export_onnx_over_the_weights": (
        _onnx_clobber, 1, r"--out .*w\.onnx is the --weights file; exporting would overwrite it", None, 30),
    "export_unknown_format": (
        lambda d: ["export", "--weights", mlp_3_1_file(d, metadata=GOOD_META), "--format", "tflite", "--out", f"{d}/o"],
        2, r"--format: tflite not in \{c,onnx\}", None, 30),
}


# ---- issue 30: silent wrong answers ----------------------------------------------------------

def mt(*args):
    """Runs minitrain for a row's setup; the setup fails (an AssertionError) if it does."""
    p = subprocess.run([MINITRAIN] + [str(a) for a in args], capture_output=True, text=True)
    assert p.returncode == 0, " ".join(map(str, args)) + "\n" + p.stdout + p.stderr
    return p


QUIET = ["--progress", "none", "--device", "cpu"]
# Class names a naive CSV writer shifts: a comma, a quote, a line break (all quoted as input).
AWKWARD_CLASSES_CSV = 'a,b,y\n1,2,"x,1"\n2,1,"say ""hi"""\n3,3,"two\nlines"\n1,1,"x,1"\n'


def _awkward_classifier(d):
    write(f"{d}/t.csv", AWKWARD_CLASSES_CSV)
    mt("train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
       "--model", "mlp:2,3", "--steps", "2", "--save", f"{d}/w.safetensors", *QUIET)


def _predict_quoted(d, probabilities):
    _awkward_classifier(d)
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output",
            f"{d}/p.csv"] + (["--probabilities"] if probabilities else [])


def _predict_quoted_check(probabilities):
    def check(d, out):
        import csv
        rows = list(csv.reader(open(f"{d}/p.csv", newline="")))
        classes = ["say \"hi\"", "two\nlines", "x,1"]  # sorted, as the training numbers them
        if probabilities:
            if rows[0] != classes or any(len(r) != 3 for r in rows):
                return f"probabilities CSV read back as {rows}"
        elif any(len(r) != 1 for r in rows) or any(r[0] not in classes for r in rows[1:]):
            return f"class CSV read back as {rows}"
        return None
    return check


def _numeric_train_text_val(d, command):
    write(f"{d}/t.csv", "a,y\n0,0\n1,1\n2,2\n0,0\n")
    write(f"{d}/v.csv", "a,y\n0,2\n1,0\n2,cat\n")
    if command == "train":
        return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
                "--model", "mlp:1,3", "--steps", "2", "--val-data", f"{d}/v.csv", *QUIET]
    mt("train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
       "--model", "mlp:1,3", "--steps", "2", "--save", f"{d}/w.safetensors", *QUIET)
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/v.csv"]


def _big_weight_fp16(d):
    return ["train", "--model", "mlp:3,1", "--init", write(f"{d}/w0.safetensors", mlp_3_1_weights([1, 70000, 3], 0)),
            "--steps", "1", "--lr", "1e-9", "--save-dtype", "fp16", "--save", f"{d}/w.safetensors", *QUIET]


def _no_file(name):
    return lambda d, out: f"{name} was written" if os.path.exists(f"{d}/{name}") else None


def _evaluate_inf_predictions(d):
    write(f"{d}/t.csv", "a,b,c,y\n1,1,1,1\n2,2,2,3\n3,3,3,2\n")
    # Finite weights whose outputs are not: 3e38 * 2 overflows float32.
    write(f"{d}/w.safetensors", mlp_3_1_weights([3e38, 3e38, 3e38], 0))
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/t.csv", "--target-columns", "y",
            "--model", "mlp:3,1", "--activation", "relu"]


def _evaluate_with_loss_settings(settings, loss="huber"):
    """evaluate on a weights file whose metadata 'loss_settings' is `settings` (train --save's)."""
    def make(d):
        write(f"{d}/t.csv", "a,b,c,y\n1,1,1,1\n2,2,2,3\n3,3,3,2\n")
        meta = ('{"format":"pt","model":"mlp:3,1","activation":"relu","loss":"%s","loss_settings":%s}'
                % (loss, json.dumps(settings)))
        mlp_3_1_file(d, metadata=meta)
        return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/t.csv", "--target-columns", "y"]
    return make


def _unchanged(name, text):
    return lambda d, out: None if open(f"{d}/{name}").read() == text else f"{name} was changed"


def _log_is_data(d):
    write(f"{d}/t.csv", SMALL_CSV)
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:2,1", "--steps", "2",
            "--log", f"{d}/./t.csv", *QUIET]


def _save_best_is_save(d):
    os.mkdir(f"{d}/sub")
    return ["train", "--data", "synthetic:64", "--val-split", "0.25", "--steps", "4", "--eval-every", "2",
            "--save", f"{d}/w.safetensors", "--save-best", f"{d}/sub/../w.safetensors", *QUIET]


def _save_best_is_checkpoint(d):
    return ["train", "--data", "synthetic:64", "--val-split", "0.25", "--steps", "4", "--eval-every", "2",
            "--checkpoint-dir", f"{d}/ck", "--save-best", f"{d}/ck/checkpoint.safetensors", *QUIET]


def _save_is_hard_link_of_init(d):
    write(f"{d}/w0.safetensors", mlp_3_1_weights([1, 2, 3], 0))
    os.link(f"{d}/w0.safetensors", f"{d}/link.safetensors")
    return ["train", "--model", "mlp:3,1", "--init", f"{d}/w0.safetensors", "--steps", "2",
            "--log", f"{d}/link.safetensors", *QUIET]


def _lock_held(d, flag):
    """A run on files another process holds: this row's helper holds the lock while minitrain runs."""
    import fcntl
    os.makedirs(f"{d}/ck", exist_ok=True)
    lock = f"{d}/ck/.minitrain.lock" if flag == "checkpoint-dir" else f"{d}/.m.jsonl.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"%d\n" % os.getpid())
    _held_locks.append(fd)  # released when the row's process ends (as a crashed run's would be)
    target = f"{d}/ck" if flag == "checkpoint-dir" else f"{d}/m.jsonl"
    return ["train", "--steps", "2", f"--{flag}", target, *QUIET]


_held_locks = []


def _lock_of_dead_run(d):
    """A run killed while it held the lock leaves the file, not the lock: the next run goes ahead."""
    p = subprocess.Popen([MINITRAIN, "train", "--steps", "100000", "--checkpoint-dir", f"{d}/ck", "--checkpoint-every",
                          "1000", "--progress", "none", "--device", "cpu"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import time
    for _ in range(200):
        if os.path.exists(f"{d}/ck/.minitrain.lock"):
            break
        time.sleep(0.05)
    time.sleep(0.3)
    p.kill()
    p.wait()
    return ["train", "--steps", "2", "--checkpoint-dir", f"{d}/ck", *QUIET]


def _labels_csv(d, labels, model="mlp:1,3"):
    write(f"{d}/t.csv", "a,y\n" + "".join(f"{i},{l}\n" for i, l in enumerate(labels)))
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
            "--model", model, "--steps", "1", *QUIET]


def _all_steps_skipped_check(d, out):
    return None if not re.search(r"^done: ", out, re.M) else "the run said done"


ROWS.update({
    # 1: class names in CSV outputs are quoted (RFC 4180) and read back as written
    "predict_probabilities_csv_quotes_class_names": (
        lambda d: _predict_quoted(d, True), 0, r"", _predict_quoted_check(True), 60),
    "predict_classes_csv_quotes_class_names": (
        lambda d: _predict_quoted(d, False), 0, r"", _predict_quoted_check(False), 60),
    # 2: held-out labels take the training's kind and classes
    "val_data_text_label_among_numeric_training_labels": (
        lambda d: _numeric_train_text_val(d, "train"), 1,
        r"v\.csv:4: column 'y': label 'cat' is not a number.*training labels are class numbers", None, 60),
    "evaluate_text_label_among_numeric_training_labels": (
        lambda d: _numeric_train_text_val(d, "evaluate"), 1,
        r"v\.csv:4: column 'y': label 'cat' is not a number.*training labels are class numbers", None, 60),
    # the trained loss's settings in the weights (metadata 'loss_settings'): evaluate scores with them
    "evaluate_loss_settings_not_an_object": (
        _evaluate_with_loss_settings("[0.5]"), 1,
        r"w\.safetensors: metadata 'loss_settings' is '\[0\.5\]', not a JSON object", None, 30),
    "evaluate_loss_settings_unknown_setting": (
        _evaluate_with_loss_settings('{"huber-width":2}'), 1,
        r"metadata 'loss_settings' names 'huber-width', which is no loss setting", None, 30),
    "evaluate_loss_settings_out_of_range": (
        _evaluate_with_loss_settings('{"huber-delta":0}'), 1,
        r"--weights .*w\.safetensors \(metadata 'loss_settings'\).*delta", None, 30),
    "evaluate_loss_settings_of_another_loss": (
        _evaluate_with_loss_settings('{"huber-delta":0.5}', loss="mse"), 1,
        r"huber-delta applies to --loss huber, not to --loss mse", None, 30),
    # 3: fp16 weights beyond 65504, and scores of non-finite predictions
    "save_dtype_fp16_refuses_weights_beyond_its_range": (
        _big_weight_fp16, 1, r"--save-dtype fp16: .*tensor '0\.weight' holds 70000 .*beyond float16's range \(65504\)",
        _no_file("w.safetensors"), 60),
    "evaluate_refuses_to_score_non_finite_predictions": (
        _evaluate_inf_predictions, 1, r"predictions are not finite: inf at row 0", None, 60),
    # 4+5: no output replaces an input or another output, however it is spelt
    "log_names_the_training_table": (
        _log_is_data, 1, r"--log .*t\.csv.* and --data .*t\.csv.* are the same file",
        _unchanged("t.csv", SMALL_CSV), 60),
    "save_best_aliases_save_through_dot_dot": (
        _save_best_is_save, 1, r"--save '.*w\.safetensors' and --save-best '.*sub/\.\./w\.safetensors' are the same file",
        _no_file("w.safetensors"), 60),
    "save_best_aliases_the_checkpoint": (
        _save_best_is_checkpoint, 1, r"--save-best .* and --checkpoint-dir .*checkpoint\.safetensors.* are the same file",
        None, 60),
    "log_is_a_hard_link_of_init": (
        _save_is_hard_link_of_init, 1, r"--log .*link\.safetensors.* and --init .*w0\.safetensors.* are the same file",
        None, 60),
    "predict_output_names_its_input": (
        lambda d: ["predict", "--weights", write(f"{d}/w.safetensors", mlp_3_1_weights([1, 2, 3], 0)),
                   "--activation", "relu", "--model", "mlp:3,1",
                   "--input", write(f"{d}/t.csv", "a,b,c\n1,2,3\n"), "--output", f"{d}/./t.csv"],
        1, r"--output .*t\.csv.* and --input .*t\.csv.* are the same file", _unchanged("t.csv", "a,b,c\n1,2,3\n"), 30),
    # 6: pipelines place, expand and collision-check save-best like save
    "pipelines_save_best_shared_by_every_run": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(f"{d}/runs.toml",
                   f'[defaults]\nsteps = 2\nval-split = 0.25\ndata = "synthetic:64"\ndevice = "cpu"\n'
                   f'save-best = "{d}/best.safetensors"\n[[run]]\nname = "a"\n[[run]]\nname = "b"\n')],
        1, r"run 'b' \(save-best\) and run 'a' \(save-best\) would both write .*best\.safetensors",
        _no_file("best.safetensors"), 60),
    "pipelines_save_best_lands_in_each_runs_directory": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(f"{d}/runs.toml",
                   '[defaults]\nsteps = 4\nval-split = 0.25\neval-every = 2\ndata = "synthetic:64"\n'
                   'device = "cpu"\nsave-best = "{name}-best.safetensors"\n[[run]]\nname = "a"\n')],
        0, r"", lambda d, out: None if os.path.exists(f"{d}/out/a/a-best.safetensors") and not any(
            n.endswith("best.safetensors") for n in os.listdir(d)) else f"outputs: {os.listdir(d)}", 120),
    # 7: one run at a time on a checkpoint directory or a log
    "checkpoint_dir_held_by_another_run": (
        lambda d: _lock_held(d, "checkpoint-dir"), 1,
        r"--checkpoint-dir .*ck is in use by another run \(pid \d+, which holds '.*ck/\.minitrain\.lock'\)", _no_steps_ran, 60),
    "log_held_by_another_run": (
        lambda d: _lock_held(d, "log"), 1, r"--log .*m\.jsonl is in use by another run \(pid \d+, which holds '.*/\.m\.jsonl\.lock'\)", _no_steps_ran, 60),
    "lock_of_a_killed_run_is_not_stuck": (
        _lock_of_dead_run, 0, r"done: ", None, 60),
    # 9: class labels that float32 would round
    "csv_label_not_an_exact_integer": (
        lambda d: _labels_csv(d, ["0", "1.00000001", "2"]), 1,
        r"t\.csv:3: column 'y': label '1\.00000001' is not an integer", None, 30),
    "csv_label_rounding_up_to_a_class": (
        lambda d: _labels_csv(d, ["0", "1", "2.9999999"], "mlp:1,4"), 1,
        r"t\.csv:4: column 'y': label '2\.9999999' is not an integer", None, 30),
    "csv_label_beyond_float32_integers": (
        lambda d: _labels_csv(d, ["0", "16777217"], "mlp:1,2"), 1,
        r"t\.csv:3: column 'y': label '16777217' is beyond 16777216", None, 30),
    "csv_label_na_among_class_numbers": (
        lambda d: _labels_csv(d, ["2", "10", "NA", "1"], "mlp:1,11"), 1,
        r"t\.csv:4: column 'y': label 'NA' is a missing value", None, 30),
    "classifier_of_more_classes_than_float32_counts": (
        lambda d: ["train", "--data", write(f"{d}/x.npy", npy_f32(2, [1.0, 2.0])), "--targets",
                   write(f"{d}/y.npy", npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                                                 struct.pack("<2q", 0, 16777217))),
                   "--loss", "cross_entropy", "--model", "mlp:1,16777218", "--steps", "1", *QUIET],
        1, r"16777218 classes.*at most 16777216", None, 60),
    # 10: a loss scale float32 cannot hold, and a run whose every step was skipped
    "loss_scale_beyond_float32": (
        lambda d: ["train", "--precision", "fp16", "--loss-scale", "1e39", *QUIET],
        1, r"--loss-scale 1e\+39 is beyond float32's range", None, 30),
    "run_whose_every_step_was_skipped_fails": (
        lambda d: ["train", "--precision", "fp16", "--loss-scale", "3e38", "--steps", "3", *QUIET],
        1, r"every step \(3 of 3\) was skipped", _all_steps_skipped_check, 60),
})


# --profile-kernels FILE (train/kernel_profile.h): an output like --log, checked with the others.
def _profile_is_data(d):
    write(f"{d}/t.csv", SMALL_CSV)
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:2,1", "--steps", "2",
            "--profile-kernels", f"{d}/./t.csv", *QUIET]


def _profile_under_a_file(d):
    write(f"{d}/t.csv", SMALL_CSV)
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:2,1", "--steps", "2",
            "--profile-kernels", f"{d}/t.csv/p.jsonl", *QUIET]


def _profile_and_save_best_are_one_file(d):
    os.mkdir(f"{d}/sub")
    return ["train", "--data", "synthetic:64", "--val-split", "0.25", "--steps", "4", "--eval-every", "2",
            "--save-best", f"{d}/p.safetensors", "--profile-kernels", f"{d}/sub/../p.safetensors", *QUIET]


ROWS.update({
    "profile_kernels_is_the_data": (
        _profile_is_data, 1, r"--profile-kernels .*t\.csv.* and --data .*t\.csv.* are the same file",
        _unchanged("t.csv", SMALL_CSV), 60),
    "profile_kernels_under_a_file": (
        _profile_under_a_file, 1, r"--profile-kernels: cannot write .*t\.csv/p\.jsonl.*Not a directory",
        _unchanged("t.csv", SMALL_CSV), 60),
    "profile_kernels_is_save_best": (
        _profile_and_save_best_are_one_file, 1,
        r"--save-best .*p\.safetensors.* and --profile-kernels .*sub/\.\./p\.safetensors.* are the same file",
        _no_file("p.safetensors"), 60),
})


# ---- issue 30, from the user trial: columns by name, --standardize, int64 classes, hints ------

# Three classes that the first feature separates and the others do not: a model that reads the
# columns in the wrong order gets most rows wrong.
TRIAL_CSV = "sepal,petal,width,species\n" + "".join(
    f"{s},{p},{w},{c}\n" for s, p, w, c in [
        (1, 5, 9, "setosa"), (1.2, 4, 8, "setosa"), (0.9, 6, 7, "setosa"), (1.1, 5, 9, "setosa"),
        (5, 5, 1, "versicolor"), (5.2, 4, 2, "versicolor"), (4.9, 6, 1, "versicolor"), (5.1, 5, 2, "versicolor"),
        (9, 5, 5, "virginica"), (9.2, 4, 4, "virginica"), (8.9, 6, 6, "virginica"), (9.1, 5, 5, "virginica")])


def _reordered(text, order):
    """The CSV `text` with its columns in `order` (header names)."""
    import csv
    import io
    rows = list(csv.reader(io.StringIO(text)))
    idx = [rows[0].index(n) for n in order]
    return "".join(",".join(r[i] for i in idx) + "\n" for r in rows)


def _trial_classifier(d, *extra):
    write(f"{d}/t.csv", TRIAL_CSV)
    mt("train", "--data", f"{d}/t.csv", "--target-columns", "species", "--loss", "cross_entropy",
       "--model", "mlp:3,16,3", "--steps", "300", "--lr", "0.05", "--save", f"{d}/w.safetensors", *extra, *QUIET)


def _predict_reordered(d):
    _trial_classifier(d)
    mt("predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output", f"{d}/want.csv")
    write(f"{d}/r.csv", _reordered(TRIAL_CSV, ["width", "species", "petal", "sepal"]))
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/r.csv", "--output", f"{d}/got.csv"]


def _same_files(a, b):
    def check(d, out):
        got, want = open(f"{d}/{a}").read(), open(f"{d}/{b}").read()
        return None if got == want else f"{a} differs from {b}:\n{got}\n---\n{want}"
    return check


def _evaluate_reordered(d):
    _trial_classifier(d)
    write(f"{d}/r.csv", _reordered(TRIAL_CSV, ["petal", "width", "sepal", "species"]))
    first = mt("evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/t.csv")
    write(f"{d}/want.json", first.stdout)
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/r.csv"]


def _same_json_as_want(d, out):
    import json
    want = json.loads(open(f"{d}/want.json").read())
    got = json.loads(out.strip().splitlines()[-1])
    return None if got == want else f"evaluate on the reordered table: {got}, on the original: {want}"


def _val_data_reordered(d):
    _trial_classifier(d, "--val-data", f"{d}/t.csv", "--log", f"{d}/want.jsonl", "--eval-every", "100")
    write(f"{d}/r.csv", _reordered(TRIAL_CSV, ["species", "width", "sepal", "petal"]))
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "species", "--loss", "cross_entropy",
            "--model", "mlp:3,16,3", "--steps", "300", "--lr", "0.05", "--val-data", f"{d}/r.csv",
            "--log", f"{d}/got.jsonl", "--eval-every", "100", *QUIET]


def _same_val_loss(d, out):
    import json
    def val(path):
        return [json.loads(l).get("val_loss") for l in open(path) if "val_loss" in l]
    got, want = val(f"{d}/got.jsonl"), val(f"{d}/want.jsonl")
    return None if got and got == want else f"val_loss on the reordered --val-data {got}, on the original {want}"


def _predict_table(d, text):
    _trial_classifier(d)
    write(f"{d}/r.csv", text)
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/r.csv", "--output", f"{d}/p.csv"]


def _npy_descr(name, descr):
    def check(d, out):
        with open(f"{d}/{name}", "rb") as f:
            head = f.read(128).decode("latin-1")
        return None if f"'descr': '{descr}'" in head else f"{name} header: {head!r}"
    return check


def _predict_npy_classes(d, probabilities):
    _trial_classifier(d)
    import csv
    rows = list(csv.reader(open(f"{d}/t.csv")))[1:]
    write(f"{d}/x.npy", npy_f32(len(rows), [float(v) for r in rows for v in r[:3]]))
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/x.npy", "--output",
            f"{d}/p.npy"] + (["--probabilities"] if probabilities else [])


def _npy_classes_as_csv(d, out):
    """p.npy: int64 classes ('<i8'), by position the same as predict gives on the table by name."""
    problem = _npy_descr("p.npy", "<i8")(d, out)
    if problem:
        return problem
    with open(f"{d}/p.npy", "rb") as f:
        data = f.read()
    n = struct.unpack("<H", data[8:10])[0]
    got = list(struct.unpack("<12q", data[10 + n:]))
    mt("predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output", f"{d}/p.csv")
    names = sorted({"setosa", "versicolor", "virginica"})
    want = [names.index(l) for l in open(f"{d}/p.csv").read().split()[1:]]
    return None if got == want else f"npy classes {got}, CSV classes {want}"


def _metadata(path):
    import json
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))["__metadata__"]


def _standardize_split(d):
    # Powers of two: 8 x the stored mean is the sum of the rows it was fitted on, and its bits say
    # which rows: exactly the 8 training rows of a 0.2 split, never a held-out one.
    write(f"{d}/t.csv", "a,c,y\n" + "".join(f"{2 ** i},7,{i % 2}\n" for i in range(10)))
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:2,1", "--steps", "2",
            "--val-split", "0.2", "--standardize", "--save", f"{d}/w.safetensors", *QUIET]


def _standardize_split_check(d, out):
    import json
    import math
    m = _metadata(f"{d}/w.safetensors")
    mean, scale = json.loads(m["standardize_mean"]), json.loads(m["standardize_scale"])
    total = mean[0] * 8
    if total != int(total) or bin(int(total)).count("1") != 8:
        return f"mean {mean[0]} is not that of 8 of the 10 rows (sum {total})"
    rows = [2 ** i for i in range(10) if int(total) >> i & 1]
    std = math.sqrt(sum((v - mean[0]) ** 2 for v in rows) / len(rows))  # ddof = 0
    if abs(scale[0] - std) > 1e-6 * std:
        return f"scale {scale[0]}, the training rows' population std is {std}"
    if mean[1] != 7 or scale[1] != 1:
        return f"the constant column: mean {mean[1]}, scale {scale[1]} (want 7 and 1, as sklearn)"
    return None


def _standardize_val_data(d):
    write(f"{d}/t.csv", "a,y\n1,0\n2,1\n3,0\n")
    write(f"{d}/v.csv", "a,y\n1000,0\n2000,1\n")
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:1,1", "--steps", "2",
            "--val-data", f"{d}/v.csv", "--standardize", "--save", f"{d}/w.safetensors", *QUIET]


def _standardize_val_data_check(d, out):
    import json
    m = _metadata(f"{d}/w.safetensors")
    mean, scale = json.loads(m["standardize_mean"]), json.loads(m["standardize_scale"])
    want = (2 / 3) ** 0.5
    return None if mean == [2.0] and abs(scale[0] - want) < 1e-6 else f"mean {mean}, scale {scale}"


def _standardize_predict(d):
    """predict on the raw table gives what the model gives on the table standardised by hand."""
    write(f"{d}/t.csv", "a,b,y\n" + "".join(f"{1000 + 10 * i},{i % 3},{i * 0.5}\n" for i in range(12)))
    mt("train", "--data", f"{d}/t.csv", "--target-columns", "y", "--model", "mlp:2,8,1", "--steps", "50",
       "--standardize", "--save", f"{d}/w.safetensors", *QUIET)
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output", f"{d}/p.csv"]


def _standardize_predict_check(d, out):
    import json
    m = _metadata(f"{d}/w.safetensors")
    mean, scale = json.loads(m["standardize_mean"]), json.loads(m["standardize_scale"])
    # The same weights without the statistics, on the features standardised here in float32.
    with open(f"{d}/w.safetensors", "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    for k in ("standardize_mean", "standardize_scale"):
        header["__metadata__"].pop(k)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    write(f"{d}/plain.safetensors", struct.pack("<Q", len(text)) + text + raw[8 + n:])
    f32 = lambda v: struct.unpack("<f", struct.pack("<f", v))[0]
    lines = ["a,b,y"]
    for line in open(f"{d}/t.csv").read().splitlines()[1:]:
        a, b, y = (float(v) for v in line.split(","))
        sa = f32(f32(f32(a) - f32(mean[0])) / f32(scale[0]))
        sb = f32(f32(f32(b) - f32(mean[1])) / f32(scale[1]))
        lines.append("%.9g,%.9g,%s" % (sa, sb, y))
    write(f"{d}/s.csv", "\n".join(lines) + "\n")
    mt("predict", "--weights", f"{d}/plain.safetensors", "--input", f"{d}/s.csv", "--output", f"{d}/want.csv")
    got, want = open(f"{d}/p.csv").read(), open(f"{d}/want.csv").read()
    return None if got == want else f"predict with --standardize weights:\n{got}\nby hand:\n{want}"


def _weights_with_metadata(d, meta):
    import json
    return ["predict", "--weights", mlp_3_1_file(d, metadata=json.dumps(meta)),
            "--input", write(f"{d}/x.csv", "a,b,c\n1,2,3\n"), "--output", f"{d}/p.csv"]


META_3_1 = {"model": "mlp:3,1", "activation": "relu", "loss": "mse"}


def _with_env(env, args):
    return {"env": env, "args": args}


ROWS.update({
    # feature columns by name (predict, evaluate, --val-data)
    "predict_csv_columns_in_another_order": (
        _predict_reordered, 0, r"", _same_files("got.csv", "want.csv"), 120),
    "evaluate_csv_columns_in_another_order": (
        _evaluate_reordered, 0, r'"accuracy"', _same_json_as_want, 120),
    "val_data_columns_in_another_order": (
        _val_data_reordered, 0, r"done: ", _same_val_loss, 120),
    "predict_csv_lacks_a_feature_column": (
        lambda d: _predict_table(d, "sepal,width\n1,9\n"), 1,
        r"r\.csv: no column 'petal' in the header .*trained on the feature columns 'sepal', 'petal', 'width'",
        _no_file("p.csv"), 120),
    "predict_csv_with_a_column_the_model_does_not_know": (
        lambda d: _predict_table(d, "id,sepal,petal,width\n7,1,5,9\n"), 1,
        r"r\.csv: column 'id' is neither one of the model's feature columns", _no_file("p.csv"), 120),
    "weights_feature_columns_of_the_wrong_count": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, feature_columns='["a","b"]')), 1,
        r"metadata 'feature_columns' names 2 columns but the model mlp:3,1 takes 3 inputs", _no_file("p.csv"), 30),
    "weights_feature_columns_not_a_list": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, feature_columns='a,b,c')), 1,
        r"metadata 'feature_columns' is 'a,b,c', not a JSON list of names", _no_file("p.csv"), 30),
    "predict_headerless_npy_input_is_read_by_position": (
        lambda d: _predict_npy_classes(d, False), 0, r"", _npy_classes_as_csv, 120),
    # int64 classes, float32 probabilities
    "predict_npy_probabilities_stay_float32": (
        lambda d: _predict_npy_classes(d, True), 0, r"", _npy_descr("p.npy", "<f4"), 120),
    # --standardize
    "standardize_fits_the_training_rows_only": (
        _standardize_split, 0, r"done: ", _standardize_split_check, 60),
    "standardize_ignores_val_data": (
        _standardize_val_data, 0, r"done: ", _standardize_val_data_check, 60),
    "standardize_is_applied_by_predict": (
        _standardize_predict, 0, r"", _standardize_predict_check, 120),
    "resume_without_the_runs_standardize": (
        lambda d: (mt("train", "--steps", "2", "--checkpoint-dir", f"{d}/ck", "--checkpoint-every", "1",
                      "--standardize", *QUIET), ["train", "--steps", "4", "--checkpoint-dir", f"{d}/ck", "--resume",
                                                 *QUIET])[1], 1,
        r"--resume: the checkpoint in .*ck was written with standardize true, this run has false", None, 60),
    "standardize_with_data_on_disk": (
        lambda d: _npy_pair(d, npy_f32(2, [1.0, 2.0, 3.0, 4.0])) + ["--data-on-disk", "--standardize"], 1,
        r"--standardize scales the features in memory, but --data-on-disk", None, 30),
    "weights_standardize_scale_zero": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, standardize_mean="[0,0,0]", standardize_scale="[1,0,1]")), 1,
        r"metadata 'standardize_scale' is '\[1,0,1\]', not a JSON list of 3 finite positive numbers", _no_file("p.csv"), 30),
    "weights_standardize_mean_of_the_wrong_count": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, standardize_mean="[0,0]", standardize_scale="[1,1,1]")), 1,
        r"metadata 'standardize_mean' is '\[0,0\]', not a JSON list of 3 finite numbers", _no_file("p.csv"), 30),
    "weights_standardize_mean_without_scale": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, standardize_mean="[0,0,0]")), 1,
        r"has 'standardize_mean' without 'standardize_scale'", _no_file("p.csv"), 30),
    "weights_standardize_mean_not_a_number": (
        lambda d: _weights_with_metadata(d, dict(META_3_1, standardize_mean='[0,"x",0]', standardize_scale="[1,1,1]")), 1,
        r"metadata 'standardize_mean' is .*not a JSON list of 3 finite numbers", _no_file("p.csv"), 30),
    # labels: a hint for text, a note for whole numbers
    "text_labels_without_cross_entropy": (
        lambda d: ["train", "--data", write(f"{d}/t.csv", TRIAL_CSV), "--target-columns", "species",
                   "--model", "mlp:3,1", "--steps", "1", *QUIET], 1,
        r"t\.csv:2: column 'species' \(4\): 'setosa' is not a number; .*train with --loss cross_entropy", None, 30),
    "integer_labels_with_a_regression_loss": (
        lambda d: _labels_csv(d, ["0", "1", "2", "1"])[:5] + ["--model", "mlp:1,1", "--steps", "1", *QUIET], 0,
        r"note: target column 'y' holds only whole numbers \(0, 1, 2\); --loss mse trains a regression .*"
        r"--loss cross_entropy --model mlp:1,3", None, 30),
    # Low: --topk, --lr 1e-320, MINITRAIN_PYTHON, --val_split, evaluate --help
    "topk_above_the_class_count": (
        lambda d: _labels_csv(d, ["0", "1", "2"]) + ["--topk", "5"], 1,
        r"--topk 5 is more than the 3 classes of --model mlp:1,3", None, 30),
    "lr_subnormal_is_a_number": (
        lambda d: ["train", "--lr", "1e-320", "--steps", "1", *QUIET], 0, r"done: ", None, 30),
    "lr_unparsable_is_not": (
        lambda d: ["train", "--lr", "1e-3x", "--steps", "1", *QUIET], 1, r"--lr expects a number, got '1e-3x'", None, 30),
    "minitrain_python_that_fails_plot": (
        lambda d: _with_env({"MINITRAIN_PYTHON": "/bin/false"},
                            ["plot", write(f"{d}/m.jsonl", '{"step":1,"loss":1}\n'), "--out", f"{d}/c.png"]), 1,
        r"the Python interpreter /bin/false \(\$MINITRAIN_PYTHON\) running .*plot_metrics\.py ended with exit status 1",
        None, 30),
    "minitrain_python_that_fails_export_onnx": (
        lambda d: _with_env({"MINITRAIN_PYTHON": "/bin/false"},
                            ["export", "--weights", mlp_3_1_file(d, metadata=json_dumps(META_3_1)), "--format", "onnx",
                             "--out", f"{d}/m.onnx"]), 1,
        r"the Python interpreter /bin/false \(\$MINITRAIN_PYTHON\) running .*export_onnx\.py ended with exit status 1",
        _no_file("m.onnx"), 30),
    "val_split_with_an_underscore": (
        lambda d: ["train", "--val_split", "0.2", *QUIET], 2, r"unknown option --val_split \(did you mean --val-split\?\)",
        None, 30),
    "evaluate_help_mentions_accuracy": (
        lambda d: ["evaluate", "--help"], 0, r"accuracy and balanced accuracy", None, 30),
    # issue 30 plot and pipelines
    "pipelines_run_named_summary_json": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\n[[run]]\nname = "summary.json"\n')],
        1, r"run 'summary\.json' would have its directory at .*out/summary\.json, where minitrain pipelines "
        r"writes its summary", _no_file("out"), 60),
    "pipelines_log_at_the_summary": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\n[[run]]\nname = "a"\nlog = "../summary.json"\n')],
        1, r"run 'a' \(log\) and the summary of all runs would both write .*out/summary\.json", _no_file("out"), 60),
    "pipelines_sweep_values_that_print_alike": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\n[sweep]\nlr = [1e-7, 1.00000001e-7]\n')],
        0, r"", lambda d, out: None if all(os.path.isdir(f"{d}/out/{n}") for n in ("lr-1e-07", "lr-1.00000001e-07"))
        else f"run directories: {os.listdir(f'{d}/out') if os.path.isdir(f'{d}/out') else None}", 120),
    "pipelines_of_too_many_runs": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", "[sweep]\nseed = [" + ",".join(str(i) for i in range(1, 21)) + "]\n"
            + "".join(f'[[run]]\nname = "r{i}"\n' for i in range(100)))],
        1, r"makes 2000 runs \(100 \[\[run\]\] x 20 \[sweep\] points\), more than --max-runs 1000; raise --max-runs",
        _no_file("out"), 60),
    "pipelines_summary_has_the_exit_code_as_a_number": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\n[[run]]\nname = "a"\n[[run]]\nname = "b"\n'
            'lr = -1.0\n')],
        1, r"", lambda d, out: _summary_exit_codes(d, {"a": 0}), 120),
    "pipelines_into_an_earlier_sweeps_out": (
        lambda d: (os.makedirs(f"{d}/out"), write(f"{d}/out/summary.json", '{"runs": []}\n'),
                   ["pipelines", "--out", f"{d}/out", "--config", write(
                       f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\n[[run]]\nname = "a"\n')])[2],
        1, r"--out .*out holds the results of an earlier invocation \(.*out/summary\.json\); choose another "
        r"--out DIR, or pass --overwrite", _unchanged("out/summary.json", '{"runs": []}\n'), 60),
    # by default as many CPU runs at once as fit the cores (here 1 thread each), no more than runs
    "pipelines_run_as_many_at_once_as_fit_the_cores": (
        lambda d: ["pipelines", "--out", f"{d}/out", "--config", write(
            f"{d}/runs.toml", '[defaults]\nsteps = 1\ndevice = "cpu"\nthreads = 1\n[sweep]\nseed = [1, 2, 3]\n')],
        0, r"pipelines: 3 run\(s\) .*; %d CPU slot\(s\) of " % min(3, os.cpu_count() or 1), None, 120),
})


def _summary_exit_codes(d, want):
    import json
    with open(f"{d}/out/summary.json") as f:
        runs = {r["name"]: r for r in json.load(f)["runs"]}
    got = {name: runs[name].get("exit_code", "absent") for name in want}
    return None if got == want else f"exit_code in summary.json: {got}, want {want}"


# issue 30 medium list
def _one_row_classes(d, n=20):
    write(f"{d}/t.csv", "a,y\n" + "".join(f"{i},{i}\n" for i in range(n)))
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
            "--model", f"mlp:1,{n}", "--steps", "1", "--val-split", "0.5", *QUIET]


def _weighted_val_split(d, weights):
    write(f"{d}/t.csv", "a,b,y\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(10)))
    write(f"{d}/w.npy", npy_f32(weights, [1.0] * weights))
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "y", "--loss", "cross_entropy",
            "--model", "mlp:2,2", "--steps", "2", "--val-split", "0.5", "--sample-weights", f"{d}/w.npy", *QUIET]


def _tiny_file_huge_metadata_model(d):
    # 584-byte style: mlp:3,1's tensors under metadata claiming a 40 GB model (10^10 parameters).
    meta = '{"format":"pt","model":"mlp:3,100000,100000,1","activation":"relu"}'
    return ["predict", "--weights", mlp_3_1_file(d, metadata=meta), "--input",
            write(f"{d}/x.npy", npy_f32(1, [1, 2, 3])), "--output", f"{d}/p.npy"]


ROWS.update({
    # a stratified --val-split rounds the held-out total once (ceil(0.5 x 20) = 10), not each class
    "val_split_stratified_one_row_classes_holds_out_half": (
        _one_row_classes, 0, r"\(10 rows, 10 held out by --val-split 0\.5 of --data\)", None, 60),
    # --sample-weights with --val-split: one weight per --data row, split with the rows
    "sample_weights_one_per_data_row_with_val_split": (
        lambda d: _weighted_val_split(d, 10), 0, r"\(5 rows, 5 held out by --val-split.*done: ", None, 60),
    "sample_weights_count_mismatch_with_val_split": (
        lambda d: _weighted_val_split(d, 5), 1,
        r"--sample-weights .*w\.npy holds an array of shape \[5, 1\] \(5 weights\) but --data has 10 rows", None, 60),
    # predict checks the file's tensors against the metadata's model before making the model
    # a table whose every row is ignored, or whose every class weight is 0, is refused up front
    "every_row_ignored_is_refused": (
        lambda d: _labels_csv(d, ["-100", "-100", "-100"]), 1,
        r"every one of the 3 training rows has label -100, the --ignore-index", None, 30),
    "every_class_weight_zero_is_refused": (
        lambda d: _labels_csv(d, ["0", "1", "2"]) + ["--class-weights", write(f"{d}/cw.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", bytes(12)))],
        1, r"every one of the 3 counted training rows has a class whose --class-weights weight is 0 "
           r"\(weights \[0, 0, 0\]\)", None, 30),
    # predict warns on non-finite outputs (exit 0, as numpy's overflow warning), naming the count and first row
    "predict_warns_on_non_finite_outputs": (
        lambda d: ["predict", "--weights", write(f"{d}/w.safetensors", mlp_3_1_weights([3e38, 3e38, 3e38], 0)),
                   "--model", "mlp:3,1", "--activation", "relu", "--input",
                   write(f"{d}/x.npy", npy_f32(3, [0, 0, 0, 1, 1, 1, 2, 2, 2])), "--output", f"{d}/p.npy"], 0,
        r"warning: --weights .*w\.safetensors: 2 of the 3 outputs are not finite, the first inf at row 1, output 0",
        None, 30),
    "predict_tiny_weights_file_claiming_a_huge_model": (
        _tiny_file_huge_metadata_model, 1,
        r"does not fit its tensors: missing keys \"2\.weight\", \"2\.bias\", \"4\.weight\", \"4\.bias\"; "
        r"shape mismatch: \"0\.weight\" is \[1, 3\] but the model has \[100000, 3\]", None, 30, LIMITED),
})


ROWS.update({
    # --cuda-graph where a step cannot be captured: one note, then the eager steps (exit 0)
    "cuda_graph_on_the_cpu_is_a_note": (
        lambda d: ["train", "--steps", "2", "--device", "cpu", "--cuda-graph", "--progress", "none"], 0,
        r"note: --cuda-graph is off for this run: a CUDA graph needs a CUDA device, not cpu; the "
        r"steps run eagerly", None, 30),
    "mlp_kernel_unknown": (
        lambda d: ["train", "--steps", "1", "--device", "cpu", "--mlp-kernel", "fast", "--progress", "none"], 1,
        r"unknown mlp kernel 'fast'; choose one of layers, fused", _no_steps_ran, 30),
    "mlp_kernel_fused_on_a_model_too_wide": (
        lambda d: ["train", "--steps", "1", "--device", "cpu", "--mlp-kernel", "fused", "--model", "mlp:4,200,1",
                   "--progress", "none"], 1,
        r"mlp kernel 'fused' cannot run this model: Linear 0 is 4 -> 200 wide; the fused MLP takes widths up "
        r"to 128 .*use --mlp-kernel layers", None, 30),
    # `runs` is `pipelines` by another name, with its errors
    "runs_alias_names_a_missing_config": (
        lambda d: ["runs", "--config", f"{d}/none.toml"], 1, r"cannot open '.*none\.toml'", None, 30),
})


def json_dumps(v):
    import json
    return json.dumps(v)


# issue 30 columns and low list
ID_CSV = 'id,sepal,petal,width,species\n' + "".join(
    f'"r,{i}",{line}\n' for i, line in enumerate(TRIAL_CSV.splitlines()[1:]))


def _id_train(d, *extra):
    write(f"{d}/t.csv", ID_CSV)
    return ["train", "--data", f"{d}/t.csv", "--target-columns", "species", "--loss", "cross_entropy",
            "--model", "mlp:3,8,3", "--steps", "2", *extra, *QUIET]


def _id_predict(d, *extra, output="p.csv"):
    mt(*_id_train(d, "--ignore-columns", "id", "--save", f"{d}/w.safetensors"))
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output", f"{d}/{output}",
            *extra]


def _resume_other_ignored(d):
    """Same feature count, other features: without the check the resume trains on them silently."""
    def args(steps, ignored, *extra):
        return ["train", "--data", f"{d}/t.csv", "--target-columns", "species", "--loss", "cross_entropy",
                "--model", "mlp:2,8,3", "--steps", steps, "--ignore-columns", ignored, "--checkpoint-dir",
                f"{d}/ck", *extra, *QUIET]
    write(f"{d}/t.csv", ID_CSV)
    mt(*args("2", "id,sepal", "--checkpoint-every", "1"))
    return args("4", "id,petal", "--resume")


def _kept_id_check(d, out):
    lines = open(f"{d}/p.csv").read().splitlines()
    if lines[0] != "id,species,setosa,versicolor,virginica" or not lines[1].startswith('"r,0",'):
        return "predict --keep-columns id --class-and-probabilities wrote:\n" + "\n".join(lines[:2])
    return None


def _progress_lines_check(d, out):
    steps = re.findall(r"^step (\d+)/16 ", out, re.M)
    return None if steps == ["1", "2", "4", "6", "8", "10", "12", "14", "16"] else f"progress lines at steps {steps}"


ROWS.update({
    # --kl-log-target and --alpha, checked in config_test only so far
    "kl_log_target_without_kl_div": (
        lambda d: ["train", "--kl-log-target", "--steps", "1", *QUIET], 1,
        r"--kl-log-target applies to --loss kl_div, not to --loss mse", None, 30),
    "alpha_without_rmsprop": (
        lambda d: ["train", "--alpha", "0.9", "--steps", "1", *QUIET], 1,
        r"--alpha applies to --optimizer rmsprop, not to adam", None, 30),
    "alpha_negative": (
        lambda d: ["train", "--optimizer", "rmsprop", "--alpha=-16777217", "--steps", "1", *QUIET], 1,
        r"--alpha must be finite and >= 0, got -16777217", None, 30),
    "alpha_not_finite": (
        lambda d: ["train", "--optimizer", "rmsprop", "--alpha", "inf", "--steps", "1", *QUIET], 1,
        r"--alpha must be finite and >= 0, got inf", None, 30),
    # --loss poisson_nll's setting (issue 33's recipe check)
    "poisson_log_input_without_poisson_nll": (
        lambda d: ["train", "--poisson-log-input=false", "--steps", "1", *QUIET], 1,
        r"--poisson-log-input applies to --loss poisson_nll, not to --loss mse", None, 30),
    "huber_delta_zero_is_refused_once_by_its_spec": (
        lambda d: ["train", "--loss", "huber", "--huber-delta", "0", "--steps", "1", *QUIET], 1,
        r"--huber-delta must be finite and > 0 but is 0", None, 30),
    # --ignore-columns and --keep-columns
    "ignore_columns_trains_without_the_id": (
        lambda d: _id_train(d, "--ignore-columns", "id"), 0, r"done: ", None, 60),
    "id_column_without_ignore_columns": (
        lambda d: _id_train(d), 1, r"t\.csv:2: column 'id' \(1\): 'r,0' is not a number", None, 30),
    "ignore_columns_unknown_name": (
        lambda d: _id_train(d, "--ignore-columns", "ID"), 1,
        r"t\.csv: --ignore-columns names column 'ID', which the header \(line 1\) lacks; it has 'id', 'sepal'", None, 30),
    "ignore_columns_names_the_target": (
        lambda d: _id_train(d, "--ignore-columns", "species"), 1,
        r"--ignore-columns names 'species', which --target-columns names too", None, 30),
    "ignore_columns_twice": (
        lambda d: _id_train(d, "--ignore-columns", "id,id"), 1, r"--ignore-columns names 'id' twice", None, 30),
    "ignore_columns_without_a_csv": (
        lambda d: ["train", "--ignore-columns", "id", "--steps", "1", *QUIET], 1,
        r"--ignore-columns is for \.csv data, but --data is 'synthetic'", None, 30),
    # Issue 33: this row once wanted an error here (the training table needed --ignore-columns id
    # again); the weights now say the training ignored 'id', and predict ignores it too.
    "predict_id_column_needs_no_flag_after_training_ignored_it": (
        lambda d: _id_predict(d), 0, r"predicted 12 rows",
        lambda d, out: None if open(f"{d}/p.csv").readline().strip() == "species" else "p.csv's header is not 'species'",
        60),
    "predict_keep_columns_with_class_and_probabilities": (
        lambda d: _id_predict(d, "--keep-columns", "id", "--class-and-probabilities"), 0, r"predicted 12 rows",
        _kept_id_check, 60),
    "predict_keep_columns_into_npy": (
        lambda d: _id_predict(d, "--keep-columns", "id", output="p.npy"), 1,
        r"--keep-columns copies columns into a CSV output, but --output .*p\.npy", _no_file("p.npy"), 60),
    "predict_keep_columns_unknown_name": (
        lambda d: _id_predict(d, "--keep-columns", "nope"), 1, r"--keep-columns names column 'nope'",
        _no_file("p.csv"), 60),
    "predict_keep_and_ignore_the_same_column": (
        lambda d: _id_predict(d, "--keep-columns", "id", "--ignore-columns", "id"), 1,
        r"'id' is named by both --ignore-columns and --keep-columns", _no_file("p.csv"), 60),
    "predict_ignore_a_feature_column": (
        lambda d: _id_predict(d, "--ignore-columns", "id,petal"), 1,
        r"'petal' is named by --ignore-columns but the model takes it as a feature", _no_file("p.csv"), 60),
    "predict_class_and_probabilities_with_probabilities": (
        lambda d: _id_predict(d, "--ignore-columns", "id", "--class-and-probabilities", "--probabilities"), 1,
        r"--class-and-probabilities already writes the probabilities", _no_file("p.csv"), 60),
    "evaluate_ignore_columns_unknown_name": (
        lambda d: ["evaluate"] + _id_predict(d)[1:3] + ["--data", f"{d}/t.csv", "--ignore-columns", "nope"], 1,
        r"--ignore-columns names column 'nope'", None, 60),
    "evaluate_ignore_columns": (
        lambda d: ["evaluate"] + _id_predict(d)[1:3] + ["--data", f"{d}/t.csv", "--ignore-columns", "id"], 0,
        r'"accuracy"', None, 60),
    "resume_with_other_ignored_columns": (
        _resume_other_ignored, 1,
        r'--resume: the checkpoint in .*ck was written with ignore-columns \["id","sepal"\], this run has \["id","petal"\]',
        None, 60),
    # paths near the system's limits, progress cadence
    "save_name_of_252_bytes": (
        lambda d: ["train", "--steps", "1", "--save", f"{d}/" + "w" * 240 + ".safetensors", *QUIET], 0, r"done: ",
        lambda d, out: None if os.path.exists(f"{d}/" + "w" * 240 + ".safetensors") else "no weights", 30),
    "checkpoint_dir_of_4600_characters": (
        lambda d: ["train", "--steps", "1", "--checkpoint-dir", f"{d}/" + "d/" * 2300, *QUIET], 1,
        r"--checkpoint-dir is \d+ characters long .*at most 4095 bytes \(PATH_MAX", None, 30),
    "progress_lines_of_a_16_step_run": (
        lambda d: ["train", "--steps", "16", "--progress", "lines", "--device", "cpu"], 0, r"done: ",
        _progress_lines_check, 30),
})


# ---- issue 33's user trial: the training's --ignore-columns travel with the model ----

def _with_id(text):
    """TRIAL_CSV-like `text` with an id column first (r1, r2, ...)."""
    lines = text.rstrip("\n").split("\n")
    return "id," + lines[0] + "\n" + "".join(f"r{i},{l}\n" for i, l in enumerate(lines[1:], 1))


def _trained_with_ignored_id(d):
    """A classifier trained on t.csv with --ignore-columns id; t.csv has the id column."""
    write(f"{d}/t.csv", _with_id(TRIAL_CSV))
    mt("train", "--data", f"{d}/t.csv", "--target-columns", "species", "--loss", "cross_entropy",
       "--model", "mlp:3,16,3", "--steps", "300", "--lr", "0.05", "--ignore-columns", "id",
       "--save", f"{d}/w.safetensors", *QUIET)


def _evaluate_training_table(d):
    _trained_with_ignored_id(d)
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/t.csv", "--device", "cpu"]


def _predict_training_table(d):
    _trained_with_ignored_id(d)
    # Rows to predict need not have the id: a table without it is read as well.
    write(f"{d}/new.csv", TRIAL_CSV)
    mt("predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/new.csv", "--output", f"{d}/want.csv",
       "--device", "cpu")
    return ["predict", "--weights", f"{d}/w.safetensors", "--input", f"{d}/t.csv", "--output", f"{d}/p.csv",
            "--device", "cpu"]


def _same_predictions_as_want(d, out):
    with open(f"{d}/want.csv") as f:
        want = f.read()
    with open(f"{d}/p.csv") as f:
        got = f.read()
    return None if got == want and want.count("\n") == 13 else "predictions differ with and without the id"


def _evaluate_ignore_flag_wins(d):
    _trained_with_ignored_id(d)
    # --ignore-columns given: it says which columns are ignored, the training's 'id' no more.
    write(f"{d}/both.csv", "".join(f"{l},x\n" if i else f"{l},note\n"
                                   for i, l in enumerate(_with_id(TRIAL_CSV).rstrip("\n").split("\n"))))
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/both.csv", "--ignore-columns", "note",
            "--device", "cpu"]


def _evaluate_table_with_an_id(d):
    _trial_classifier(d)  # trained on a table without an id
    write(f"{d}/r.csv", _with_id(TRIAL_CSV))
    return ["evaluate", "--weights", f"{d}/w.safetensors", "--data", f"{d}/r.csv", "--device", "cpu"]


def _names_no_keep_columns(d, out):
    return "the message names --keep-columns, which evaluate does not take" if "--keep-columns" in out else None


ROWS.update({
    "evaluate_ignores_the_trainings_ignore_columns": (
        _evaluate_training_table, 0, r'"accuracy"', None, 120),
    "predict_ignores_the_trainings_ignore_columns": (
        _predict_training_table, 0, r"", _same_predictions_as_want, 120),
    "evaluate_ignore_columns_flag_wins_over_the_trainings": (
        _evaluate_ignore_flag_wins, 1, r"both\.csv: column 'id' is neither one of the model's feature columns", None, 120),
    "evaluate_unknown_column_names_only_evaluates_flags": (
        _evaluate_table_with_an_id, 1, r"r\.csv: column 'id' is neither .*name it with --ignore-columns",
        _names_no_keep_columns, 120),
    "predict_unknown_column_names_keep_columns": (
        lambda d: _predict_table(d, "id,sepal,petal,width\n7,1,5,9\n"), 1,
        r"r\.csv: column 'id' is neither .*--ignore-columns \(or --keep-columns to pass it through to the output\)",
        _no_file("p.csv"), 120),
})

def run_case(name, scratch_root):
    setup, want_status, want_regex, check, limit, *address_space = ROWS[name]
    d = tempfile.mkdtemp(prefix=name[:40] + ".", dir=scratch_root)
    args = setup(d)
    env = None
    if isinstance(args, dict):  # a row that runs minitrain with extra environment variables
        env = dict(os.environ, **args["env"])
        args = args["args"]

    def limit_memory():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space[0], address_space[0]))

    try:
        p = subprocess.run([MINITRAIN] + args, capture_output=True, timeout=limit, preexec_fn=limit_memory,
                           env=env)
    except subprocess.TimeoutExpired:
        return f"no exit within {limit} s (a hang)"
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    problems = []
    if p.returncode != want_status:
        problems.append(f"exit status {p.returncode}, expected {want_status}")
    if not re.search(want_regex, out, re.S):
        problems.append(f"output does not match /{want_regex}/")
    if check and not problems:
        extra = check(d, out)
        if extra:
            problems.append(extra)
    if problems:
        return "; ".join(problems) + "\n--- output (first 3000 bytes) ---\n" + out[:3000]
    return None


def main():
    global MINITRAIN
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    MINITRAIN = os.path.abspath(sys.argv[1])
    if sys.argv[2:3] == ["--list"]:
        print("\n".join(ROWS))
        return
    names = [sys.argv[3]] if sys.argv[2:3] == ["--case"] else list(ROWS)
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        sys.exit(f"unknown case(s): {unknown}; see --list")
    scratch_root = os.environ.get("HOSTILE_SCRATCH") or tempfile.mkdtemp(prefix="minitrain-hostile.")
    os.makedirs(scratch_root, exist_ok=True)
    failed = 0
    for name in names:
        problem = run_case(name, scratch_root)
        print(f"{'FAIL' if problem else 'ok  '} {name}" + (f": {problem}" if problem else ""))
        failed += problem is not None
    sys.exit(1 if failed else 0)


MINITRAIN = None
if __name__ == "__main__":
    main()
