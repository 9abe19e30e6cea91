#!/usr/bin/env bash
# Benchmark of exports of python3.11-doc's bundle: WARC and WACZ (web archives) beside tar.zst (the plain archive), and of
# the import of a 10,000-record WARC beside pack --from-har of the same exchanges, in one run; time (best of 3) and peak
# memory (the most of the runs).
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

# Import: 10,000 exchanges (pages of about 2 KB, a tenth of them 20 KB of noise), as a HAR and as a WARC exported from
# one bundle; `pack --from-warc` of the WARC beside `pack --from-har` of the HAR.
python3 - "$work/site" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(3)
words = "offline bundle archive record response request header payload digest revisit".split()
for i in range(10000):
    os.makedirs(f"{root}/{i % 100}", exist_ok=True)
    if i % 10 == 0:
        open(f"{root}/{i % 100}/{i}.bin", "wb").write(os.urandom(20000))
    else:
        open(f"{root}/{i % 100}/{i}.html", "w").write("<p>" + " ".join(rng.choice(words) for _ in range(300)) + "</p>")
PY
"$packager" pack "$work/site" --base-url https://archive.example/ -o "$work/site.zip" >/dev/null
"$packager" export "$work/site.zip" --format har -o "$work/site.har" >/dev/null
"$packager" export "$work/site.zip" --format warc -o "$work/site.warc.gz" >/dev/null
import_measure() { # FLAG FILE: "best-seconds peak-KiB" of $runs packs
    local best="" peak=0
    for _ in $(seq "$runs"); do
        rm -f "$work/imported.zip"
        /usr/bin/time -f "%e %M" -o "$work/time" "$packager" pack "$1" "$2" -o "$work/imported.zip" >/dev/null
        read -r seconds kib <"$work/time"
        best=$(python3 -c "b='$best'; t=$seconds; print(t if not b or t < float(b) else b)")
        [ "$kib" -gt "$peak" ] && peak=$kib
    done
    echo "$best $peak"
}
read -r har_s har_k < <(import_measure --from-har "$work/site.har")
read -r warci_s warci_k < <(import_measure --from-warc "$work/site.warc.gz")
{
    echo
    echo "## Web archives: import from WARC"
    echo
    echo "10,000 exchanges (9,000 pages of about 2 KB, 1,000 bodies of 20 KB of noise), exported from one bundle as HAR ($(numfmt --to=iec "$(stat -c %s "$work/site.har")")) and as WARC ($(numfmt --to=iec "$(stat -c %s "$work/site.warc.gz")"), gzipped); best of $runs runs, peak resident memory the most of the runs. The peer is \`pack --from-har\` of the same exchanges."
    echo
    echo "| import | time | peak memory | time / --from-har | target |"
    echo "|---|---|---|---|---|"
    echo "| pack --from-har (peer) | ${har_s} s | $((har_k / 1024)) MiB | 1.00x | - |"
    echo "| pack --from-warc | ${warci_s} s | $((warci_k / 1024)) MiB | $(r "$warci_s" "$har_s")x | <= 1.0x, <= 64 MiB |"
} >>"$out"

# Scale: memory against the number of records. WARCs of 100,000 and 1,000,000 exchanges (scripts/make-warc.py: a page
# of about 500 bytes each, a gzip member per record), each imported once, its bundle exported to WACZ, WARC and HAR,
# checked, listed and verified.
scale="100000 1000000"
[ "$quick" = "--quick" ] && scale="20000"
rows=""
for n in $scale; do
    python3 "$(dirname "$0")/make-warc.py" "$n" "$work/scale.warc.gz"
    rm -f "$work/scale.zip"
    /usr/bin/time -f "%e %M" -o "$work/time" "$packager" pack --from-warc "$work/scale.warc.gz" -o "$work/scale.zip" >/dev/null
    read -r seconds kib <"$work/time"
    rows+="| $n | $(numfmt --to=iec "$(stat -c %s "$work/scale.warc.gz")") | pack --from-warc | ${seconds} s | $((kib / 1024)) MiB |"$'\n'
    rm -f "$work/scale.warc.gz"
    for format in wacz warc har; do
        /usr/bin/time -f "%e %M" -o "$work/time" "$packager" export "$work/scale.zip" --format $format -o "$work/scale.$format" >/dev/null
        read -r seconds kib <"$work/time"
        rows+="| $n | $(numfmt --to=iec "$(stat -c %s "$work/scale.zip")") (bundle) | export --format $format | ${seconds} s | $((kib / 1024)) MiB |"$'\n'
        rm -f "$work/scale.$format"
    done
    /usr/bin/time -f "%e %M" -o "$work/time" "$packager" check "$work/scale.zip" >/dev/null
    read -r seconds kib <"$work/time"
    rows+="| $n | (bundle) | check | ${seconds} s | $((kib / 1024)) MiB |"$'\n'
    # The listing, as a table and as JSON, written to nowhere: its memory, not the terminal's.
    for listing in "inspect" "inspect --json"; do
        # shellcheck disable=SC2086 # the listing's words are its command and flag
        /usr/bin/time -f "%e %M" -o "$work/time" "$packager" $listing "$work/scale.zip" >/dev/null
        read -r seconds kib <"$work/time"
        rows+="| $n | (bundle) | $listing | ${seconds} s | $((kib / 1024)) MiB |"$'\n'
    done
    # verify of every entry, its origin (archive.example) unreachable: what a run holds and writes for each entry (its
    # verdict, the JSON report), not the network. It exits 2 (unreachable entries fail the check).
    /usr/bin/time -f "%e %M" -o "$work/time" "$packager" verify "$work/scale.zip" --retries 0 --format json -o "$work/scale.verify.json" >/dev/null || true
    # time's last line (before it, "Command exited with non-zero status 2").
    read -r seconds kib < <(tail -1 "$work/time")
    rows+="| $n | (bundle) | verify --format json, origin unreachable | ${seconds} s | $((kib / 1024)) MiB |"$'\n'
    rm -f "$work/scale.verify.json"

done
{
    echo
    echo "Scale, one run each: WARCs written by scripts/make-warc.py (a page of about 500 bytes an exchange, a request and a response record each, a gzip member per record), imported; each bundle exported to WACZ, WARC and HAR, checked, listed by inspect (as a table and as JSON, to /dev/null), and verified with its origin unreachable (every entry reported, as JSON). Peak resident memory."
    echo
    echo "| exchanges | input | step | time | peak memory |"
    echo "|---|---|---|---|---|"
    printf '%s' "$rows"
} >>"$out"
cat "$out"
