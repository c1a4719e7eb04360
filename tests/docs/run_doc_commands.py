#!/usr/bin/env python3
"""Runs the documentation's runnable commands at small sizes; fails on a non-zero exit.

    run_doc_commands.py --source-dir DIR --build-dir BUILD --scratch SCRATCH

A shell block (```sh or ```bash) of README.md or docs/*.md is runnable when the line before its
fence is `<!-- runnable -->`. Its commands (a trailing backslash continues a line, # starts a
comment) run one after another in a fresh folder SCRATCH/<page>_<n>, with ./build/ meaning BUILD
(and a tool named bare, tp-sim, its build) and book.txt a small text. train_gpt runs small: --width 32 --context 16 --batch 16
--val-batches 1 --sample-chars 0 replace the flags given or are added, --steps above 20 becomes 3
(and is 3 when not given), and a run that neither resumes nor names a --checkpoint-dir gets one
of its own. Standard library only.
"""

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys

MARK = "<!-- runnable -->"
SMALL = {"--width": "32", "--context": "16", "--batch": "16", "--val-batches": "1",
         "--sample-chars": "0"}


def blocks(path):
    """The runnable blocks of one Markdown file: (first line number, [lines])."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.strip() != MARK or i + 1 >= len(lines):
            continue
        fence = lines[i + 1].strip()
        if not (fence.startswith("```sh") or fence.startswith("```bash")):
            raise SystemExit(f"{path}:{i + 1}: {MARK} must stand before a ```sh or ```bash fence")
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j].strip().startswith("```"):
                break
            body.append(lines[j])
        out.append((i + 3, body))
    return out


def commands(body):
    joined, current = [], ""
    for line in body:
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        if current.strip():
            joined.append(current)
        current = ""
    return [shlex.split(c, comments=True) for c in joined if shlex.split(c, comments=True)]


def small_train_gpt(args, counter):
    """train_gpt's arguments at small sizes (see the module's doc)."""
    out = list(args)
    def set_flag(flag, value):
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out.extend([flag, value])
    for flag, value in SMALL.items():
        set_flag(flag, value)
    if "--steps" not in out or int(out[out.index("--steps") + 1]) > 20:
        set_flag("--steps", "3")
    if "--checkpoint-dir" not in out and "--resume" not in out:
        set_flag("--checkpoint-dir", f"run_{counter}")
    return out


TOOLS = ("tp-sim", "tp-trace", "tp-plan", "tp-launch", "tp-tokenize")


def rewrite(argv, build, counter):
    argv = [build + a[len("./build"):] if a.startswith("./build/") else a for a in argv]
    if argv[0] in TOOLS:  # a tool named bare, as if on the PATH
        argv[0] = os.path.join(build, "tools", argv[0], argv[0])
    for i, a in enumerate(argv):
        if os.path.basename(a) == "train_gpt":
            return argv[:i + 1] + small_train_gpt(argv[i + 1:], counter)
    return argv


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--scratch", required=True)
    o = parser.parse_args()
    build = os.path.abspath(o.build_dir)
    pages = [os.path.join(o.source_dir, "README.md")] + sorted(
        glob.glob(os.path.join(o.source_dir, "docs", "*.md")))
    shutil.rmtree(o.scratch, ignore_errors=True)
    ran = failed = 0
    counter = 0
    for page in pages:
        for number, (line, body) in enumerate(blocks(page)):
            folder = os.path.join(o.scratch, f"{os.path.basename(page)[:-3]}_{number}")
            os.makedirs(folder)
            with open("/usr/share/common-licenses/GPL-3") as src, \
                    open(os.path.join(folder, "book.txt"), "w") as dst:
                dst.write(src.read())
            for argv in commands(body):
                counter += 1
                run = rewrite(argv, build, counter)
                result = subprocess.run(run, cwd=folder, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, timeout=300)
                ran += 1
                if result.returncode != 0:
                    failed += 1
                    print(f"{page}:{line}: exit {result.returncode}: {shlex.join(run)}\n"
                          f"{result.stdout[-3000:]}")
    print(f"{ran - failed} passed, {failed} failed")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
