#!/usr/bin/env bash
# Benchmark of `packager serve --tls-cert` against nginx over TLS with the same certificate, on Debian's python3.11-doc:
# HTTP/1.1 by wrk, HTTP/2 by h2load, in the same run. Usage: scripts/bench-serve-tls.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
duration=10
[ "$quick" = "--quick" ] && duration=3
docs=/usr/share/doc/python3.11/html
rm -rf "$work" && mkdir -p "$work/tls"
work=$(cd "$work" && pwd)
tls=$work/tls

# One certificate for both servers, signed by a CA the clients trust (wrk and h2load do not verify; curl does).
make_test_ca "$tls"

cp -rL "$docs" "$work/py"
"$bin/packager" pack "$work/py" --base-url http://bench.local/ -o "$work/py.zip" >/dev/null
find "$work/py" -name '*.html' -exec gzip -k -6 {} +
pages_mix_lua "$work/py" "$work"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_nginx "$work"; }
trap cleanup EXIT
start_nginx "$work" "$work/py" "127.0.0.1:18443 ssl http2" 1 \
    "ssl_certificate $tls/server.pem; ssl_certificate_key $tls/server.key; gzip_static on;"
"$bin/packager" serve "$work/py.zip" --port 18444 --tls-cert "$tls/server.pem" --tls-key "$tls/server.key" >/dev/null 2>&1 & pids+=($!)
wait_for "https://127.0.0.1:18444/library/functions.html"
for port in 18443 18444; do
    for version in --http1.1 --http2; do
        curl -sf "$version" --cacert "$tls/ca.pem" "https://127.0.0.1:$port/library/functions.html" | cmp - "$work/py/library/functions.html"
    done
    [ "$(curl -s --http2 --cacert "$tls/ca.pem" -o /dev/null -w '%{http_version}' "https://127.0.0.1:$port/")" = 2 ]
done

best3() { local a b c; a=$("$@"); b=$("$@"); c=$("$@"); python3 -c "print(max($a, $b, $c))"; }
# HTTP/1.1: wrk, one thread, 32 connections.
h1() { # PORT PATH|mix [HEADER]
    local header=() script=()
    [ -n "${3:-}" ] && header=(-H "$3")
    [ "$2" = mix ] && script=(-s "$work/py-mix.lua")
    local path=$2
    [ "$2" = mix ] && path=/
    wrk -t1 -c32 -d${duration}s "${script[@]}" "${header[@]}" "https://127.0.0.1:$1$path" | awk '/Requests\/sec/ {print $2}'
}
# HTTP/2: h2load, one thread, CONNECTIONS connections of STREAMS streams each; the mix is every page in turn.
h2() { # PORT PATH|mix CONNECTIONS STREAMS [HEADER]
    local input=() header=()
    [ -n "${5:-}" ] && header=(-H "$5")
    if [ "$2" = mix ]; then
        sed "s|^|https://127.0.0.1:$1|" "$work/py-pages.txt" >"$work/h2-pages-$1.txt"
        input=(-i "$work/h2-pages-$1.txt")
    else
        input=("https://127.0.0.1:$1$2")
    fi
    h2load -t1 -c"$3" -m"$4" -D"$duration" --warm-up-time=1 "${header[@]}" "${input[@]}" 2>/dev/null |
        awk '/^finished in/ {gsub(",", "", $4); print $4}'
}
# Warm up both (TLS sessions, the page cache, packager serve's response cache).
for port in 18443 18444; do wrk -t1 -c8 -d2s -s "$work/py-mix.lua" "https://127.0.0.1:$port/" >/dev/null; done

rows=()
row() { # LABEL packager nginx target
    rows+=("| $1 | $2 | $3 | $(python3 -c "print(f'{$2 / $3:.2f}')")x | $4 |")
}
row "HTTP/1.1: every page in turn, identity" "$(best3 h1 18444 mix)" "$(best3 h1 18443 mix)" ">= 0.9x"
row "HTTP/1.1: functions.html, identity" "$(best3 h1 18444 /library/functions.html)" "$(best3 h1 18443 /library/functions.html)" ">= 0.9x"
row "HTTP/1.1: functions.html, Accept-Encoding: gzip (nginx: gzip_static)" \
    "$(best3 h1 18444 /library/functions.html 'Accept-Encoding: gzip')" "$(best3 h1 18443 /library/functions.html 'Accept-Encoding: gzip')" ">= 0.9x"
row "HTTP/2, 32 connections × 1 stream: every page in turn" "$(best3 h2 18444 mix 32 1)" "$(best3 h2 18443 mix 32 1)" ">= 0.9x"
row "HTTP/2, 32 connections × 1 stream: functions.html, identity" \
    "$(best3 h2 18444 /library/functions.html 32 1)" "$(best3 h2 18443 /library/functions.html 32 1)" ">= 0.9x"
row "HTTP/2, 4 connections × 8 streams: every page in turn, Accept-Encoding: gzip" \
    "$(best3 h2 18444 mix 4 8 'Accept-Encoding: gzip')" "$(best3 h2 18443 mix 4 8 'Accept-Encoding: gzip')" ">= 0.9x"
{
    echo "## packager serve over HTTPS: HTTP/1.1 and HTTP/2"
    echo
    echo "Run by \`make bench\` (scripts/bench-serve-tls.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine); $(nginx -v 2>&1 | sed 's/.*: //'), $(h2load --version 2>/dev/null | head -1)."
    echo "Debian's python3.11-doc, packed; nginx (1 worker, \`ssl http2\`, \`gzip_static on\` with a .gz by gzip -6 beside each page) serves the same folder."
    echo "Both use the same RSA-2048 certificate, and TLS 1.3 as the clients choose it. HTTP/1.1: wrk -t1 -c32 -d${duration}s; HTTP/2: h2load -t1 -D${duration} (ALPN h2)."
    echo "Best of 3 runs each, after a warm-up; client and servers share the machine's $(nproc) cores. packager serve runs with its defaults (\`--cache-size 64M\`)."
    echo
    echo "| request | packager serve | nginx | ratio | target |"
    echo "|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "How HTTP/2 is answered (perf record -g of packager serve under the multiplexed row, 2026-11-26): an answer the cache of whole answers holds is given on the connection (HTTP2CacheFront: a HEADERS and a DATA frame, no stream channel; before, a stream channel and its handlers per request cost a fifth of the samples in reference counting alone, and the row was 0.54x), and the small writes between two flushes go to NIOSSL joined into record-sized buffers (TLSWriteCoalescer; NIOSSL seals a record per write, and HTTP/2 writes a frame's 9-byte header apart from its payload: 46k to about 60k requests/s). What is left is NIO's HTTP/2 state machines and header validation, HPACK (about 9%) and AES-GCM."
    echo
} >"$out"
cat "$out"
