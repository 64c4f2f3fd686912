#!/usr/bin/env python3
"""The shape of the code a newcomer reads: functions and files that grew too long.

Lists every function of the non-test C++ sources (tracked *.cc and *.h outside
tests/) longer than --max_function_lines, and every such .cc file longer than
--max_file_lines, as universal-ctags sees them (a function's lines run from
its signature to its closing brace, comments inside included). Exits 1 when
anything is over, naming it, so the format stage of tools/check.sh keeps the
limits; --top N prints the N longest functions either way.

Usage: tools/code_shape.py [--max_function_lines 80] [--max_file_lines 700] [--top N] [paths...]
"""
import argparse
import json
import os
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max_function_lines", type=int, default=80)
    parser.add_argument("--max_file_lines", type=int, default=700)
    parser.add_argument("--top", type=int, default=0)
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
    print(f"code shape: {len(files)} files, {len(rows)} functions; longest function "
          f"{rows[0][0] if rows else 0} lines; {len(long_functions)} over {args.max_function_lines} lines, "
          f"{len(long_files)} .cc files over {args.max_file_lines} lines")
    for n, path, name, line in long_functions:
        print(f"  function {name} ({path}:{line}) is {n} lines (at most {args.max_function_lines})")
    for n, f in sorted(long_files, reverse=True):
        print(f"  file {f} is {n} lines (at most {args.max_file_lines})")
    return 1 if long_functions or long_files else 0


if __name__ == "__main__":
    sys.exit(main())
