#!/usr/bin/env bash
# Benchmark of exports of python3.11-doc's bundle: WARC and WACZ (web archives) beside tar.zst (the plain archive), in
# one run; time (best of 3) and peak memory (the most of the runs).
# Usage: scripts/bench-export.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
packager="$bin/packager"
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
docs=/usr/share/doc/python3.11/html
runs=3
[ "$quick" = "--quick" ] && runs=1
measure() { # FORMAT: "best-seconds peak-KiB" of $runs exports
    local best="" peak=0
    for _ in $(seq "$runs"); do
        /usr/bin/time -f "%e %M" -o "$work/time" "$packager" export "$work/py.zip" --format "$1" -o "$work/py.$1" >/dev/null
        read -r seconds kib <"$work/time"
        best=$(python3 -c "b='$best'; t=$seconds; print(t if not b or t < float(b) else b)")
        [ "$kib" -gt "$peak" ] && peak=$kib
    done
    echo "$best $peak"
}
r() { python3 -c "print(f'{$1 / $2:.2f}')"; }
"$packager" pack "$docs" --base-url https://docs.python.org/3.11/ -o "$work/py.zip" >/dev/null
read -r tar_s tar_k < <(measure tar.zst)
read -r warc_s warc_k < <(measure warc)
read -r wacz_s wacz_k < <(measure wacz)
entries=$("$packager" inspect "$work/py.zip" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["entries"]))' 2>/dev/null || echo "?")
{
    echo "## Web archives: export to WARC and WACZ"
    echo
    echo "Run by \`make bench\` (scripts/bench-export.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine). Times are the best of $runs runs; memory is the peak resident size (\`/usr/bin/time -f %M\`), the most of the runs."
    echo "The bundle: python3.11-doc packed by \`packager pack\` ($entries entries, $(numfmt --to=iec "$(stat -c %s "$work/py.zip")")). The peer is \`packager export --format tar.zst\` of the same bundle (every body inflated, checked and written once, zstd)."
    echo
    echo "| export | time | peak memory | time / tar.zst | target |"
    echo "|---|---|---|---|---|"
    echo "| tar.zst (peer) | ${tar_s} s | $((tar_k / 1024)) MiB | 1.00x | - |"
    echo "| WARC (.warc.gz, a gzip member per record) | ${warc_s} s | $((warc_k / 1024)) MiB | $(r "$warc_s" "$tar_s")x | - |"
    echo "| WACZ (that WARC, its CDXJ index, pages, digests) | ${wacz_s} s | $((wacz_k / 1024)) MiB | $(r "$wacz_s" "$tar_s")x | <= 1.5x, <= 64 MiB |"
} >"$out"
cat "$out"
