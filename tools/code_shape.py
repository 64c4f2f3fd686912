#!/usr/bin/env python3
"""The shape of the code a newcomer reads: functions, files and classes that grew
too large, and folders that include each other.

Over the non-test C++ sources (tracked *.cc and *.h outside tests/), as
universal-ctags sees them:
  functions  longer than --max_function_lines (from the signature to the
             closing brace, comments inside included);
  files      .cc files longer than --max_file_lines;
  classes    classes and structs with more than --max_class_methods member
             functions (distinct names: overloads count once; constructors
             and destructors count);
  folders    two folders whose files include each other's headers (a parent
             and a sub-folder, or two siblings): includes point one way. A
             role's main (*_main.cc) sits above everything and is left out.
Exits 1 when anything is over, naming it, so the format stage of
tools/check.sh keeps the limits. --top N prints the N longest functions and
the N largest classes either way; --folders prints the include arrows between
folders with their counts.

Usage: tools/code_shape.py [--max_function_lines 80] [--max_file_lines 700]
                           [--max_class_methods 40] [--top N] [--folders] [paths...]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys


def sources(root, paths):
    files = subprocess.run(["git", "ls-files", "--", "*.cc", "*.h"], cwd=root, check=True, capture_output=True,
                           text=True).stdout.split()
    files = [f for f in files if not f.startswith("tests/")]
    if paths:
        files = [f for f in files if any(f == p or f.startswith(p.rstrip("/") + "/") for p in paths)]
    return files


def functions(root, files):
    """(lines, path, name, first line) of every function definition ctags finds."""
    if not files:
        return []
    out = subprocess.run(["ctags", "--languages=C++", "--c++-kinds=f", "--fields=+ne", "--output-format=json", "-f",
                          "-", "-L", "-"], cwd=root, check=True, capture_output=True, text=True,
                         input="\n".join(files)).stdout
    rows = []
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and "end" in tag:
            rows.append((tag["end"] - tag["line"] + 1, tag["path"], tag["name"], tag["line"]))
    return sorted(rows, reverse=True)


def class_methods(root, files):
    """{class: set of member function names} over `files` (declarations and definitions)."""
    if not files:
        return {}
    out = subprocess.run(["ctags", "--languages=C++", "--c++-kinds=+p", "--fields=+neKZs", "--output-format=json",
                          "-f", "-", "-L", "-"], cwd=root, check=True, capture_output=True, text=True,
                         input="\n".join(files)).stdout
    methods = collections.defaultdict(set)
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag" or tag.get("kind") not in ("function", "prototype"):
            continue
        # Thread-safety macros after a member read to ctags as functions.
        if tag.get("scopeKind") in ("class", "struct") and tag.get("scope") and not tag["name"].startswith("ABSL_"):
            methods[tag["scope"]].add(tag["name"])
    return methods


INCLUDE = re.compile(r'#include "([^"]+)"')


def include_arrows(root, files):
    """{(folder, folder): [file -> header, ...]} for includes from one folder into another."""
    arrows = collections.defaultdict(list)
    for f in files:
        if f.endswith("_main.cc"):
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as handle:
            for line in handle:
                m = INCLUDE.match(line)
                if not m or not os.path.exists(os.path.join(root, m.group(1))):
                    continue
                src, dst = os.path.dirname(f), os.path.dirname(m.group(1))
                if src != dst:
                    arrows[(src, dst)].append(f"{f} -> {m.group(1)}")
    return arrows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max_function_lines", type=int, default=80)
    parser.add_argument("--max_file_lines", type=int, default=700)
    parser.add_argument("--max_class_methods", type=int, default=40)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--folders", action="store_true")
    parser.add_argument("paths", nargs="*")
    args = parser.parse_args()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True,
                          text=True).stdout.strip()
    files = sources(root, args.paths)
    rows = functions(root, files)
    for n, path, name, line in rows[:args.top]:
        print(f"{n:5d}  {name}  {path}:{line}")
    long_functions = [r for r in rows if r[0] > args.max_function_lines]
    long_files = []
    for f in files:
        if f.endswith(".cc"):
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as handle:
                n = sum(1 for _ in handle)
            if n > args.max_file_lines:
                long_files.append((n, f))
    methods = class_methods(root, files)
    classes = sorted(((len(names), name) for name, names in methods.items()), reverse=True)
    for n, name in classes[:args.top]:
        print(f"{n:5d}  methods  {name}")
    large_classes = [c for c in classes if c[0] > args.max_class_methods]
    arrows = include_arrows(root, files)
    if args.folders:
        for (src, dst), lines in sorted(arrows.items()):
            print(f"{len(lines):5d}  {src} -> {dst}")
    cycles = sorted((a, b) for (a, b) in arrows if a < b and (b, a) in arrows)
    print(f"code shape: {len(files)} files, {len(rows)} functions; longest function "
          f"{rows[0][0] if rows else 0} lines; {len(long_functions)} over {args.max_function_lines} lines, "
          f"{len(long_files)} .cc files over {args.max_file_lines} lines; largest class "
          f"{classes[0][0] if classes else 0} methods, {len(large_classes)} over {args.max_class_methods}; "
          f"{len(arrows)} include arrows between folders, {len(cycles)} pairs of folders including each other")
    for n, path, name, line in long_functions:
        print(f"  function {name} ({path}:{line}) is {n} lines (at most {args.max_function_lines})")
    for n, f in sorted(long_files, reverse=True):
        print(f"  file {f} is {n} lines (at most {args.max_file_lines})")
    for n, name in large_classes:
        print(f"  class {name} has {n} methods (at most {args.max_class_methods}): give its concepts classes of "
              "their own")
    for a, b in cycles:
        print(f"  folders {a} and {b} include each other: {arrows[(a, b)][0]}; {arrows[(b, a)][0]}")
    return 1 if long_functions or long_files or large_classes or cycles else 0


if __name__ == "__main__":
    sys.exit(main())
