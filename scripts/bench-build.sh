#!/usr/bin/env bash
# Benchmark of `packager build` against `wget2 -r -p` followed by `bsdtar -a -cf`, both crawling
# the same generated site served by nginx on loopback, at the same concurrency, in the same run.
# Usage: scripts/bench-build.sh PACKAGER WORK_FOLDER OUTPUT_MARKDOWN [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"

packager=$1
work=$2
out=$3
quick=${4:-}
pages=4000
assets=1500
runs=3
if [ "$quick" = "--quick" ]; then pages=400; assets=150; runs=1; fi
concurrency=8
port=18080

rm -rf "$work" && mkdir -p "$work/site" "$work/nginx"
work=$(cd "$work" && pwd)

# The site: pages that link to each other (every page reachable from /), each with a style sheet,
# a script and three images from a shared pool; style sheets import a base sheet and use url().
python3 - "$work/site" "$pages" "$assets" <<'PY'
import os, random, sys
root, pages, assets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
os.makedirs(f"{root}/p", exist_ok=True); os.makedirs(f"{root}/img", exist_ok=True)
os.makedirs(f"{root}/css", exist_ok=True); os.makedirs(f"{root}/js", exist_ok=True)
words = "offline bundle crawl verify service release page style image script network cache".split()
def text(n): return " ".join(rng.choice(words) for _ in range(n))
for a in range(assets):
    with open(f"{root}/img/i{a}.png", "wb") as f: f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(rng.randint(2000, 30000)))
for c in range(20):
    with open(f"{root}/css/s{c}.css", "w") as f:
        f.write(f'@import url("base.css");\n.c{c} {{ background: url(../img/i{c}.png) }}\n' + ".x { color: red }\n" * 50)
with open(f"{root}/css/base.css", "w") as f: f.write("body { font: 16px sans-serif }\n" * 40)
for j in range(20):
    with open(f"{root}/js/a{j}.js", "w") as f: f.write(f"console.log({j});\n" * 200)
def page(i):
    links = {i + 1, 2 * i + 1, 2 * i + 2, rng.randrange(pages), rng.randrange(pages)}
    links = [l for l in links if l < pages]
    imgs = [rng.randrange(assets) for _ in range(3)]
    body = "".join(f'<p>{text(80)}</p><a href="/p/{l}.html">page {l}</a>\n' for l in links)
    body += "".join(f'<img src="/img/i{m}.png" alt="">' for m in imgs)
    return (f'<!doctype html><html><head><title>Page {i}</title><link rel="stylesheet" href="/css/s{i % 20}.css">'
            f'<script src="/js/a{i % 20}.js"></script></head><body>{body}</body></html>')
for i in range(pages):
    with open(f"{root}/p/{i}.html", "w") as f: f.write(page(i))
with open(f"{root}/index.html", "w") as f: f.write('<html><body><a href="/p/0.html">start</a></body></html>')
PY

trap 'stop_nginx "$work"' EXIT
start_nginx "$work" "$work/site" "127.0.0.1:$port" 2

url="http://127.0.0.1:$port/"
files=$(find "$work/site" -type f | wc -l)
best_p=999999; best_w=999999; rss_p=0; rss_w=0
for run in $(seq "$runs"); do
    rm -rf "$work/p.zip" "$work/wget" "$work/w.zip"
    /usr/bin/time -f "%e %M" -o "$work/time-p" "$packager" build --seed "$url" --concurrency $concurrency -o "$work/p.zip" --no-robots >"$work/packager.log" 2>&1
    read -r secs kib <"$work/time-p"
    best_p=$(python3 -c "print(min($best_p, $secs))"); rss_p=$(( kib > rss_p ? kib : rss_p ))
    /usr/bin/time -f "%e %M" -o "$work/time-w" sh -c \
        "wget2 -r -p -l inf --max-threads=$concurrency -q --no-robots -nH -P '$work/wget' '$url' && bsdtar -a -cf '$work/w.zip' -C '$work/wget' ." \
        >"$work/wget.log" 2>&1 || true
    read -r secs kib <"$work/time-w"
    best_w=$(python3 -c "print(min($best_w, $secs))"); rss_w=$(( kib > rss_w ? kib : rss_w ))
done

# The same set of URLs: packager's request keys against the files wget2 saved (a folder URL is its index.html).
"$packager" inspect "$work/p.zip" --json >"$work/inspect.json"
python3 - "$work" "$url" <<'PY' >"$work/compare.txt"
import json, os, sys
work, base = sys.argv[1], sys.argv[2]
keys = {e["key"][len(base):] for e in json.load(open(f"{work}/inspect.json"))["entries"]}
keys = {k + "index.html" if k == "" or k.endswith("/") else k for k in keys}
saved = set()
for folder, _, names in os.walk(f"{work}/wget"):
    for n in names: saved.add(os.path.relpath(os.path.join(folder, n), f"{work}/wget"))
print(len(keys), len(saved), len(keys - saved), len(saved - keys))
PY
read -r n_p n_w only_p only_w <"$work/compare.txt"
size_p=$(stat -c %s "$work/p.zip"); size_w=$(stat -c %s "$work/w.zip")
ratio=$(python3 -c "print(f'{$best_p / $best_w:.2f}')")
{
    echo "## packager build: crawl a site into a bundle"
    echo
    echo "Run by \`make bench\` (scripts/bench-build.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "Site: $files files ($pages HTML pages, $assets PNG-like images, style sheets with @import and url(), scripts), served by nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') on loopback."
    echo "Both crawl from / at concurrency $concurrency (wget2 --max-threads=$concurrency), robots.txt off. Times are the best of $runs runs; memory is the peak resident size of the crawling process (GNU time)."
    echo
    echo "| measure | packager build | wget2 -r -p + bsdtar -a -cf | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "| wall time | ${best_p} s | ${best_w} s | ${ratio}x | <= 0.7x |"
    echo "| URLs found | $n_p | $n_w files | only packager: $only_p, only wget2: $only_w | same set |"
    echo "| peak memory | $((rss_p / 1024)) MiB | $((rss_w / 1024)) MiB | - | < 200 MB |"
    echo "| output size | $((size_p / 1024)) KiB | $((size_w / 1024)) KiB | $(python3 -c "print(f'{$size_p / $size_w:.3f}')")x | - |"
    echo
} >"$out"
cat "$out"
