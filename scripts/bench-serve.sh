#!/usr/bin/env bash
# Benchmark of `packager serve` (a bundle) against h2o, nginx and Hummingbird's FileMiddleware (the same files
# on disk), with wrk on loopback, in the same run. Usage: scripts/bench-serve.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
duration=10
[ "$quick" = "--quick" ] && duration=3
rm -rf "$work" && mkdir -p "$work/site/p" "$work/site/img" "$work/nginx"
work=$(cd "$work" && pwd)

# 1000 HTML pages of about 6 KiB and 200 images of 20 KiB; wrk asks for them in turn.
python3 - "$work/site" <<'PY'
import os, random, sys
root = sys.argv[1]
rng = random.Random(5)
words = "offline bundle serve request response header cache etag range gzip".split()
for i in range(1000):
    body = "".join(f"<p>{' '.join(rng.choice(words) for _ in range(60))}</p>\n" for _ in range(15))
    open(f"{root}/p/{i}.html", "w").write(f"<!doctype html><html><head><title>{i}</title></head><body>{body}</body></html>")
for i in range(200):
    open(f"{root}/img/{i}.png", "wb").write(b"\x89PNG\r\n\x1a\n" + os.urandom(20000))
PY
cat > "$work/pages.lua" <<'LUA'
local n = 0
request = function()
  n = n + 1
  if n % 5 == 0 then return wrk.format("GET", "/img/" .. (n % 200) .. ".png") end
  return wrk.format("GET", "/p/" .. (n % 1000) .. ".html")
end
LUA
"$bin/packager" pack "$work/site" --base-url http://bench.local/ -o "$work/site.zip" >/dev/null

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_nginx "$work"; stop_h2o "$work" 18098; }
trap cleanup EXIT
start_nginx "$work" "$work/site" 127.0.0.1:18091 1
start_h2o "$work" "$work/site" 18098
"$bin/packager" serve "$work/site.zip" --port 18092 --threads 1 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-fileserver" "$work/site" 18093 >/dev/null 2>&1 & pids+=($!)
# The ceilings: the same 6 KiB body for every request, from a Hummingbird route and from a bare SwiftNIO handler.
"$bin/packager-bench-fileserver" --hello 18096 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-fileserver" --nio-hello 18097 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-fileserver" --raw-hello 18099 >/dev/null 2>&1 & pids+=($!)
for port in 18091 18092 18093 18098; do
    wait_for "http://127.0.0.1:$port/p/1.html"
    # Every server must give the same bytes.
    curl -sf "http://127.0.0.1:$port/p/7.html" | cmp - "$work/site/p/7.html"
done
for port in 18096 18097 18099; do wait_for "http://127.0.0.1:$port/p/1.html"; done

rps() { wrk -t1 -c32 -d${duration}s -s "$work/pages.lua" "http://127.0.0.1:$1/" | awk '/Requests\/sec/ {print $2}'; }
# Warm up each, then measure each in turn, twice, keeping the best.
for port in 18091 18092 18093 18098; do wrk -t1 -c8 -d1s -s "$work/pages.lua" "http://127.0.0.1:$port/" >/dev/null; done
best() { local a b; a=$(rps "$1"); b=$(rps "$1"); python3 -c "print(max($a, $b))"; }
r_nginx=$(best 18091); r_packager=$(best 18092); r_file=$(best 18093); r_h2o=$(best 18098)
for port in 18096 18097 18099; do wrk -t1 -c8 -d1s "http://127.0.0.1:$port/p/1.html" >/dev/null; done
fixed() { local a b; a=$(wrk -t1 -c32 -d${duration}s "http://127.0.0.1:$1/p/1.html" | awk '/Requests\/sec/ {print $2}'); b=$(wrk -t1 -c32 -d${duration}s "http://127.0.0.1:$1/p/1.html" | awk '/Requests\/sec/ {print $2}'); python3 -c "print(max($a, $b))"; }
r_hello=$(fixed 18096); r_nio=$(fixed 18097); r_raw=$(fixed 18099)
ratio_file=$(python3 -c "print(f'{$r_packager / $r_file:.2f}')")
ratio_nginx=$(python3 -c "print(f'{$r_packager / $r_nginx:.2f}')")
ratio_h2o=$(python3 -c "print(f'{$r_packager / $r_h2o:.2f}')")
{
    echo "## packager serve: requests per second"
    echo
    echo "Run by \`make bench\` (scripts/bench-serve.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "1000 HTML pages (~6 KiB, deflated in the bundle, served identity) and 200 images (20 KiB, stored), asked for in turn (4 pages, 1 image);"
    echo "wrk -t1 -c32 -d${duration}s on loopback, best of 2 runs each, after a warm-up; client and servers share the machine's $(nproc) cores."
    echo "packager serve: --threads 1. h2o: 1 thread, files on disk. nginx: 1 worker, sendfile, files on disk (scripts/bench-lib.sh has both configurations). FileMiddleware, the Hummingbird route and the SwiftNIO handler below run on NIO's default group, a thread per core. FileMiddleware: Hummingbird $(python3 -c "import json; print(next(p['state'].get('version', '?') for p in json.load(open('Package.resolved'))['pins'] if p['identity'] == 'hummingbird'))" 2>/dev/null) serving the folder."
    echo
    echo "| server | requests/s | packager serve vs it | target |"
    echo "|---|---|---|---|"
    echo "| packager serve (bundle) | $r_packager | - | - |"
    echo "| h2o (disk) | $r_h2o | ${ratio_h2o}x | >= 1.0x |"
    echo "| Hummingbird FileMiddleware (disk) | $r_file | ${ratio_file}x | >= 1.2x |"
    echo "| nginx (disk) | $r_nginx | ${ratio_nginx}x | >= 1.2x |"
    echo
    echo "The ceilings, answering every request with the same 6 KiB body held in memory (no lookup, no file), same wrk settings:"
    echo
    echo "| server | requests/s | vs nginx above | packager serve vs it |"
    echo "|---|---|---|---|"
    echo "| a Hummingbird route (the framework the middleware runs in) | $r_hello | $(python3 -c "print(f'{$r_hello / $r_nginx:.2f}')")x | $(python3 -c "print(f'{$r_packager / $r_hello:.2f}')")x |"
    echo "| a SwiftNIO HTTP/1 channel handler, no framework | $r_nio | $(python3 -c "print(f'{$r_nio / $r_nginx:.2f}')")x | $(python3 -c "print(f'{$r_packager / $r_nio:.2f}')")x |"
    echo "| a SwiftNIO channel handler on the bytes, no HTTP decoder (the same 6 KiB body, one thread) | $r_raw | $(python3 -c "print(f'{$r_raw / $r_nginx:.2f}')")x | $(python3 -c "print(f'{$r_packager / $r_raw:.2f}')")x |"
    echo
} >"$out"

# Real content, page by page, against h2o and nginx: scripts/bench-serve-peers.sh.
cat "$out"
