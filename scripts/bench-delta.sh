#!/usr/bin/env bash
# Benchmark of delta bundles (packager delta, apply, and lookups through a delta over its base), beside
# `zstd --patch-from` (a byte delta that knows nothing of entries) and packing the new release whole, in one run.
# Usage: scripts/bench-delta.sh BIN_FOLDER WORK OUTPUT.md [--quick]
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
best() { # COMMAND...: the best wall time of $runs runs, in seconds
    local best=""
    for _ in $(seq "$runs"); do
        local start end
        start=$(date +%s.%N); "$@" >/dev/null; end=$(date +%s.%N)
        best=$(python3 -c "b='$best'; t=$end-$start; print(t if not b or t < float(b) else b)")
    done
    echo "$best"
}
size() { stat -c %s "$1"; }
r() { python3 -c "print(f'{$1 / $2:.4f}')"; }
pct() { python3 -c "print(f'{100 * $1 / $2:.2f} %')"; }

# Real content: python3.11-doc, then 3 pages edited and 1 removed.
cp -rL "$docs" "$work/py-old"
cp -r "$work/py-old" "$work/py-new"
sed -i 's/Built-in Functions/Built-in Functions (revised)/' "$work/py-new/library/functions.html"
echo "<p>A note added in this release.</p>" >>"$work/py-new/library/os.html"
sed -i 's/<h1>/<h1>New: /' "$work/py-new/tutorial/index.html"
rm "$work/py-new/library/turtle.html"
"$packager" pack "$work/py-old" --base-url https://docs.python.org/3.11/ -o "$work/py-old.zip" >/dev/null
pack_time=$(best "$packager" pack "$work/py-new" --base-url https://docs.python.org/3.11/ -o "$work/py-new.zip")
"$packager" delta "$work/py-old.zip" "$work/py-new.zip" -o "$work/py.delta" >/dev/null
"$packager" delta "$work/py-old.zip" "$work/py-new.zip" -o "$work/py-whole.delta" --whole-bodies >/dev/null
zstd -q -19 --patch-from="$work/py-old.zip" "$work/py-new.zip" -o "$work/py.zst" -f
apply_time=$(best "$packager" apply "$work/py-old.zip" "$work/py.delta" -o "$work/py-rebuilt.zip")
cmp "$work/py-new.zip" "$work/py-rebuilt.zip"
new_size=$(size "$work/py-new.zip")

# Synthetic: many small files, 1 % of them changed (a line added), one in a thousand removed.
count=100000
[ "$quick" = "--quick" ] && count=10000
make_tiny_site "$work/syn-old" "$count"
cp -r "$work/syn-old" "$work/syn-new"
python3 - "$work/syn-new" "$count" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for i in range(0, count, 100):
    path = f"{root}/s{i // 1000}/p{i}.html"
    if os.path.exists(path): open(path, "a").write(f"<p>changed in this release: {i}</p>\n")
for i in range(50, count, 1000):
    path = f"{root}/s{i // 1000}/p{i}.html"
    if os.path.exists(path): os.remove(path)
PY
"$packager" pack "$work/syn-old" --base-url https://bench.example/ -o "$work/syn-old.zip" >/dev/null
syn_pack=$(best "$packager" pack "$work/syn-new" --base-url https://bench.example/ -o "$work/syn-new.zip")
"$packager" delta "$work/syn-old.zip" "$work/syn-new.zip" -o "$work/syn.delta" >/dev/null
zstd -q -19 --long=27 --patch-from="$work/syn-old.zip" "$work/syn-new.zip" -o "$work/syn.zst" -f
syn_apply=$(best "$packager" apply "$work/syn-old.zip" "$work/syn.delta" -o "$work/syn-rebuilt.zip")
cmp "$work/syn-new.zip" "$work/syn-rebuilt.zip"
read -r l_new l_delta b_new b_delta < <("$bin/packager-bench" --delta-lookups "$work/syn-new.zip" "$work/syn.delta" "$work/syn-old.zip")
syn_size=$(size "$work/syn-new.zip")

{
    echo "## Deltas: the next release as what changed"
    echo
    echo "Run by \`make bench\` (scripts/bench-delta.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine). Times are the best of $runs runs."
    echo "python3.11-doc: the next release has 3 pages edited (a heading, a paragraph added, a title) and 1 removed. Synthetic: $count small files (HTML and PNG-like noise), 1 % of them with a line added and 0.1 % removed."
    echo "zstd: \`zstd -19 --patch-from=OLD NEW\` (with \`--long=27\` for the synthetic bundle), a byte delta of the two files."
    echo
    echo "| measure | packager | peer | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "| python3.11-doc: delta size, of NEW's $(formatsize() { numfmt --to=iec "$1"; }; formatsize "$new_size") | $(size "$work/py.delta") B ($(pct "$(size "$work/py.delta")" "$new_size")) | zstd --patch-from: $(size "$work/py.zst") B ($(pct "$(size "$work/py.zst")" "$new_size")) | $(r "$(size "$work/py.delta")" "$(size "$work/py.zst")")x | <= 1 % of NEW |"
    echo "| python3.11-doc: delta with --whole-bodies (gzip answers NEW's bytes too) | $(size "$work/py-whole.delta") B ($(pct "$(size "$work/py-whole.delta")" "$new_size")) | - | - | - |"
    echo "| python3.11-doc: packager apply, against packing NEW | $(printf %.3f "$apply_time") s | pack: $(printf %.3f "$pack_time") s | $(r "$apply_time" "$pack_time")x | <= 0.5x |"
    echo "| synthetic: delta size, of NEW's $(numfmt --to=iec "$syn_size") | $(size "$work/syn.delta") B ($(pct "$(size "$work/syn.delta")" "$syn_size")) | zstd --patch-from: $(size "$work/syn.zst") B ($(pct "$(size "$work/syn.zst")" "$syn_size")) | $(r "$(size "$work/syn.delta")" "$(size "$work/syn.zst")")x | <= 2 % of NEW |"
    echo "| synthetic: packager apply, against packing NEW | $(printf %.3f "$syn_apply") s | pack: $(printf %.3f "$syn_pack") s | $(r "$syn_apply" "$syn_pack")x | - |"
    echo "| synthetic: lookups/s through DELTA over OLD, against NEW alone | $l_delta | $l_new | $(r "$l_delta" "$l_new")x | >= 0.8x |"
    echo "| synthetic: lookups + whole-body reads/s through DELTA over OLD, against NEW alone | $b_delta | $b_new | $(r "$b_delta" "$b_new")x | >= 0.8x |"
    echo
    echo "Both rebuilt files are NEW byte for byte (\`cmp\`)."
    echo
} >"$out"
cat "$out"
