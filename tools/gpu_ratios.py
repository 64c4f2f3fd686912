#!/usr/bin/env python3
"""Every GPU must-show ratio from one tools/gpu_check.sh output folder.

    python3 tools/gpu_ratios.py OUTDIR

Reads what gpu_check.sh leaves in OUTDIR and prints one line per figure:
its name, the ratio, the goal and PASS / FAIL, or "no result" when a file
or a row it needs is missing (a step that failed or did not run):

  fwd+bwd vs PyTorch   bench_pytorch_compare{,_strict,_bf16,_fp16,_bf16_half}.json
                       (pytorch_compare.py --optimizer none): pstrain-bench
                       model's forward+backward over PyTorch's, fp32 as each
                       ships (goal 0.9), strict (1.0), bf16 and fp16 (0.9)
  peak memory, bf16    the bf16 files' memory_ratio, with float32 and with
                       16-bit activations (goal <= 1.3)
  whole step vs        the table's whole training steps with SGD momentum
  PyTorch              (single_node_gpu: "independent", "independent,
                       strict fp32"; single_node_gpu_mixed: "nccl bf16", one
                       GPU) over PyTorch's step with momentum
                       (bench_pytorch_momentum{,_strict,_bf16}.json, PyTorch
                       only); goals 0.9, 1.0, 0.9
  whole step vs        the table's "independent" over pstrain-bench model's
  forward+backward     forward+backward (bench_pytorch_compare.json), goal 0.95
  strategies vs        single_node_gpu's rows over its "independent":
  independent          parameter_server (cpu), with and without the
                       pipeline, replicated pscpu and none, goal 0.9

The tables come from OUTDIR/table.tar.gz (or an unpacked OUTDIR/table/):
table/<matrix>/results.csv, pstrain-compare's. Exit status: 0 when every
figure was found and passed, 1 otherwise, 2 bad usage.
"""
import csv
import io
import json
import os
import sys
import tarfile

FWD_BWD = [  # (file, label, goal)
    ("bench_pytorch_compare.json", "fwd+bwd vs PyTorch, fp32 as each ships (TF32 convolutions)", 0.9),
    ("bench_pytorch_compare_strict.json", "fwd+bwd vs PyTorch, strict fp32 (TF32 off)", 1.0),
    ("bench_pytorch_compare_bf16.json", "fwd+bwd vs PyTorch, bf16 (autocast + channels_last)", 0.9),
    ("bench_pytorch_compare_fp16.json", "fwd+bwd vs PyTorch, fp16 (autocast + channels_last)", 0.9),
    ("bench_pytorch_compare_bf16_half.json", "fwd+bwd vs PyTorch, bf16 with 16-bit NHWC activations", 0.9),
]
WHOLE_STEP = [  # (matrix, row, PyTorch momentum file, label, goal)
    ("single_node_gpu", "independent", "bench_pytorch_momentum.json",
     "whole step with momentum vs PyTorch, fp32 as each ships", 0.9),
    ("single_node_gpu", "independent, strict fp32", "bench_pytorch_momentum_strict.json",
     "whole step with momentum vs PyTorch, strict fp32", 1.0),
    ("single_node_gpu_mixed", "nccl bf16", "bench_pytorch_momentum_bf16.json",
     "whole step with momentum vs PyTorch, bf16", 0.9),
]
STRATEGIES = [  # single_node_gpu rows against its "independent"
    "parameter_server (cpu)",
    "parameter_server (cpu), pipelined",
    "replicated pscpu",
    "replicated none",
]


def number(x):
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None


def load_json(outdir, name):
    try:
        with open(os.path.join(outdir, name)) as f:
            r = json.load(f)
        return r if isinstance(r, dict) else None
    except (OSError, ValueError):
        return None


def read_tables(outdir):
    """{matrix: {label: images_per_sec}} from the rows that ran ("ok")."""
    texts = {}
    archive = os.path.join(outdir, "table.tar.gz")
    if os.path.isfile(archive):
        try:
            with tarfile.open(archive) as tar:
                for member in tar.getmembers():
                    parts = member.name.strip("./").split("/")
                    if len(parts) == 3 and parts[0] == "table" and parts[2] == "results.csv" and member.isfile():
                        texts[parts[1]] = tar.extractfile(member).read().decode("utf-8", "replace")
        except (tarfile.TarError, OSError):
            pass
    table_dir = os.path.join(outdir, "table")
    if os.path.isdir(table_dir):
        for matrix in os.listdir(table_dir):
            path = os.path.join(table_dir, matrix, "results.csv")
            if os.path.isfile(path) and matrix not in texts:
                with open(path) as f:
                    texts[matrix] = f.read()
    tables = {}
    for matrix, text in texts.items():
        rows = {}
        for row in csv.DictReader(io.StringIO(text)):
            try:
                rate = float(row.get("images_per_sec") or "nan")
            except ValueError:
                continue
            if row.get("status") == "ok" and rate > 0:
                rows[row.get("label", "")] = rate
        tables[matrix] = rows
    return tables


class Report:
    def __init__(self):
        self.all_passed = True

    def line(self, label, ratio, goal, at_most=False):
        if ratio is None:
            self.all_passed = False
            print("%-66s no result" % label)
            return
        passed = ratio <= goal if at_most else ratio >= goal
        self.all_passed &= passed
        print("%-66s %6.3f  (goal %s %.2f)  %s" % (label, ratio, "<=" if at_most else ">=", goal,
                                                   "PASS" if passed else "FAIL"))


def ratio_of(a, b):
    a, b = number(a), number(b)
    return a / b if a is not None and b is not None else None


def main(argv):
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        print("gpu_ratios: give the gpu_check.sh output folder", file=sys.stderr)
        return 2
    outdir = argv[0]
    report = Report()
    compares = {name: load_json(outdir, name) for name, _, _ in FWD_BWD}
    half_file = "bench_pytorch_compare_bf16_half.json"
    ran = ((compares[half_file] or {}).get("pstrain") or {}).get("activations")
    if compares[half_file] and ran != "bf16 nhwc":
        # A run that kept float32 activations (the variable not read, say)
        # is not a figure of 16-bit ones.
        print("%s: pstrain ran with %s activations, not bf16 nhwc: ignored" % (half_file, ran))
        compares[half_file] = None
    for name, label, goal in FWD_BWD:
        r = compares[name]
        report.line(label, number(r.get("ratio")) if r else None, goal)
    bf16 = compares["bench_pytorch_compare_bf16.json"]
    report.line("peak device memory vs PyTorch, bf16", number(bf16.get("memory_ratio")) if bf16 else None, 1.3,
                at_most=True)
    half = compares["bench_pytorch_compare_bf16_half.json"]
    report.line("peak device memory vs PyTorch, bf16 with 16-bit NHWC activations",
                number(half.get("memory_ratio")) if half else None, 1.3, at_most=True)
    tables = read_tables(outdir)
    for matrix, row, momentum_file, label, goal in WHOLE_STEP:
        pytorch = load_json(outdir, momentum_file)
        pt_rate = (pytorch.get("pytorch") or {}).get("images_per_sec") if pytorch else None
        report.line(label, ratio_of(tables.get(matrix, {}).get(row), pt_rate), goal)
    fp32 = compares["bench_pytorch_compare.json"]
    bench_rate = (fp32.get("pstrain") or {}).get("images_per_sec") if fp32 else None
    report.line("whole step (independent) vs pstrain-bench forward+backward, fp32",
                ratio_of(tables.get("single_node_gpu", {}).get("independent"), bench_rate), 0.95)
    single = tables.get("single_node_gpu", {})
    for row in STRATEGIES:
        report.line("%s vs independent" % row, ratio_of(single.get(row), single.get("independent")), 0.9)
    return 0 if report.all_passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
