#!/usr/bin/env python3
"""pstrain vs PyTorch: training images/sec of one model on one GPU.

Runs `pstrain-bench model --device gpu --precision P --fp32_math M ... --json`,
then the same model, batch size and precision in PyTorch (torchvision model,
synthetic data already on the GPU, cross-entropy, fp32 weights,
cudnn.benchmark on, by default TF32 convolutions and strict fp32 matmuls as
PyTorch ships) in this process, and prints both rates side by side:

    precision: fp32 (convolutions in TF32, matmuls strict: PyTorch's defaults)
    framework                  images/sec  relative
    pstrain                        ...        ...
    pytorch 2.x                    ...       1.00
    pstrain/pytorch ratio: X.XX (goal >= 1.00)
    peak device memory: pstrain X.XX GB, pytorch Y.YY GB (ratio Z.ZZ)

The memory line compares pstrain-bench's peak_device_bytes (its caching
allocator's peak bytes in use) with torch.cuda.max_memory_allocated() (GB:
10^9 bytes); --json gives their ratio as memory_ratio.

What each side times (docs/GPU.md):
  pstrain   images_per_sec of `pstrain-bench model --device gpu --json`:
            the mean of per-step rates over --steps steps after --warmup;
            a step is forward + loss + backward, no optimizer.
  pytorch   batch x steps / wall time of --steps steps after --warmup, with
            torch.cuda.synchronize() before and after; each step is zero_grad,
            forward, loss, backward and, with --optimizer momentum (default),
            SGD momentum 0.9. --optimizer none matches pstrain-bench's step.

Precision (--precision, both sides):
  fp32      fp32 data, weights and arithmetic; --fp32_math says where
            tensor cores may round products to TF32.
  bf16      pstrain-bench --precision bf16; PyTorch runs forward and loss
            under torch.autocast("cuda", torch.bfloat16): convolutions and
            matmuls in bf16 with fp32 accumulation, fp32 master weights, no
            loss scaling.
  fp16      pstrain-bench --precision fp16; PyTorch as bf16 with
            torch.float16 and a GradScaler: the loss is scaled before
            backward, and with --optimizer momentum the step goes through the
            scaler (unscale, overflow check, skipped step, scale update).
            With --optimizer none only the scaled backward runs: the scaler's
            unscale and overflow check belong to its optimizer step.

fp32 math (--fp32_math, both sides: pstrain-bench --fp32_math, PyTorch's
backend switches):
  tf32_convolutions  the default, PyTorch as users run it: convolutions on
            TF32 tensor cores (cudnn.allow_tf32 on), matmuls strict fp32
            (cuda.matmul.allow_tf32 off, float32 matmul precision "highest").
  tf32      convolutions and matmuls in TF32 (both switches on, "high").
  strict    plain fp32 everywhere, TF32 off on both sides.
  On a GPU without TF32 (before compute capability 8.0) pstrain-bench runs
  strict and says so in its JSON (a warning here); PyTorch's switches then
  change nothing either.

Memory format (--memory_format, PyTorch only; pstrain's layout is its own):
  auto            channels_last for bf16 / fp16 (autocast + channels_last, what
                  NVIDIA and PyTorch recommend for mixed precision),
                  channels_first for fp32 (PyTorch's default).
  channels_first  NCHW model and images.
  channels_last   model.to(memory_format=torch.channels_last) and
                  images.contiguous(memory_format=torch.channels_last).

The pstrain command, first match:
  --pstrain_json FILE   a result already produced by `pstrain-bench ... --json`
  --pstrain_cmd CMD     a shell command printing that JSON on stdout; {model},
                        {batch_size}, {steps}, {warmup}, {num_classes},
                        {precision}, {fp32_math} are filled in
  --pstrain_bin PATH    a pstrain-bench executable, or a bundle directory
                        (tools/gpu_bundle.sh) whose run.sh is used
  default               $PSTRAIN_BUNDLE_DIR/run.sh (set by the bundle's env.sh),
                        pstrain-bundle/run.sh in the current directory or in
                        this checkout, then build/bin/pstrain-bench

Exit status: 0 done (whatever the ratio), 1 a run failed or PyTorch / a CUDA
device is missing, 2 bad usage. Results on stdout, progress on stderr.
"""
import argparse
import contextlib
import json
import os
import math
import shlex
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOAL = 1.00

# pstrain zoo name -> (torchvision constructor, extra kwargs, image side).
MODELS = {
    "alexnet": ("alexnet", {}, 224),
    "vgg16": ("vgg16", {}, 224),
    "resnet50": ("resnet50", {}, 224),
    "resnet101": ("resnet101", {}, 224),
    "resnet152": ("resnet152", {}, 224),
    # pstrain's inception3 has no auxiliary classifier.
    "inception3": ("inception_v3", {"aux_logits": False, "init_weights": True}, 299),
}


# --precision -> the torch dtype autocast computes in (None: no autocast).
AUTOCAST_DTYPES = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}

# --fp32_math -> how the table's precision line says it (fp32).
FP32_MATH = {
    "tf32_convolutions": "convolutions in TF32, matmuls strict: PyTorch's defaults",
    "tf32": "convolutions and matmuls in TF32",
    "strict": "strict: TF32 off on both sides",
}
MEMORY_FORMATS = ("auto", "channels_first", "channels_last")


class Failure(Exception):
    """A run that cannot go on; the message is printed and the exit status is 1."""


def log(msg):
    print("pytorch_compare: " + msg, file=sys.stderr, flush=True)


def parse_args(argv):
    class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    p = argparse.ArgumentParser(
        description=__doc__,
        epilog="example: python3 tools/pytorch_compare.py --model resnet50 --batch_size 64 "
        "--pstrain_bin pstrain-bundle",
        formatter_class=Formatter)
    p.add_argument("--model", default="resnet50", choices=sorted(MODELS), help="zoo model")
    p.add_argument("--batch_size", type=int, default=64, help="images per step (one GPU)")
    p.add_argument("--steps", type=int, default=50, help="measured training steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (cuDNN autotuning, caches)")
    p.add_argument("--num_classes", type=int, default=1000, help="output classes")
    p.add_argument("--precision", default="fp32", choices=sorted(AUTOCAST_DTYPES),
                   help="arithmetic of both sides: fp32, or mixed precision bf16 / fp16 (pstrain-bench "
                   "--precision; PyTorch torch.autocast, fp32 master weights, fp16 with a GradScaler)")
    p.add_argument("--fp32_math", default="tf32_convolutions", choices=sorted(FP32_MATH),
                   help="fp32 products on both sides (pstrain-bench --fp32_math; PyTorch cudnn.allow_tf32 "
                   "unless strict, cuda.matmul.allow_tf32 with tf32): TF32 convolutions and strict matmuls "
                   "as PyTorch ships, TF32 for both, or strict fp32 everywhere")
    p.add_argument("--memory_format", default="auto", choices=MEMORY_FORMATS,
                   help="PyTorch's model and image layout: auto is channels_last for bf16 / fp16 "
                   "(recommended with autocast) and channels_first for fp32 (PyTorch's default); "
                   "pstrain's layout is its own")
    p.add_argument("--optimizer", default="momentum", choices=["momentum", "none"],
                   help="PyTorch step: SGD momentum 0.9, or no optimizer (like pstrain-bench model); "
                   "with fp16 and none, only the GradScaler's scaled backward runs (its unscale and "
                   "overflow check are part of the optimizer step)")
    p.add_argument("--cudnn_algorithms", default="measured", choices=["measured", "heuristic"],
                   help="how pstrain's convolutions pick cuDNN algorithms (PSTRAIN_CUDNN_ALGORITHMS): measured "
                        "like PyTorch's cudnn.benchmark (the like-for-like default), or cuDNN's heuristics")
    p.add_argument("--pstrain_bin", help="pstrain-bench executable or bundle directory")
    p.add_argument("--pstrain_cmd", help="shell command printing pstrain-bench's JSON (placeholders as above)")
    p.add_argument("--pstrain_json", help="file with a pstrain-bench --json result; nothing is run")
    p.add_argument("--pstrain_timeout", type=float, default=1800, help="seconds for the pstrain run")
    p.add_argument("--skip_pstrain", action="store_true", help="PyTorch only (no ratio)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    a = p.parse_args(argv)
    for name in ("batch_size", "steps", "num_classes"):
        if getattr(a, name) <= 0:
            p.error("--%s must be > 0, got %d" % (name, getattr(a, name)))
    if a.warmup < 0:
        p.error("--warmup must be >= 0, got %d" % a.warmup)
    given = [n for n in ("pstrain_bin", "pstrain_cmd", "pstrain_json") if getattr(a, n)]
    if len(given) > 1 or (given and a.skip_pstrain):
        p.error("give at most one of --pstrain_bin, --pstrain_cmd, --pstrain_json, --skip_pstrain")
    return a


# ---- PyTorch side -----------------------------------------------------------

def import_torch():
    """Returns (torch, torchvision); Failure with the reason when unusable."""
    try:
        import torch  # imported here so that --help works without PyTorch
    except ImportError as e:
        raise Failure("PyTorch is not installed (import torch: %s); install torch and torchvision "
                      "for this python3 (%s)" % (e, sys.executable))
    try:
        import torchvision
    except ImportError as e:
        raise Failure("torchvision is not installed (import torchvision: %s)" % e)
    if not torch.cuda.is_available():
        raise Failure("PyTorch sees no CUDA device (torch %s, built for CUDA %s; CUDA_VISIBLE_DEVICES=%s)"
                      % (torch.__version__, torch.version.cuda, os.environ.get("CUDA_VISIBLE_DEVICES", "unset")))
    return torch, torchvision


def build_model(torchvision, name, num_classes):
    ctor_name, kwargs, _ = MODELS[name]
    ctor = getattr(torchvision.models, ctor_name)
    try:
        return ctor(weights=None, num_classes=num_classes, **kwargs)
    except TypeError:  # torchvision < 0.13 has no `weights`
        return ctor(pretrained=False, num_classes=num_classes, **kwargs)


def memory_format(a):
    """PyTorch's layout for --memory_format: auto is channels_last under autocast, channels_first in fp32."""
    if a.memory_format != "auto":
        return a.memory_format
    return "channels_first" if a.precision == "fp32" else "channels_last"


def set_backends(torch, a):
    """cudnn.benchmark on; TF32 convolutions unless --fp32_math strict, TF32 matmuls only with tf32."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = a.fp32_math != "strict"
    torch.backends.cuda.matmul.allow_tf32 = a.fp32_math == "tf32"
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("high" if a.fp32_math == "tf32" else "highest")


def make_amp(torch, precision):
    """(autocast context factory, GradScaler or None) for --precision; fp32: no autocast, no scaler."""
    dtype_name = AUTOCAST_DTYPES[precision]
    if dtype_name is None:
        return contextlib.nullcontext, None
    if precision == "bf16" and hasattr(torch.cuda, "is_bf16_supported") and not torch.cuda.is_bf16_supported():
        raise Failure("--precision bf16: %s has no bf16 support" % torch.cuda.get_device_name(0))
    dtype = getattr(torch, dtype_name)

    def autocast():
        return torch.autocast(device_type="cuda", dtype=dtype)

    if precision != "fp16":
        return autocast, None  # bf16 has fp32's exponent range: no loss scaling
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return autocast, torch.amp.GradScaler("cuda")
    return autocast, torch.cuda.amp.GradScaler()


def make_step(model, optimizer, loss_fn, images, labels, autocast, scaler):
    """One training step: zero_grad, forward and loss under autocast, backward (scaled with a
    GradScaler) and the optimizer step (through the scaler when there is one); returns the loss."""
    def step():
        (optimizer or model).zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(model(images), labels)
        if scaler is None:
            loss.backward()
            if optimizer is not None:
                optimizer.step()
            return loss
        scaler.scale(loss).backward()
        if optimizer is not None:
            scaler.step(optimizer)  # unscales, skips the step on inf/nan gradients
            scaler.update()
        return loss

    return step


def run_pytorch(torch, torchvision, a):
    set_backends(torch, a)
    autocast, scaler = make_amp(torch, a.precision)
    device = torch.device("cuda", 0)
    side = MODELS[a.model][2]
    layout = memory_format(a)
    torch.manual_seed(0)
    # fp32 weights (autocast's master weights) and fp32 inputs, channels-first (PyTorch's default) or
    # channels_last (--memory_format; auto under autocast) for both.
    model = build_model(torchvision, a.model, a.num_classes).to(device=device, dtype=torch.float32)
    images = torch.empty(a.batch_size, 3, side, side, device=device).uniform_(-1, 1)
    if layout == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        images = images.contiguous(memory_format=torch.channels_last)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    labels = torch.randint(0, a.num_classes, (a.batch_size,), device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if a.optimizer == "momentum" else None
    step = make_step(model, optimizer, torch.nn.CrossEntropyLoss(), images, labels, autocast, scaler)

    log("pytorch %s: %s, batch %d, %s, fp32_math %s, %s, %d warm-up + %d steps"
        % (torch.__version__, a.model, a.batch_size, a.precision, a.fp32_math, layout, a.warmup, a.steps))
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    final_loss = float(loss.item())
    if not math.isfinite(final_loss):
        raise Failure("PyTorch loss is %s after the measured steps" % final_loss)
    return {
        "framework": "pytorch",
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "gpu": torch.cuda.get_device_name(0),
        "images_per_sec": a.batch_size * a.steps / elapsed,
        "seconds": elapsed,
        "num_parameters": params,
        "optimizer": a.optimizer,
        "precision": a.precision,
        "autocast": AUTOCAST_DTYPES[a.precision],
        "loss_scale": scaler.get_scale() if scaler is not None else None,
        "fp32_math": a.fp32_math,
        "memory_format": layout,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device),
        "loss": final_loss,
    }


# ---- pstrain side -----------------------------------------------------------

def pstrain_command(a):
    """The argv (list) or shell command (str) that prints pstrain-bench's JSON."""
    flags = ["model", "--device", "gpu", "--model", a.model, "--batch_size", str(a.batch_size),
             "--steps", str(a.steps), "--warmup", str(a.warmup), "--num_classes", str(a.num_classes),
             "--precision", a.precision, "--fp32_math", a.fp32_math, "--json"]
    if a.pstrain_cmd:  # plain replacement: other braces (JSON, shell) stay as they are
        cmd = a.pstrain_cmd
        for key in ("model", "batch_size", "steps", "warmup", "num_classes", "precision", "fp32_math"):
            cmd = cmd.replace("{%s}" % key, str(getattr(a, key)))
        return cmd
    candidates = []
    if a.pstrain_bin:
        candidates = [a.pstrain_bin]
    else:
        if os.environ.get("PSTRAIN_BUNDLE_DIR"):
            candidates.append(os.environ["PSTRAIN_BUNDLE_DIR"])
        candidates += [os.path.join(os.getcwd(), "pstrain-bundle"), os.path.join(ROOT, "pstrain-bundle"),
                       os.path.join(ROOT, "build", "bin", "pstrain-bench")]
    for c in candidates:
        if os.path.isdir(c) and os.access(os.path.join(c, "run.sh"), os.X_OK):
            return [os.path.join(c, "run.sh"), "pstrain-bench"] + flags
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return [c] + flags
    if a.pstrain_bin:
        raise Failure("--pstrain_bin %s is neither an executable nor a bundle directory with run.sh" % a.pstrain_bin)
    raise Failure("no pstrain-bench found (looked for %s); pass --pstrain_bin, --pstrain_cmd or --pstrain_json"
                  % ", ".join(candidates))


def parse_pstrain_json(text, where):
    """The last line of `text` that is a JSON object."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
            except ValueError as e:
                raise Failure("%s: bad JSON (%s): %s" % (where, e, line[:200]))
            if not isinstance(result.get("images_per_sec"), (int, float)):
                raise Failure("%s: no numeric images_per_sec in %s" % (where, line[:200]))
            return result
    raise Failure("%s printed no JSON object on stdout (was --json given?)" % where)


def run_pstrain(a):
    if a.pstrain_json:
        try:
            with open(a.pstrain_json) as f:
                return parse_pstrain_json(f.read(), a.pstrain_json)
        except OSError as e:
            raise Failure("--pstrain_json: %s" % e)
    cmd = pstrain_command(a)
    shown = cmd if isinstance(cmd, str) else " ".join(shlex.quote(c) for c in cmd)
    log("pstrain: PSTRAIN_CUDNN_ALGORITHMS=%s %s" % (a.cudnn_algorithms, shown))
    env = dict(os.environ, PSTRAIN_CUDNN_ALGORITHMS=a.cudnn_algorithms)
    try:
        # stderr (progress lines, logs) passes through; stdout carries the JSON.
        proc = subprocess.run(cmd, shell=isinstance(cmd, str), stdout=subprocess.PIPE, universal_newlines=True,
                              timeout=a.pstrain_timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Failure("pstrain run passed --pstrain_timeout %.0f s: %s" % (a.pstrain_timeout, shown))
    except OSError as e:
        raise Failure("cannot run %s: %s" % (shown, e))
    if proc.returncode != 0:
        raise Failure("pstrain run exited %d (its stderr is above): %s" % (proc.returncode, shown))
    return parse_pstrain_json(proc.stdout, "pstrain-bench")


def check_like_for_like(a, ps, pt):
    """Warnings (strings) when the two runs did not measure the same thing."""
    warnings = []
    if ps is not None:
        if ps.get("device", "gpu") != "gpu":
            warnings.append("pstrain ran on device '%s', not gpu" % ps.get("device"))
        for key in ("model", "batch_size", "precision"):
            want = getattr(a, key)
            if key in ps and ps[key] != want:
                warnings.append("pstrain result is for %s %s, asked for %s" % (key, ps[key], want))
        if "fp32_math" in ps and ps["fp32_math"] != a.fp32_math:  # strict where the GPU has no TF32
            warnings.append("pstrain ran fp32_math %s, asked for %s (no TF32 on this GPU?)"
                            % (ps["fp32_math"], a.fp32_math))
    if ps is not None and pt is not None and ps.get("num_parameters") not in (None, pt["num_parameters"]):
        warnings.append("parameter counts differ: pstrain %s, torchvision %s (not the same network)"
                        % (ps["num_parameters"], pt["num_parameters"]))
    return warnings


def main(argv):
    a = parse_args(argv)
    try:
        torch, torchvision = import_torch()  # before the (long) pstrain run: fail early
        ps = None if a.skip_pstrain else run_pstrain(a)
        pt = run_pytorch(torch, torchvision, a)
    except Failure as e:
        log(str(e))
        return 1
    warnings = check_like_for_like(a, ps, pt)
    for w in warnings:
        log("warning: " + w)
    ratio = ps["images_per_sec"] / pt["images_per_sec"] if ps is not None else None
    memory_ratio = peak_memory_ratio(ps, pt)
    if a.json:
        print(json.dumps({"model": a.model, "batch_size": a.batch_size, "steps": a.steps, "warmup": a.warmup,
                          "precision": a.precision, "fp32_math": a.fp32_math, "pstrain": ps, "pytorch": pt,
                          "ratio": ratio, "memory_ratio": memory_ratio, "goal": GOAL, "warnings": warnings},
                         sort_keys=True))
        return 0
    print_table(a, ps, pt, ratio, memory_ratio)
    return 0


def peak_bytes(result, key):
    """result[key] when it is a number > 0, else None (no result, no such key)."""
    value = (result or {}).get(key)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def peak_memory_ratio(ps, pt):
    """pstrain's peak_device_bytes / PyTorch's peak_memory_bytes, None unless both are > 0."""
    ps_peak, pt_peak = peak_bytes(ps, "peak_device_bytes"), peak_bytes(pt, "peak_memory_bytes")
    return ps_peak / pt_peak if ps_peak is not None and pt_peak is not None else None


def memory_line(ps, pt, memory_ratio):
    """The table's `peak device memory:` line; None when neither side reports a peak."""
    ps_peak, pt_peak = peak_bytes(ps, "peak_device_bytes"), peak_bytes(pt, "peak_memory_bytes")
    if ps_peak is None and pt_peak is None:
        return None

    def gb(value):
        return "%.2f GB" % (value / 1e9) if value is not None else "unknown"

    sides = ([] if ps is None else ["pstrain " + gb(ps_peak)]) + ["pytorch " + gb(pt_peak)]
    ratio = " (ratio %.2f)" % memory_ratio if memory_ratio is not None else ""
    return "peak device memory: %s%s" % (", ".join(sides), ratio)


def precision_line(a):
    """The table's `precision:` line: what each side computes in."""
    layout = memory_format(a)
    if a.precision == "fp32":
        shown = "; PyTorch %s" % layout if layout != "channels_first" else ""
        return "precision: fp32 (%s%s)" % (FP32_MATH[a.fp32_math], shown)
    scaling = ", GradScaler" if a.precision == "fp16" else ", no loss scaling"
    return ("precision: %s (pstrain --precision %s; PyTorch autocast %s, %s, fp32 master weights%s)"
            % (a.precision, a.precision, AUTOCAST_DTYPES[a.precision], layout, scaling))


def print_table(a, ps, pt, ratio, memory_ratio=None):
    pt_label = "pytorch %s" % pt["version"].split("+")[0]
    print("model %s, batch %d, %d steps after %d warm-up, %s (CUDA %s, cuDNN %s)"
          % (a.model, a.batch_size, a.steps, a.warmup, pt["gpu"], pt["cuda"], pt["cudnn"]))
    print(precision_line(a))
    backward = "scaled backward" if a.precision == "fp16" else "backward"
    print("pytorch step: %s" % ("forward + %s + SGD momentum 0.9" % backward if a.optimizer == "momentum"
                                else "forward + %s, no optimizer" % backward))
    print("%-26s %12s %9s" % ("framework", "images/sec", "relative"))
    if ps is not None:
        print("%-26s %12.1f %9.2f" % ("pstrain", ps["images_per_sec"], ratio))
    print("%-26s %12.1f %9.2f" % (pt_label, pt["images_per_sec"], 1.0))
    if ps is not None:
        print("pstrain/pytorch ratio: %.2f (goal >= %.2f)" % (ratio, GOAL))
    memory = memory_line(ps, pt, memory_ratio)
    if memory is not None:
        print(memory)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
