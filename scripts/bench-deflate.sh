#!/usr/bin/env bash
# Which deflate encoder and level packager's writer uses, by measurement: zlib, libdeflate and ISA-L on the text
# bodies of Debian's python3.11-doc HTML (what a crawl of it compresses), one whole buffer per file, one core.
# Usage: scripts/bench-deflate.sh WORK_FOLDER OUTPUT_MARKDOWN
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
work=$1
out=$2
docs=/usr/share/doc/python3.11/html
mkdir -p "$work"
cc -O2 -o "$work/deflate-levels" "$(dirname "$0")/deflate-levels.c" -lz -ldeflate -lisal
find -L "$docs" -type f \( -name '*.html' -o -name '*.css' -o -name '*.js' -o -name '*.txt' -o -name '*.svg' \) | sort >"$work/files"
"$work/deflate-levels" <"$work/files" >"$work/table"
{
    echo "## Deflate at build time: zlib, libdeflate and ISA-L"
    echo
    echo "Run by \`make bench\` (scripts/bench-deflate.sh, scripts/deflate-levels.c) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "The text bodies of Debian's python3.11-doc HTML ($(head -1 "$work/table")), each compressed as one buffer, best of 3 passes on one core."
    python3 - "$work/table" <<'PY2'
import sys
rows = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 5 and cells[1].isdigit():
        rows[(cells[0], int(cells[1]))] = (float(cells[2].split()[0]), int(cells[3]))
zt, zb = rows[("zlib", 6)]
lt, lb = rows[("libdeflate", 6)]
l8t, l8b = rows[("libdeflate", 8)]
it, ib = rows[("ISA-L", 3)]
print(f"bsdtar's zip uses zlib's level 6. packager build uses libdeflate's level 6: {lb / zb:.3f}x zlib 6's size in {lt / zt:.2f}x its time. "
      f"Level 8 (packager pack's default) writes {100 * (1 - l8b / lb):.1f}% less than level 6 in {l8t / lt:.1f}x its time; "
      f"ISA-L's best level (3) takes {it / zt:.2f}x zlib 6's time and writes {100 * (ib / zb - 1):.0f}% more.")
PY2
    echo
    tail -n +3 "$work/table"
} >"$out"
cat "$out"
