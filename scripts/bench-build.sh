#!/usr/bin/env bash
# Benchmark of `packager build` against `wget2 -r -p` followed by `bsdtar -a -cf`, in the same run, at the same
# concurrency, both crawling sites served by nginx on loopback:
#   1. a generated site (scripts/make-site.py: 4,000 pages, 1,500 images, style sheets, scripts);
#   2. Debian's python3.11-doc HTML (real pages: large, dense with links), with the scope of `wget2 -r -np -p`;
#   3. memory against site size: generated sites of 5,000 and 50,000 pages, crawled by packager alone.
# Usage: scripts/bench-build.sh PACKAGER WORK_FOLDER OUTPUT_MARKDOWN [--quick]
set -euo pipefail
scripts=$(cd "$(dirname "$0")" && pwd)
source "$scripts/bench-lib.sh"

packager=$1
work=$2
out=$3
quick=${4:-}
pages=4000
assets=1500
small=5000
large=50000
# Five: wget2 sometimes takes two to four times its usual time on the generated site (a run in three, on this
# machine), which best of three did not always hide.
runs=5
if [ "$quick" = "--quick" ]; then pages=400; assets=150; small=500; large=5000; runs=1; fi
concurrency=8
docs=/usr/share/doc/python3.11/html

rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
trap 'for d in syn py mem-small mem-large; do stop_nginx "$work/$d"; done' EXIT

# crawl_both DIR URL "PACKAGER FLAGS" "WGET2 FLAGS": best of $runs runs of each, one after the other, in DIR; sets
# best_p best_w (seconds) and rss_p rss_w (KiB). wget2 exits non-zero when a link is broken: bsdtar runs anyway.
crawl_both() {
    local dir=$1 url=$2 pflags=$3 wflags=$4 secs kib
    best_p=999999; best_w=999999; rss_p=0; rss_w=0
    for _ in $(seq "$runs"); do
        rm -rf "$dir/p.zip" "$dir/wget" "$dir/w.zip"
        # shellcheck disable=SC2086
        /usr/bin/time -f "%e %M" -o "$dir/time-p" "$packager" build --seed "$url" $pflags --concurrency $concurrency -o "$dir/p.zip" --no-robots \
            >"$dir/packager.log" 2>&1 || true
        read -r secs kib <"$dir/time-p"
        best_p=$(python3 -c "print(min($best_p, $secs))"); rss_p=$(( kib > rss_p ? kib : rss_p ))
        /usr/bin/time -f "%e %M" -o "$dir/time-w" sh -c \
            "wget2 -r $wflags -l inf --max-threads=$concurrency -q --no-robots -nH -P '$dir/wget' '$url'; bsdtar -a -cf '$dir/w.zip' -C '$dir/wget' ." \
            >"$dir/wget.log" 2>&1 || true
        read -r secs kib <"$dir/time-w"
        best_w=$(python3 -c "print(min($best_w, $secs))"); rss_w=$(( kib > rss_w ? kib : rss_w ))
    done
    test -s "$dir/p.zip" || { echo "bench: packager build wrote no bundle (see $dir/packager.log)" >&2; exit 1; }
}

# compare DIR BASE_URL: packager's 2xx request keys against the files wget2 saved (a folder URL is its index.html);
# prints "keys files only_packager only_wget2", and lists the differences in DIR/only.txt.
compare() {
    "$packager" inspect "$1/p.zip" --json >"$1/inspect.json"
    python3 - "$1" "$2" <<'PY'
import json, os, sys
work, base = sys.argv[1], sys.argv[2]
keys = {e["key"][len(base):] for e in json.load(open(f"{work}/inspect.json"))["entries"] if 200 <= e["status"] < 300}
keys = {k + "index.html" if k == "" or k.endswith("/") else k for k in keys}
saved = set()
for folder, _, names in os.walk(f"{work}/wget"):
    for n in names: saved.add(os.path.relpath(os.path.join(folder, n), f"{work}/wget"))
print(len(keys), len(saved), len(keys - saved), len(saved - keys))
with open(f"{work}/only.txt", "w") as f:
    f.write("only packager:\n" + "\n".join(sorted(keys - saved)) + "\nonly wget2:\n" + "\n".join(sorted(saved - keys)) + "\n")
PY
}

ratio() { python3 -c "print(f'{$1 / $2:.2f}')"; }
kib() { echo $(( $(stat -c %s "$1") / 1024 )); }
size_ratio() { python3 -c "print(f'{$(stat -c %s "$1") / $(stat -c %s "$2"):.3f}')"; }

# 1. The generated site.
mkdir -p "$work/syn/site"
python3 "$scripts/make-site.py" "$work/syn/site" "$pages" "$assets"
start_nginx "$work/syn" "$work/syn/site" "127.0.0.1:18080" 2
files=$(find "$work/syn/site" -type f | wc -l)
crawl_both "$work/syn" "http://127.0.0.1:18080/" "" "-p"
read -r n_p n_w only_p only_w < <(compare "$work/syn" "http://127.0.0.1:18080/")
stop_nginx "$work/syn"
syn_rows="| wall time | ${best_p} s | ${best_w} s | $(ratio "$best_p" "$best_w")x | <= 0.5x |
| URLs found | $n_p | $n_w files | only packager: $only_p, only wget2: $only_w | same set |
| peak memory | $((rss_p / 1024)) MiB | $((rss_w / 1024)) MiB | - | < 200 MB |
| output size | $(kib "$work/syn/p.zip") KiB | $(kib "$work/syn/w.zip") KiB | $(size_ratio "$work/syn/p.zip" "$work/syn/w.zip")x | - |"

# 2. Debian's python3.11-doc, as a wget user crawls it: from index.html, not above its folder, with page requisites.
mkdir -p "$work/py"
start_nginx "$work/py" "$docs" "127.0.0.1:18081" 2
crawl_both "$work/py" "http://127.0.0.1:18081/index.html" "--no-parent" "-np -p"
read -r py_n_p py_n_w py_only_p py_only_w < <(compare "$work/py" "http://127.0.0.1:18081/")
stop_nginx "$work/py"
py_rows="| wall time | ${best_p} s | ${best_w} s | $(ratio "$best_p" "$best_w")x | <= 0.5x |
| URLs (2xx) | $py_n_p | $py_n_w files | only packager: $py_only_p, only wget2: $py_only_w | a superset of wget2's |
| peak memory | $((rss_p / 1024)) MiB | $((rss_w / 1024)) MiB | - | <= 100 MB |
| output size | $(kib "$work/py/p.zip") KiB | $(kib "$work/py/w.zip") KiB | $(size_ratio "$work/py/p.zip" "$work/py/w.zip")x | - |"

# 3. Memory against site size: the same generator at two sizes, packager alone.
mem_rows=""
for which in small large; do
    n=${!which}
    dir="$work/mem-$which"
    mkdir -p "$dir/site"
    python3 "$scripts/make-site.py" "$dir/site" "$n" "$assets"
    port=$([ "$which" = small ] && echo 18082 || echo 18083)
    start_nginx "$dir" "$dir/site" "127.0.0.1:$port" 2
    /usr/bin/time -f "%e %M" -o "$dir/time" "$packager" build --seed "http://127.0.0.1:$port/" --concurrency $concurrency \
        -o "$dir/p.zip" --no-robots >"$dir/packager.log" 2>&1
    # wget2 crawling the same site, for its peak memory (issue 34's target: packager's at most wget2's).
    /usr/bin/time -f "%e %M" -o "$dir/time-w" wget2 -r -p -l inf --max-threads=$concurrency -q --no-robots -nH -P "$dir/wget" \
        "http://127.0.0.1:$port/" >"$dir/wget.log" 2>&1 || true
    stop_nginx "$dir"
    read -r secs kib <"$dir/time"
    read -r wsecs wkib <"$dir/time-w"
    entries=$("$packager" inspect "$dir/p.zip" --json | python3 -c "import json,sys; print(len(json.load(sys.stdin)['entries']))")
    declare "rss_$which=$kib"
    declare "wrss_$which=$wkib"
    mem_rows="$mem_rows| $n pages ($entries entries, $(( $(du -sk "$dir/site" | cut -f1) / 1024 )) MiB on disk) | ${secs} s | $((kib / 1024)) MiB | $(kib "$dir/p.zip") KiB | ${wsecs} s, $((wkib / 1024)) MiB |
"
    rm -rf "$dir/site" "$dir/p.zip" "$dir/wget"
done
mem_ratio=$(python3 -c "print(f'{$rss_large / $rss_small:.2f}')")
mem_vs_wget=$(python3 -c "print(f'{$rss_large / $wrss_large:.2f}')")

{
    echo "## packager build: crawl a site into a bundle"
    echo
    echo "Run by \`make bench\` (scripts/bench-build.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine), nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') on loopback."
    echo "Both crawl at concurrency $concurrency (wget2 --max-threads=$concurrency), robots.txt off; wget2's files are then zipped by bsdtar -a -cf (zlib level 6)."
    echo "Times are the best of $runs runs; memory is the peak resident size of the crawling process (GNU time)."
    echo
    echo "Generated site (scripts/make-site.py): $files files ($pages HTML pages, $assets PNG-like images, style sheets with @import and url(), scripts), crawled from /."
    echo
    echo "| measure | packager build | wget2 -r -p + bsdtar | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "$syn_rows"
    echo
    echo "Debian's python3.11-doc HTML (real pages up to 290 KB, dense with links), crawled from /index.html without going above it (\`--no-parent\`, \`wget2 -np\`)."
    echo
    echo "| measure | packager build | wget2 -r -np -p + bsdtar | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "$py_rows"
    echo
    echo "Memory against site size: the generated site at $small and $large pages (the same $assets images), crawled by packager build, then by wget2 (without bsdtar)."
    echo
    echo "| site | wall time | peak memory | bundle | wget2 -r -p alone: time, peak memory |"
    echo "|---|---|---|---|---|"
    printf "%s" "$mem_rows"
    echo
    echo "Peak memory, $large pages against $small: ${mem_ratio}x (target <= 1.3). Against wget2 on the $large-page site: ${mem_vs_wget}x (target <= 1.0x)."
    echo
    echo "Where the python3.11-doc crawl's time goes (perf record -g of packager build, 2026-11-26): the crawl is CPU-bound on both cores from its first page to its last (0.68 s of CPU in 0.39 s; it was 0.79 s before link extraction made tokens and strings only of the tags it reads, resolved each link target once without its fragment, and cut fragments on the UTF-8 view rather than by Characters). Two fifths of the samples are libdeflate compressing the pages (level 6, which bsdtar's zlib 6 matches in size in twice the time), a sixth the HTML tokenizer and link extraction, a seventh the kernel (sockets), and the rest reference counting, SHA-256 and the writer. wget2 stores the pages as they come and bsdtar compresses them after. The generated site's crawl (images and pages of tens to hundreds of kilobytes) spent a seventh of its time, and the 50000-page one a quarter, in glibc mapping large bodies anew and giving freed memory back at once (madvise and TLB flushes on every core); packager build now sets glibc's mmap threshold to 1 MiB and its trim threshold to 4 MiB (50000 pages: 7.7 s to about 5.8 s at the same peak; 32 MiB for both was a little faster but grew a decompression bomb's build by 12 MiB)."
    echo
    echo "The noise in these rows (2026-11-26): wget2 on the generated site is bimodal on this machine, about 0.5 s or 2 to 4 s a crawl (wget2 alone, the same site, one run after the other), so its best of five ranged from 1.15 s to 4.5 s with bsdtar in one afternoon and the ratio from 0.50x to 0.12x; on python3.11-doc the ratio ranged from 0.47x to 0.51x over five full runs (packager 0.35 to 0.39 s, wget2 + bsdtar 0.75 to 0.80 s). The end of a crawl, writing the bundle, is a serial tail of about a sixth of the generated site's crawl: copying the bodies, the manifest, and index.bin deflated (libdeflate's level 6 since this run, a third of zlib's time for 1.5 % less)."
    echo
    echo "Where the memory goes (/proc/PID/status and heaptrack, 50000 pages, 2026-11-26): at the peak about 34 MiB are mapped code (RssFile: 14 MiB of the packager binary's text, the Swift runtime, Foundation, ICU), which \`packager --version\` alone maps too (25 MiB resident), and about 41 MiB the heap (heaptrack's peak 41.6 MB: 15.5 MB of prepared bodies held within the build's memory budget, the entry store, the index). wget2 is a C program whose whole peak is 35 MiB; packager's memory grows by about 0.3 KiB per page against wget2's 0.6 KiB (67 to 82 MiB from 5000 to 50000 pages; wget2 10 to 35 MiB), but its fixed part alone is wget2's whole peak, so ≤ 1.0x wget2 is out of reach for a Swift process that links NIO, AsyncHTTPClient, BoringSSL and Foundation."
    echo
} >"$out"
cat "$out"
