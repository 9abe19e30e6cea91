#!/usr/bin/env python3
"""The sample outputs of README.md's console blocks against what the commands printed when readme-check.sh ran them.

Usage: readme-outputs.py README STEPS OUTPUTS [--update]

STEPS is readme-check.sh's list of steps; OUTPUTS holds each command's output, named by its README line. A shown
output is the block's lines after a `$ ` command up to the next one. It is a pattern, not a copy:
  - a line that is `…` alone stands for any number of lines;
  - a line ending in `…` matches a line that begins as it does;
  - what differs from run to run is compared by its shape: durations, sizes, times and dates, digests, key
    fingerprints, temporary folders and port numbers;
  - a command run in the background (`&`) is compared on as many lines as are shown.
Without --update, a shown output that the command no longer prints is reported with what it printed, and the exit
status is 1. With --update, every output is written again from what its command printed (each shown line replaced by
the printed line it stands for, `…` lines kept, digests and temporary folders shortened as shown) and README is
rewritten.
"""
import re
import sys

VOLATILE = [
    (re.compile(r"\S*/readme-check\.\w+/tmp/tmp\.\w+"), "/tmp/tmp.…"),
    (re.compile(r"\b\d+(\.\d+)? ?(s|ms|µs)\b"), "<time>"),
    (re.compile(r"\b\d+(\.\d+)? ?(B|KiB|MiB|GiB|KB|MB|GB)\b"), "<size>"),
    (re.compile(r"\b\d+(\.\d+)?%"), "<percent>"),
    (re.compile(r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT"), "<date>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<date>"),
    (re.compile(r"(sha256:|ed25519:|W/)?\"?[0-9a-f]{16,}\"?…?"), "<hex>"),
    (re.compile(r"sha256:[0-9a-f]*…"), "<hex>"),
    (re.compile(r"/tmp/[\w.…-]+"), "<tmp>"),
    (re.compile(r"\bage: \d+"), "age: <n>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
]


def shape(line):
    line = line.rstrip()
    for pattern, replacement in VOLATILE:
        line = pattern.sub(replacement, line)
    return line


def line_matches(shown, actual):
    if shown.rstrip().endswith("…") and shown.strip() != "…":
        prefix = shape(shown.rstrip()[:-1])
        return shape(actual).startswith(prefix) or shape(actual).startswith(shape(shown))
    return shape(shown) == shape(actual)


def matches(shown, actual):
    """Whether the pattern lines `shown` match the output lines `actual` (`…` alone: any number of lines)."""
    memo = {}

    def go(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(shown):
            result = j == len(actual)
        elif shown[i].strip() == "…":
            result = any(go(i + 1, k) for k in range(j, len(actual) + 1))
        else:
            result = j < len(actual) and line_matches(shown[i], actual[j]) and go(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    return go(0, 0)


def loose(line):
    """A line's shape with every number masked: how a shown line finds the printed line it stands for."""
    return re.sub(r"\d+", "#", shape(line))


def regenerate(shown, actual):
    """`actual` as the README shows it: in an output with `…` lines, each shown line is replaced by the printed line it
    stands for (found in order, by its shape with numbers masked) and the `…` lines stay; an output without them is
    replaced whole. Digests are shortened to eight digits and temporary folders to `/tmp/tmp.…`, as shown."""
    if not any(line.strip() == "…" for line in shown):
        out = actual
    else:
        out, j, elided = [], 0, False
        for line in shown:
            if line.strip() == "…":
                out.append(line)
                elided = True
                continue
            k = next((k for k in range(j, len(actual)) if loose(actual[k]) == loose(line)), None)
            if k is None:
                print(f"readme-outputs: no printed line stands for the shown `{line}`: left out", file=sys.stderr)
                continue
            # Printed lines between two shown ones that no `…` stands for are shown too.
            out += ([] if elided else actual[j:k]) + [actual[k]]
            j, elided = k + 1, False
        if not elided:
            out += actual[j:]
    out = [re.sub(r"(sha256:[0-9a-f]{8})[0-9a-f]{56}", r"\1…", line) for line in out]
    return [re.sub(r"\S*/readme-check\.\w+/tmp/tmp\.\w+", "/tmp/tmp.…", line) for line in out]


def main():
    readme_path, steps_path, outputs = sys.argv[1:4]
    update = "--update" in sys.argv[4:]
    lines = open(readme_path, encoding="utf-8").read().split("\n")
    commands = {}
    for step in open(steps_path, encoding="utf-8").read().splitlines():
        kind, number, _, text = step.split("\t", 3)
        if kind == "CMD":
            # A command in the background goes on printing while the others run: only its first lines are shown.
            commands[int(number)] = bool(re.search(r"&\s*(#.*)?$", text))
    # Each command's shown output: from the line after it (and its continuation lines) to the next `$ ` or the fence.
    changes = []
    stale = 0
    for number in sorted(commands):
        i = number  # index of the line after the command (README lines are 1-based)
        while lines[i - 1].endswith("\\"):
            i += 1
        start = i
        end = start
        while end < len(lines) and not lines[end].startswith("$ ") and not lines[end].startswith("```"):
            end += 1
        shown = lines[start:end]
        if not shown:
            continue
        try:
            actual = open(f"{outputs}/{number}", encoding="utf-8", errors="replace").read().rstrip("\n").split("\n")
        except FileNotFoundError:
            continue
        actual = [line.rstrip() for line in actual]
        if commands[number] and not any(line.strip() == "…" for line in shown):
            actual = actual[: len(shown)]
        if update:
            # Every output is written again, not only those that differ: all the values shown come from one run (the
            # key keygen printed is the key build says signed).
            new = regenerate(shown, actual)
            if new != shown:
                changes.append((start, end, new))
            continue
        if not matches(shown, actual):
            stale += 1
            print(f"readme-outputs: {readme_path}:{number}: the output shown is not what `{lines[number - 1][2:]}` prints:", file=sys.stderr)
            for line in shown:
                print(f"  shown:   {line}", file=sys.stderr)
            for line in actual[:40]:
                print(f"  printed: {line}", file=sys.stderr)
    if update and changes:
        for start, end, new in reversed(changes):
            lines[start:end] = new
        open(readme_path, "w", encoding="utf-8").write("\n".join(lines))
        print(f"readme-outputs: rewrote {len(changes)} outputs in {readme_path}")
    elif stale:
        print(f"readme-outputs: {stale} outputs in {readme_path} are not what their commands print "
              "(scripts/readme-check.sh --update writes them again)", file=sys.stderr)
        sys.exit(1)
    else:
        print(f"readme-outputs: every output shown in {readme_path} is what its command prints")


main()
