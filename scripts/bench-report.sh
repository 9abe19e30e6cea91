#!/usr/bin/env bash
# Joins the sections the benchmarks wrote into one report. Usage: scripts/bench-report.sh OUT.md SECTION.md...
set -euo pipefail
out=$1; shift
{
    echo "# Benchmarks"
    echo
    echo "Every figure below was written by \`make bench\` on the machine it names; nothing is typed by hand."
    echo "Ratios compare packager with its peer measured in the same run, on the same machine."
    echo
    for section in "$@"; do cat "$section"; echo; done
} >"$out"
echo "wrote $out"
