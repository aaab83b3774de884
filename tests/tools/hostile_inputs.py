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


def run_case(name, scratch_root):
    setup, want_status, want_regex, check, limit, *address_space = ROWS[name]
    d = tempfile.mkdtemp(prefix=name[:40] + ".", dir=scratch_root)
    args = setup(d)

    def limit_memory():
        if address_space:
            resource.setrlimit(resource.RLIMIT_AS, (address_space[0], address_space[0]))

    try:
        p = subprocess.run([MINITRAIN] + args, capture_output=True, timeout=limit, preexec_fn=limit_memory)
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
