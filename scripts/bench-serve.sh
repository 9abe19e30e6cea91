#!/usr/bin/env bash
# Benchmark of `packager serve` (a bundle) against nginx and Hummingbird's FileMiddleware (the same files
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
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_nginx "$work"; }
trap cleanup EXIT
start_nginx "$work" "$work/site" 127.0.0.1:18091 1
"$bin/packager" serve "$work/site.zip" --port 18092 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-fileserver" "$work/site" 18093 >/dev/null 2>&1 & pids+=($!)
# The ceilings: the same 6 KiB body for every request, from a Hummingbird route and from a bare SwiftNIO handler.
"$bin/packager-bench-fileserver" --hello 18096 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-fileserver" --nio-hello 18097 >/dev/null 2>&1 & pids+=($!)
for port in 18091 18092 18093; do
    wait_for "http://127.0.0.1:$port/p/1.html"
    # Every server must give the same bytes.
    curl -sf "http://127.0.0.1:$port/p/7.html" | cmp - "$work/site/p/7.html"
done
for port in 18096 18097; do wait_for "http://127.0.0.1:$port/p/1.html"; done

rps() { wrk -t1 -c32 -d${duration}s -s "$work/pages.lua" "http://127.0.0.1:$1/" | awk '/Requests\/sec/ {print $2}'; }
# Warm up each, then measure each in turn, twice, keeping the best.
for port in 18091 18092 18093; do wrk -t1 -c8 -d1s -s "$work/pages.lua" "http://127.0.0.1:$port/" >/dev/null; done
best() { local a b; a=$(rps "$1"); b=$(rps "$1"); python3 -c "print(max($a, $b))"; }
r_nginx=$(best 18091); r_packager=$(best 18092); r_file=$(best 18093)
for port in 18096 18097; do wrk -t1 -c8 -d1s "http://127.0.0.1:$port/p/1.html" >/dev/null; done
fixed() { local a b; a=$(wrk -t1 -c32 -d${duration}s "http://127.0.0.1:$1/p/1.html" | awk '/Requests\/sec/ {print $2}'); b=$(wrk -t1 -c32 -d${duration}s "http://127.0.0.1:$1/p/1.html" | awk '/Requests\/sec/ {print $2}'); python3 -c "print(max($a, $b))"; }
r_hello=$(fixed 18096); r_nio=$(fixed 18097)
ratio_file=$(python3 -c "print(f'{$r_packager / $r_file:.2f}')")
ratio_nginx=$(python3 -c "print(f'{$r_packager / $r_nginx:.2f}')")
{
    echo "## packager serve: requests per second"
    echo
    echo "Run by \`make bench\` (scripts/bench-serve.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "1000 HTML pages (~6 KiB, deflated in the bundle, served identity) and 200 images (20 KiB, stored), asked for in turn (4 pages, 1 image);"
    echo "wrk -t1 -c32 -d${duration}s on loopback, best of 2 runs each, after a warm-up; client and servers share the machine's $(nproc) cores."
    echo "nginx: 1 worker, sendfile, files on disk. FileMiddleware: Hummingbird $(python3 -c "import json; print(next(p['state'].get('version', '?') for p in json.load(open('Package.resolved'))['pins'] if p['identity'] == 'hummingbird'))" 2>/dev/null) serving the folder."
    echo
    echo "| server | requests/s | packager serve vs it | target |"
    echo "|---|---|---|---|"
    echo "| packager serve (bundle) | $r_packager | - | - |"
    echo "| Hummingbird FileMiddleware (disk) | $r_file | ${ratio_file}x | >= 1.2x |"
    echo "| nginx (disk) | $r_nginx | ${ratio_nginx}x | >= 1.0x |"
    echo
    echo "The ceilings, answering every request with the same 6 KiB body held in memory (no lookup, no file), same wrk settings:"
    echo
    echo "| server | requests/s | vs nginx above | packager serve vs it |"
    echo "|---|---|---|---|"
    echo "| a Hummingbird route (the framework the middleware runs in) | $r_hello | $(python3 -c "print(f'{$r_hello / $r_nginx:.2f}')")x | $(python3 -c "print(f'{$r_packager / $r_hello:.2f}')")x |"
    echo "| a SwiftNIO HTTP/1 channel handler, no framework | $r_nio | $(python3 -c "print(f'{$r_nio / $r_nginx:.2f}')")x | $(python3 -c "print(f'{$r_packager / $r_nio:.2f}')")x |"
    echo
} >"$out"

# Real content: Debian's python3.11-doc, packed, against nginx serving the same files (gzip_static: a precompressed
# .gz beside each page, which is what the bundle's stored deflate stream is).
docs=/usr/share/doc/python3.11/html
if [ -f "$docs/library/functions.html" ]; then
    stop_nginx "$work"
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    pids=()
    cp -rL "$docs" "$work/py"
    "$bin/packager" pack "$work/py" --base-url http://bench.local/ -o "$work/py.zip" >/dev/null
    find "$work/py" -name '*.html' -exec gzip -k -6 {} +
    start_nginx "$work" "$work/py" 127.0.0.1:18094 1 "gzip_static on;"
    "$bin/packager" serve "$work/py.zip" --port 18095 >/dev/null 2>&1 & pids+=($!)
    wait_for "http://127.0.0.1:18095/library/functions.html"
    for port in 18094 18095; do curl -sf "http://127.0.0.1:$port/library/functions.html" | cmp - "$work/py/library/functions.html"; done
    pages_mix_lua "$work/py" "$work"
    one() { # PORT PATH [HEADER]
        local header=()
        [ -n "${3:-}" ] && header=(-H "$3")
        wrk -t1 -c32 -d${duration}s "${header[@]}" "http://127.0.0.1:$1$2" | awk '/Requests\/sec/ {print $2}'
    }
    best2() { local a b; a=$("$@"); b=$("$@"); python3 -c "print(max($a, $b))"; }
    mix() { wrk -t1 -c32 -d${duration}s -s "$work/py-mix.lua" "http://127.0.0.1:$1/" | awk '/Requests\/sec/ {print $2}'; }
    for port in 18094 18095; do one "$port" /library/functions.html >/dev/null; done
    f_nginx=$(best2 one 18094 /library/functions.html); f_packager=$(best2 one 18095 /library/functions.html)
    g_nginx=$(best2 one 18094 /library/functions.html "Accept-Encoding: gzip"); g_packager=$(best2 one 18095 /library/functions.html "Accept-Encoding: gzip")
    m_nginx=$(best2 mix 18094); m_packager=$(best2 mix 18095)
    r() { python3 -c "print(f'{$1 / $2:.2f}')"; }
    {
        echo "Debian's python3.11-doc, packed (1,091 entries); nginx serves the same folder with \`gzip_static on\` (a .gz made by gzip -6 beside each page)."
        echo "\`library/functions.html\` is 290 KB (43 KB deflated). Same wrk settings. packager serve runs with its defaults: \`--cache-size 64M\`, of which 56 MiB keep whole responses, enough for the site's 50 MB of pages (the mix is every page in turn, so a cache smaller than the site would show here)."
        echo
        echo "| request | packager serve | nginx | ratio | target |"
        echo "|---|---|---|---|---|"
        echo "| functions.html, identity | $f_packager | $f_nginx | $(r "$f_packager" "$f_nginx")x | >= 1.0x |"
        echo "| functions.html, Accept-Encoding: gzip (nginx: gzip_static) | $g_packager | $g_nginx | $(r "$g_packager" "$g_nginx")x | >= 1.0x |"
        echo "| every page of the site in turn, identity | $m_packager | $m_nginx | $(r "$m_packager" "$m_nginx")x | >= 1.0x |"
        echo
    } >>"$out"
fi
cat "$out"
