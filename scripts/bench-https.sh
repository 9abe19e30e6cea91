#!/usr/bin/env bash
# Benchmark of `packager build` over HTTPS with HTTP/2 against `wget2 --ca-certificate -r -np -p` followed by
# `bsdtar -a -cf`, both crawling Debian's python3.11-doc HTML served by nginx with TLS and HTTP/2 on loopback, with a
# certificate signed by a CA the script makes (as a company's internal server is), in the same run.
# Usage: scripts/bench-https.sh PACKAGER WORK_FOLDER OUTPUT_MARKDOWN [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"

packager=$1
work=$2
out=$3
quick=${4:-}
runs=3
if [ "$quick" = "--quick" ]; then runs=1; fi
concurrency=8
port=18443
docs=/usr/share/doc/python3.11/html
if [ ! -f "$docs/index.html" ]; then
    echo "## packager build over HTTPS and HTTP/2" >"$out"
    echo >>"$out"
    echo "Not measured: $docs is not installed (apt-get install python3.11-doc)." >>"$out"
    exit 0
fi

rm -rf "$work" && mkdir -p "$work/tls"
work=$(cd "$work" && pwd)
tls=$work/tls
make_test_ca "$tls"

trap 'stop_nginx "$work"' EXIT
start_nginx "$work" "$docs" "127.0.0.1:$port ssl http2" 2 "ssl_certificate $tls/server.pem; ssl_certificate_key $tls/server.key;"
url="https://127.0.0.1:$port/index.html"

best_p=999999; best_w=999999; rss_p=0; rss_w=0
for run in $(seq "$runs"); do
    rm -rf "$work/p.zip" "$work/wget" "$work/w.zip"
    /usr/bin/time -f "%e %M" -o "$work/time-p" "$packager" build --seed "$url" --ca-file "$tls/ca.pem" --no-parent --no-robots \
        --concurrency $concurrency -o "$work/p.zip" --json >"$work/packager.json" 2>"$work/packager.log"
    read -r secs kib < <(tail -1 "$work/time-p")
    best_p=$(python3 -c "print(min($best_p, $secs))"); rss_p=$(( kib > rss_p ? kib : rss_p ))
    /usr/bin/time -f "%e %M" -o "$work/time-w" sh -c \
        "wget2 -r -np -p -l inf --max-threads=$concurrency -q --no-robots --ca-certificate='$tls/ca.pem' -nH -P '$work/wget' '$url'; bsdtar -a -cf '$work/w.zip' -C '$work/wget' ." \
        >"$work/wget.log" 2>&1 || true
    read -r secs kib < <(tail -1 "$work/time-w")
    best_w=$(python3 -c "print(min($best_w, $secs))"); rss_w=$(( kib > rss_w ? kib : rss_w ))
done

# The same set of URLs (a folder URL is its index.html), and what each spoke.
python3 - "$work" "https://127.0.0.1:$port/" <<'PY' >"$work/compare.txt"
import json, os, sys
work, base = sys.argv[1], sys.argv[2]
report = json.load(open(f"{work}/packager.json"))
keys = set()
import zipfile
for line in zipfile.ZipFile(f"{work}/p.zip").read("manifest.json").decode().splitlines():
    line = line.strip().rstrip(",")
    if line.startswith('{"'):
        e = json.loads(line)
        if e.get("status") == 200: keys.add(e["key"][len(base):])
keys = {k + "index.html" if k == "" or k.endswith("/") else k for k in keys}
saved = set()
for folder, _, names in os.walk(f"{work}/wget"):
    for n in names: saved.add(os.path.relpath(os.path.join(folder, n), f"{work}/wget"))
protocols = ", ".join(f"{k} {v}" for k, v in sorted(report.get("protocols", {}).items())) or "-"
print(len(keys), len(saved), len(keys - saved), len(saved - keys), protocols.replace(" ", "_"))
PY
read -r n_p n_w only_p only_w protocols <"$work/compare.txt"
protocols=${protocols//_/ }
size_p=$(stat -c %s "$work/p.zip"); size_w=$(stat -c %s "$work/w.zip" 2>/dev/null || echo 1)
ratio=$(python3 -c "print(f'{$best_p / $best_w:.2f}')")
{
    echo "## packager build over HTTPS and HTTP/2"
    echo
    echo "Run by \`make bench\` (scripts/bench-https.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "Site: Debian's python3.11-doc HTML, served by nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') over TLS with HTTP/2 on loopback, its certificate signed by a CA the script makes."
    echo "Both crawl from /index.html without going above it, at concurrency $concurrency, robots.txt off, trusting the CA (packager --ca-file, wget2 --ca-certificate). Best of $runs runs; memory is the peak resident size (GNU time)."
    echo
    echo "| measure | packager build | wget2 -r -np -p + bsdtar -a -cf | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "| wall time | ${best_p} s | ${best_w} s | ${ratio}x | reported |"
    echo "| pages and files (200) | $n_p | $n_w files | only packager: $only_p, only wget2: $only_w | same set |"
    echo "| responses by protocol | $protocols | - | - | HTTP/2 |"
    echo "| peak memory | $((rss_p / 1024)) MiB | $((rss_w / 1024)) MiB | - | < 200 MB |"
    echo "| output size | $((size_p / 1024)) KiB | $((size_w / 1024)) KiB | $(python3 -c "print(f'{$size_p / $size_w:.3f}')")x | - |"
    echo
} >"$out"
cat "$out"
