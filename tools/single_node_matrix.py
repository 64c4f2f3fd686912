#!/usr/bin/env python3
"""Writes configs/compare/seed_single_node_8xP100.yaml: the single-node
tuning article's table (five models x five in-worker strategies x 1, 2, 4
and 8 devices) on an emulated 8 x P100 server. Each row's speed-up is against
the same model and strategy on one device.

Usage: tools/single_node_matrix.py [OUTPUT]
"""
import sys

# zoo name, label, input shape, time scale multiplier: AlexNet's steps are
# short (64 images in 50 ms on a P100), and filling 8 input batches takes
# this machine's CPU time however short they are.
MODELS = [
    ("inception3", "InceptionV3", [3, 299, 299], 1),
    ("resnet50", "ResNet-50", [3, 224, 224], 1),
    ("resnet152", "ResNet-152", [3, 224, 224], 1),
    ("alexnet", "AlexNet", [3, 224, 224], 4),
    ("vgg16", "VGG16", [3, 224, 224], 1),
]
# label, config fields, PS shards, time scale. The parameter_server rows move
# their bytes through a real PS process as well (CPU time on this machine),
# so they run slower to stay valid (docs/EMULATION.md, "Valid or CPU-bound").
STRATEGIES = [
    ("PS (CPU)", 'variable_update: parameter_server, all_reduce_spec: "", local_parameter_device: cpu', 1, 4),
    ("PS (GPU)", 'variable_update: parameter_server, all_reduce_spec: "", local_parameter_device: gpu', 1, 4),
    ("replicated NCCL", "variable_update: replicated, all_reduce_spec: nccl", 0, 2),
    ("replicated NONE", "variable_update: replicated, all_reduce_spec: none", 0, 2),
    ("replicated PSCPU", "variable_update: replicated, all_reduce_spec: pscpu", 0, 2),
]
DEVICES = [1, 2, 4, 8]

HEADER = """\
# The single-node tuning article's table on an emulated 8 x P100 server:
# five models x five in-worker strategies x 1, 2, 4 and 8 devices, one worker
# with emulated P100s joined by the article's PCIe topology (base:
# ../emulated/single_node_p100.yaml; docs/EMULATION.md, "Inside a host").
# Each row's speed-up is against the same model and strategy on one device
# (its `baseline`); its scaling efficiency against one emulated P100.
#   build/bin/pstrain-compare configs/compare/seed_single_node_8xP100.yaml   # root: an emulated host
# Figures and how they compare with the article's conclusions:
# docs/BENCHMARKS.md, "The single-node table, emulated".
# Written by tools/single_node_matrix.py: edit it, not this file, and rerun it.
name: seed_single_node_8xP100
description: >-
  Five models on 1, 2, 4 and 8 emulated P100s in one server (PCIe 3.0, two
  devices per switch, two switches per socket): parameter_server with the
  variables on the host (PS (CPU)) or spread over the devices (PS (GPU)),
  replicated with the gradients all-reduced along a ring (NCCL), by copies to
  one device (NONE) or summed on the host (PSCPU). Batch 64 per device,
  4 steps (1 warm-up).
base: ../emulated/single_node_p100.yaml
variants:
"""


def variant(model, title, shape, strategy, fields, ps, scale, devices):
    label = f"{title}, {strategy}, {devices}"
    shape_text = ", ".join(str(d) for d in shape)
    line = (f'  - {{label: "{label}", set: {{{fields}, devices_per_worker: {devices}, '
            f"model: {{name: {model}, input_shape: [{shape_text}], num_classes: 1000}}, "
            f"emulation: {{time_scale: {scale}}}}}, workers: 1, ps: {ps}")
    # Every row against the same model and strategy on one device (which
    # is its own).
    line += f', baseline: "{title}, {strategy}, 1"'
    return line + "}"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "configs/compare/seed_single_node_8xP100.yaml"
    lines = [HEADER.rstrip("\n")]
    for model, title, shape, slower in MODELS:
        lines.append(f"  # {title}")
        for strategy, fields, ps, scale in STRATEGIES:
            for devices in DEVICES:
                lines.append(variant(model, title, shape, strategy, fields, ps, scale * slower, devices))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
