#!/usr/bin/env python3
"""Run every `pcpmodel ...` command the README shows, as written (issue 35).

Every line of a fenced code block in README.md that starts with `pcpmodel ` (or
`cargo run --release -- `, run as the built binary) is run with the release binary, in order,
from a scratch directory that sees the repository's top-level entries (data/, models/,
examples/, ...) through symlinks, so relative paths work as from a fresh clone and files the
commands write (`> hist.csv`, `-o F.svg`) land in the scratch directory. A command that exits
non-zero, runs longer than --timeout seconds, or prints `inf` or `NaN` as a value fails the run.

Inline `pcpmodel ...` spans in the prose are run too when they are concrete; a span with
placeholders (`[--kernel X]`, `A|B`, `...`, `00N`) is a syntax summary and is listed, not run.

Commands that need root or the host itself (they measure, write sysctls or trace the kernel)
are never run as written: HOST_ONLY maps each to the harmless form that is run instead
(`--dry-run`, `--help`) or to None with the reason it is skipped. Lines of code blocks that are
not pcpmodel commands (cargo, the Python tools) are listed in OTHER with the reason they are not
run here; an unlisted one fails the run, so the lists stay explicit.

Usage: python3 tools/readme_commands.py [--bin PATH] [--readme README.md] [--timeout 60] [--list]
The binary defaults to $PCPMODEL_BIN, else target/release/pcpmodel. Python 3 standard library.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Subcommands (first words after `pcpmodel`) that touch the host: what is run instead, or None
# and why nothing is run.
HOST_ONLY = {
    ("measure", "pcp"): ("--dry-run", "writes vm.percpu_pagelist_high_fraction (root); the plan is printed instead"),
    ("measure", "latency"): ("--help", "pinned pointer chases and ping-pongs on this host, timings that vary; CI runs it once with --quick in its own step"),
    ("kernel", "--host"): (None, "reads this host's kernel; CI's host tests cover it"),
}

# Lines of README code blocks that are not pcpmodel commands: prefix -> why not run here.
OTHER = {
    "cargo install --path .": "installs the binary into ~/.cargo/bin; CI builds the same one with cargo build --release",
    "cargo test": "the test suite; .ci/run runs it in its own step",
    "cargo build --release": "builds the binary this script runs; .ci/run does it first",
    "python3 tools/mutate.py": "the mutation harness; .ci/run runs --quick in its own step, the rest are long runs",
    "PCPMODEL_BIN=": "the mutation harness with another binary (see above)",
    "sudo python3 tools/trace_pcp_flow.py": "needs root and tracefs (the kernel's kmem tracepoints)",
}

PLACEHOLDER = re.compile(r"\[|\]|\||\.\.\.|\b00N\b|\b[A-Z]{1,}\b(?!=)")
BAD_VALUE = re.compile(r"(?<![\w.-])(-?inf|NaN|nan)(?![\w.])")


def strip_comment(line):
    """Drops a trailing `# comment` (a '#' after whitespace, outside quotes)."""
    out, quote = [], None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            break
        out.append(c)
    return "".join(out).strip()


def extract(readme):
    """(line number, where, text) of every command-like line: 'block' or 'inline'."""
    text = open(readme, encoding="utf-8").read()
    found, in_block = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        if in_block:
            cmd = strip_comment(line)
            if cmd:
                found.append((n, "block", cmd))
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for m in re.finditer(r"`(pcpmodel [^`]*)`", prose):
        n = prose[: m.start()].count("\n") + 1
        found.append((n, "inline", " ".join(m.group(1).split())))
    return found


def classify(where, cmd):
    """('run', shell command), ('skip', reason) or ('unknown', reason)."""
    if cmd.startswith("cargo run --release -- "):
        cmd = "pcpmodel " + cmd[len("cargo run --release -- "):]
    if not cmd.startswith("pcpmodel "):
        for prefix, why in OTHER.items():
            if cmd.startswith(prefix):
                return "skip", why
        return "unknown", "a code-block line that is neither a pcpmodel command nor listed in OTHER"
    words = shlex.split(cmd.split(">")[0])[1:]
    if where == "inline" and PLACEHOLDER.search(cmd[len("pcpmodel "):]):
        return "skip", "a syntax summary with placeholders, not a command"
    for key, (instead, why) in HOST_ONLY.items():
        if words[:1] == [key[0]] and key[1] in words[1:]:
            if instead is None:
                return "skip", why
            if instead in words:  # the README already shows the harmless form
                return "run", cmd, why
            return "run", f"{cmd} {instead}", why
    return "run", cmd


def scratch_dir():
    d = tempfile.mkdtemp(prefix="pcpmodel-readme-")
    for name in os.listdir(ROOT):
        if name in (".git", "target"):
            continue
        os.symlink(os.path.join(ROOT, name), os.path.join(d, name))
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.environ.get("PCPMODEL_BIN") or os.path.join(ROOT, "target/release/pcpmodel"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per command")
    ap.add_argument("--list", action="store_true", help="print what would run and exit")
    args = ap.parse_args()

    items, seen = [], set()
    for n, where, cmd in extract(args.readme):
        if cmd in seen:  # the same command shown twice is run once
            continue
        seen.add(cmd)
        c = classify(where, cmd)
        items.append((n, where, cmd, c))
    if args.list:
        for n, where, cmd, c in items:
            print(f"README.md:{n} [{where}] {c[0]}: {c[1] if c[0] != 'run' else c[1]}")
        return 0
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print(f"error: no binary at {binary} (cargo build --release, or --bin / $PCPMODEL_BIN)", file=sys.stderr)
        return 2
    bindir = tempfile.mkdtemp(prefix="pcpmodel-bin-")
    os.symlink(binary, os.path.join(bindir, "pcpmodel"))
    work = scratch_dir()
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))

    failures, ran, skipped, t_all = [], 0, [], time.monotonic()
    for n, where, cmd, c in items:
        if c[0] == "unknown":
            failures.append((n, cmd, c[1]))
            print(f"FAIL README.md:{n}: {cmd}\n     {c[1]}")
            continue
        if c[0] == "skip":
            skipped.append((n, cmd, c[1]))
            continue
        shell = c[1]
        t0 = time.monotonic()
        try:
            p = subprocess.run(["sh", "-c", shell + " </dev/null"], cwd=work, env=env, capture_output=True,
                               text=True, errors="replace", timeout=args.timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = None, "", f"timed out after {args.timeout:.0f} s"
        dt = time.monotonic() - t0
        ran += 1
        bad = BAD_VALUE.search(out)
        note = f" ({c[2]})" if len(c) > 2 else ""
        if rc != 0 or bad:
            why = err.strip().splitlines()[-1] if err.strip() else ""
            if rc == 0 and bad:
                why = f"prints {bad.group(0)!r}: ...{out[max(0, bad.start() - 60): bad.end() + 20]!r}"
            failures.append((n, shell, f"exit {rc}: {why}"))
            print(f"FAIL README.md:{n} {dt:6.1f} s  {shell}{note}\n     exit {rc}: {why}")
        else:
            print(f"ok   README.md:{n} {dt:6.1f} s  {shell}{note}")
    for n, cmd, why in skipped:
        print(f"skip README.md:{n}  {cmd}\n     {why}")
    total = time.monotonic() - t_all
    print(f"{ran} README commands run in {total:.1f} s, {len(skipped)} listed as not run, {len(failures)} failed")
    if failures:
        print(f"scratch directory kept: {work}")
        return 1
    subprocess.run(["rm", "-rf", work, bindir])
    return 0


if __name__ == "__main__":
    sys.exit(main())
