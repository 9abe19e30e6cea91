#!/usr/bin/env bash
# Benchmark of `packager serve` against h2o and nginx, page by page, on Debian's python3.11-doc: plain HTTP/1.1 and
# HTTPS with wrk, HTTP/2 with h2load, each server on one thread, in the same run.
# Usage: scripts/bench-serve-peers.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
duration=4
runs=3
if [ "$quick" = "--quick" ]; then duration=2; runs=1; fi
docs=/usr/share/doc/python3.11/html
[ -f "$docs/library/functions.html" ] || { echo "bench-serve-peers: python3.11-doc is not installed" >&2; exit 1; }
command -v h2o >/dev/null || { echo "bench-serve-peers: h2o is not installed (apt-get install h2o)" >&2; exit 1; }
[ -x "$bin/packager-bench-fileserver" ] || { echo "bench-serve-peers: $bin/packager-bench-fileserver is not built (PACKAGER_BENCHMARKS=1 swift build -c release --product packager-bench-fileserver)" >&2; exit 1; }
command -v cc >/dev/null || { echo "bench-serve-peers: no C compiler for the ceiling server (apt-get install gcc)" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work/tls"
work=$(cd "$work" && pwd)
tls=$work/tls
make_test_ca "$tls"
# The ceiling of the plain HTTP/1.1 rows of one page: a C server that answers every request with the same bytes by
# one writev (scripts/bench-ceiling.c); what the client and the loopback allow on this machine.
cc -O2 -o "$work/bench-ceiling" "$(dirname "$0")/bench-ceiling.c"

# The site: python3.11-doc as Debian ships it, and one page of 6 KiB beside it (the site's smallest page is 8.8 KB).
cp -rL "$docs" "$work/py"
python3 - "$work/py/page-6k.html" <<'PY'
import random, sys
rng = random.Random(5)
words = "offline bundle serve request response header cache etag range gzip".split()
body = "".join(f"<p>{' '.join(rng.choice(words) for _ in range(60))}</p>\n" for _ in range(15))
open(sys.argv[1], "w").write(f"<!doctype html><html><head><title>6k</title></head><body>{body}</body></html>")
PY
"$bin/packager" pack "$work/py" --base-url http://bench.local/ -o "$work/py.zip" >/dev/null
# What nginx's gzip_static and h2o's file.send-compressed send: a .gz made by gzip -6 beside each page.
find "$work/py" -name '*.html' -exec gzip -k -6 {} +
pages_mix_lua "$work/py" "$work"

pids=()
ceiling=""
cleanup() {
    for p in "${pids[@]}" $ceiling; do kill "$p" 2>/dev/null || true; done
    stop_nginx "$work"
    for port in 18201 18211; do stop_h2o "$work" "$port"; done
}
trap cleanup EXIT
# Plain HTTP: h2o 18201, nginx 18202, packager 18203; HTTPS (HTTP/1.1 and HTTP/2 by ALPN): 18211, 18212, 18213.
start_h2o "$work" "$work/py" 18201
start_h2o "$work" "$work/py" 18211 "$tls"
start_nginx "$work" "$work/py" "127.0.0.1:18202" 1 "gzip_static on; } server { listen 127.0.0.1:18212 ssl http2; root $work/py; etag on; \
ssl_certificate $tls/server.pem; ssl_certificate_key $tls/server.key; gzip_static on;"
"$bin/packager" serve "$work/py.zip" --port 18203 --threads 1 >/dev/null 2>&1 & pids+=($!)
"$bin/packager" serve "$work/py.zip" --port 18213 --threads 1 --tls-cert "$tls/server.pem" --tls-key "$tls/server.key" >/dev/null 2>&1 & pids+=($!)
for port in 18201 18202 18203; do
    wait_for "http://127.0.0.1:$port/index.html"
    # Every server gives the same bytes, identity and gzip.
    for page in /page-6k.html /index.html /library/functions.html; do
        curl -sf "http://127.0.0.1:$port$page" | cmp - "$work/py$page"
        curl -sf -H "Accept-Encoding: gzip" "http://127.0.0.1:$port$page" | gunzip | cmp - "$work/py$page"
    done
done
for port in 18211 18212 18213; do
    wait_for "https://127.0.0.1:$port/index.html"
    for version in --http1.1 --http2; do
        curl -sf "$version" --cacert "$tls/ca.pem" "https://127.0.0.1:$port/library/functions.html" | cmp - "$work/py/library/functions.html"
    done
    [ "$(curl -s --http2 --cacert "$tls/ca.pem" -o /dev/null -w '%{http_version}' "https://127.0.0.1:$port/index.html")" = 2 ]
done

# One measure: wrk (HTTP/1.1, one thread, 32 connections) or h2load (HTTP/2, one thread).
h1() { # URL PATH|mix [HEADER]
    local header=() script=() path=$2
    [ -n "${3:-}" ] && header=(-H "$3")
    if [ "$2" = mix ]; then script=(-s "$work/py-mix.lua"); path=/; fi
    wrk -t1 -c32 -d${duration}s "${script[@]}" "${header[@]}" "$1$path" | awk '/Requests\/sec/ {print $2}'
}
h2() { # URL PATH|mix CONNECTIONS STREAMS [HEADER]
    local input=() header=()
    [ -n "${5:-}" ] && header=(-H "$5")
    if [ "$2" = mix ]; then
        sed "s|^|$1|" "$work/py-pages.txt" >"$work/h2-pages.txt"
        input=(-i "$work/h2-pages.txt")
    else
        input=("$1$2")
    fi
    h2load -t1 -c"$3" -m"$4" -D"$duration" --warm-up-time=1 "${header[@]}" "${input[@]}" 2>/dev/null |
        awk '/^finished in/ {gsub(",", "", $4); print $4}'
}
# Warm up every server (page cache, TLS, packager's cache of whole answers).
for url in http://127.0.0.1:18201 http://127.0.0.1:18202 http://127.0.0.1:18203 https://127.0.0.1:18211 https://127.0.0.1:18212 https://127.0.0.1:18213; do
    wrk -t1 -c8 -d1s -s "$work/py-mix.lua" "$url/" >/dev/null
    wrk -t1 -c8 -d1s -s "$work/py-mix.lua" -H "Accept-Encoding: gzip" "$url/" >/dev/null
done

# A row: the three servers (and the ceiling, on the plain rows of one page) measured in turn, `runs` times, each
# keeping its best.
rows=()
row() { # LABEL KIND(h1|h2) SCHEME PORTBASE ARGS...
    local label=$1 kind=$2 scheme=$3 base=$4
    shift 4
    local best_h2o=0 best_nginx=0 best_packager=0 best_ceiling=0 r
    ceiling=""
    if [ "$kind" = h1 ] && [ "$scheme" = http ] && [ "$1" != mix ]; then
        # The same bytes as the others send: the page, or its .gz for a request that accepts gzip.
        if [ -n "${2:-}" ]; then
            "$work/bench-ceiling" 18204 "$work/py$1.gz" gzip & ceiling=$!
        else
            "$work/bench-ceiling" 18204 "$work/py$1" & ceiling=$!
        fi
        wait_for "http://127.0.0.1:18204/"
    fi
    for _ in $(seq "$runs"); do
        r=$("$kind" "$scheme://127.0.0.1:$((base + 1))" "$@"); best_h2o=$(python3 -c "print(max($best_h2o, ${r:-0}))")
        r=$("$kind" "$scheme://127.0.0.1:$((base + 2))" "$@"); best_nginx=$(python3 -c "print(max($best_nginx, ${r:-0}))")
        r=$("$kind" "$scheme://127.0.0.1:$((base + 3))" "$@"); best_packager=$(python3 -c "print(max($best_packager, ${r:-0}))")
        if [ -n "$ceiling" ]; then r=$("$kind" "http://127.0.0.1:18204" "$@"); best_ceiling=$(python3 -c "print(max($best_ceiling, ${r:-0}))"); fi
    done
    local of_ceiling="—"
    if [ -n "$ceiling" ]; then
        kill "$ceiling"
        wait "$ceiling" 2>/dev/null || true
        ceiling=""
        of_ceiling="$best_ceiling ($(python3 -c "print(f'{$best_packager / $best_ceiling:.2f}')")x)"
    fi
    rows+=("| $label | $best_packager | $best_h2o | $best_nginx | $(python3 -c "print(f'{$best_packager / $best_h2o:.2f}')")x | $(python3 -c "print(f'{$best_packager / $best_nginx:.2f}')")x | $of_ceiling |")
    # Each row as it is measured, so that a run stopped later keeps what it measured.
    echo "${rows[-1]}" >&2
}
gz="Accept-Encoding: gzip"
for scheme in http https; do
    base=18200
    label="HTTP/1.1"
    if [ $scheme = https ]; then base=18210; label="HTTPS, HTTP/1.1"; fi
    row "$label: page-6k.html (6 KiB), identity" h1 $scheme $base /page-6k.html
    row "$label: page-6k.html, gzip" h1 $scheme $base /page-6k.html "$gz"
    row "$label: index.html (13 KB), identity" h1 $scheme $base /index.html
    row "$label: index.html, gzip" h1 $scheme $base /index.html "$gz"
    row "$label: library/functions.html (290 KB), identity" h1 $scheme $base /library/functions.html
    row "$label: library/functions.html, gzip (43 KB)" h1 $scheme $base /library/functions.html "$gz"
    row "$label: every page in turn, identity" h1 $scheme $base mix
done
row "HTTPS, HTTP/2, 32 connections × 1 stream: index.html" h2 https 18210 /index.html 32 1
row "HTTPS, HTTP/2, 32 connections × 1 stream: functions.html, identity" h2 https 18210 /library/functions.html 32 1
row "HTTPS, HTTP/2, 32 connections × 1 stream: every page in turn" h2 https 18210 mix 32 1
row "HTTPS, HTTP/2, 4 connections × 8 streams: every page in turn, gzip" h2 https 18210 mix 4 8 "$gz"
# CPU per request, which the machine's noise moves far less than a rate: the server's user and system time (from
# /proc) over a wrk run, divided by the requests answered; beside the floor of SwiftNIO itself (a channel handler on
# the bytes that answers every request with the same 6 KiB, no HTTP decoder: packager-bench-fileserver --raw-hello).
"$bin/packager-bench-fileserver" --raw-hello 18209 >/dev/null 2>&1 & pids+=($!)
wait_for "http://127.0.0.1:18209/"
cpu_rows=()
cpu() { # LABEL PID URL [HEADER]: "user system" microseconds per request
    local pid=$1 url=$2 header=${3:-X-Bench: 1} tick u0 s0 u1 s1 n
    tick=$(getconf CLK_TCK)
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    n=$(wrk -t1 -c32 -d${duration}s -H "$header" "$url" | awk '/requests in/ {print $1}')
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
    python3 -c "print(f'{($u1 - $u0) / $tick / $n * 1e6:.2f} {($s1 - $s0) / $tick / $n * 1e6:.2f}')"
}
nginx_worker=$(pgrep -P "$(cat "$work/nginx/nginx.pid")" | head -1)
h2o_pid=$(cat "$work/h2o-18201/h2o.pid")
packager_pid=${pids[0]}
raw_pid=${pids[2]}
cpu_row() { # LABEL PATH [HEADER]
    local label=$1 path=$2 header=${3:-X-Bench: 1}
    read -r a_u a_s < <(cpu "$packager_pid" "http://127.0.0.1:18203$path" "$header")
    read -r b_u b_s < <(cpu "$h2o_pid" "http://127.0.0.1:18201$path" "$header")
    read -r c_u c_s < <(cpu "$nginx_worker" "http://127.0.0.1:18202$path" "$header")
    cpu_rows+=("| $label | $a_u + $a_s | $b_u + $b_s | $c_u + $c_s | $(python3 -c "print(f'{($b_u + $b_s) / ($a_u + $a_s):.2f}')")x |")
}
# The range over the CPU rows of one figure: field 2 (packager's user), 3 (its system), 4 and 5 (h2o's).
cpu_field() {
    local field=${*: -1}
    printf '%s\n' "${@:1:$#-1}" | awk -F'|' -v f="$field" '{ split($(f < 4 ? 3 : 4), t, "+"); v = t[(f % 2 == 0) ? 1 : 2] + 0; if (min == "" || v < min) min = v; if (v > max) max = v } END { printf "%.2f to %.2f", min, max }'
}
cpu_row "HTTP/1.1: page-6k.html, identity" /page-6k.html
cpu_row "HTTP/1.1: page-6k.html, gzip" /page-6k.html "$gz"
cpu_row "HTTP/1.1: index.html, identity" /index.html
read -r r_u r_s < <(cpu "$raw_pid" "http://127.0.0.1:18209/")
{
    echo "## packager serve against h2o and nginx, page by page"
    echo
    echo "Run by \`make bench\` (scripts/bench-serve-peers.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine); $(h2o --version | head -1), $(nginx -v 2>&1 | sed 's/.*: //'), $(h2load --version 2>/dev/null | head -1)."
    echo "Debian's python3.11-doc and one 6 KiB page beside it (page-6k.html; the site's smallest page is 8.8 KB), packed for packager serve; h2o and nginx serve the same folder, with a .gz made by \`gzip -6\` beside each page."
    echo "Each server on one thread: \`packager serve --threads 1\` (its default cache, 64 MiB); h2o \`num-threads: 1\`, \`file.send-compressed: ON\`, no access log; nginx \`worker_processes 1\`, \`sendfile on\`, \`gzip_static on\`, no access log (the configurations: scripts/bench-lib.sh, start_h2o and start_nginx)."
    echo "HTTP/1.1: wrk -t1 -c32 -d${duration}s; HTTP/2: h2load -t1 -D${duration} (ALPN h2). HTTPS: one RSA-2048 certificate for all three, TLS 1.3 as the clients choose it."
    echo "The three servers are measured in turn, $runs rounds, each keeping its best; the client and the server share the machine's $(nproc) cores."
    echo "The ceiling, on the plain rows of one page: scripts/bench-ceiling.c, a C server of one thread that answers every request with the same head and the page's bytes (its .gz for gzip) by one writev, without reading what was asked; measured in the same rounds. Its rate is what wrk and the loopback allow here: a server near it has nothing left to gain on that row, and the ratio of two servers near it is this host's noise."
    echo
    echo "| request | packager serve | h2o | nginx | vs h2o | vs nginx | ceiling (packager's share) |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "In this run packager's rate on the plain rows of one page was $(printf '%s\n' "${rows[@]}" | grep -o '([0-9.]*x) |$' | tr -d '()x |' | sort -n | sed -n '1p;$p' | paste -sd' ' | awk '{printf "%.2fx to %.2fx", $1, $2}') of the ceiling's."
    echo
    echo "CPU per request (microseconds of the server's user + system time, from /proc, over a wrk run of each; the rate of h2o's CPU time to packager's in the last column: above 1.0x, packager spends less). The floor of SwiftNIO, a channel handler on the bytes that answers every request with the same 6 KiB and no HTTP decoder (packager-bench-fileserver --raw-hello), spends $r_u + $r_s."
    echo
    echo "| request | packager serve | h2o | nginx | packager vs h2o |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${cpu_rows[@]}"
    echo
    echo "In this run, per request: packager's user time $(cpu_field "${cpu_rows[@]}" 2) µs, h2o's $(cpu_field "${cpu_rows[@]}" 4) µs, SwiftNIO's floor $r_u µs; system time packager $(cpu_field "${cpu_rows[@]}" 3) µs, h2o $(cpu_field "${cpu_rows[@]}" 5) µs."
    echo
    echo "Where the difference lies (a profile of 2026-11-29 on an Intel Xeon machine, where every figure was about twice this run's: perf record -g of each server under the small-page rows, strace -c, and CPU per request as above, repeated). Per request, h2o makes three system calls (read, a pread of the file, writev) and packager serve two (a read, and one write of a buffer made once a second for that answer: its head, Date and body); the kernel's part is the same or smaller for packager. The difference is user time, of which SwiftNIO's own channel is most of packager's (the floor above: an event, a read into a pooled buffer, the pipeline's read, read-complete and flush, the pending-writes queue). packager's own part on top of that floor is the request read off the bytes (CachedAnswerFront: no HTTP decoder, no header objects), the cache key's strings and hash, two uncontended locks and the write. Before CachedAnswerFront (NIO's decoder, HTTPRequestHead and HTTPHeaders, a head buffer and a copy of the body per answer), packager's user time was about twice that, and the index.html row 0.65x of h2o's. So on small answers over plain HTTP, packager serve is within a microsecond of the framework it is built on, and h2o, written in C on its own event loop, spends less than that framework's floor; over HTTPS, where encryption weighs the same for all three, packager is level with h2o or ahead. Over HTTP/2, until 2026-11-30 NIOHTTP2's frame and stream state machines, HPACK and header validation took most of packager's time, and the index.html row was 0.63x of h2o's; the connection is now read and written by the project's own layer (HTTP2Connection: its frames, streams and windows, a kept answer written from one buffer whose header block was encoded once, without a dynamic table, when the answer was kept; NIOHPACK decodes the client's blocks, and NIO's multiplexer runs the streams the cache does not answer). A profile of the index.html row (perf record -g, 2026-11-30, AMD EPYC) puts 17% of packager's samples in that layer (HPACK decoding a sixth of it, the cache lookup and the request's checks most of the rest), three fifths in TLS and the socket's write; by strace -c, packager makes one read and one write per request, h2o a read, a pread and a writev. The ceiling column puts the plain rows in proportion (added 2026-11-30): packager and h2o both answer within about a tenth of the rate of a server that does nothing per request but a read and a writev of bytes it holds, so on those rows what is left between them is wrk's and the loopback's share and this host's noise, not the servers' work. On functions.html with gzip (43 KB), the first run with the ceiling measured it at 57,969 requests/s against nginx's 56,684 and packager's 63,346 (best of 3 each): 1.2x of nginx is out of reach there for any server on this machine, the client being the bound. The HTTP/2 index.html row moves most between runs of the same code (0.82x to 1.01x of h2o on 2026-11-30); over 200,000 requests each with h2load, alternating, packager spent 15.9 to 19.6 µs of CPU per request and h2o 15.9 to 18.3 µs. The machine's load moves every figure here by 20% or more between runs: rates are best of three, ratios are within one run."
    echo
} >"$out"
cat "$out"
