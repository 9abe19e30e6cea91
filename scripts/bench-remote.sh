#!/usr/bin/env bash
# Benchmark of remote bundles (mounted from a web server by HTTP range reads), in one run: a cold mount's requests,
# bytes and time, directly and through a proxy adding 50 ms each way; the first page after it; what reading 1 % of the
# pages fetches; `packager serve URL` with a warm cache beside `packager serve FILE`; and 100 swaps of the object on
# nginx under 32 clients.
# Usage: scripts/bench-remote.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
packager="$bin/packager"
scripts=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/www"
work=$(cd "$work" && pwd)
docs=/usr/share/doc/python3.11/html
duration=10
swaps=100
count=100000
if [ "$quick" = "--quick" ]; then duration=3; swaps=20; count=20000; fi
nginx_port=18211
proxy_port=18212
one_way_ms=50
r() { python3 -c "print(f'{$1 / $2:.2f}')"; }

# The bundles: python3.11-doc, and many small files.
cp -rL "$docs" "$work/py"
"$packager" pack "$work/py" --base-url http://bench.local/ -o "$work/www/py.zip" >/dev/null
make_tiny_site "$work/syn" "$count"
"$packager" pack "$work/syn" --base-url https://bench.example/ -o "$work/www/syn.zip" >/dev/null
rm -rf "$work/syn"

start_nginx "$work" "$work/www" "127.0.0.1:$nginx_port" 1
python3 "$scripts/delay-proxy.py" "$proxy_port" 127.0.0.1 "$nginx_port" "$one_way_ms" &
proxy=$!
cleanup() {
    kill $proxy $serve_a $serve_b 2>/dev/null || true
    stop_nginx "$work"
}
trap cleanup EXIT
serve_a=""
serve_b=""
wait_for "http://127.0.0.1:$proxy_port/py.zip"

direct="http://127.0.0.1:$nginx_port"
delayed="http://127.0.0.1:$proxy_port"
# Cold mounts (no cache): best of 3 by time.
cold() { # URL: the best of 3 lines of packager-bench --remote
    local best=""
    for _ in 1 2 3; do
        local line
        line=$("$bin/packager-bench" --remote "$1" - 0.01)
        if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if float('${line%% *}') < float('${best%% *}') else 1)"; then best=$line; fi
    done
    echo "$best"
}
read -r syn_mount syn_requests syn_bytes syn_index syn_size _ _ _ _ < <(cold "$direct/syn.zip")
read -r dsyn_mount dsyn_requests dsyn_bytes _ _ _ _ _ _ < <(cold "$delayed/syn.zip")
read -r dpy_mount _ _ _ _ dpy_first _ _ _ < <(cold "$delayed/py.zip")
read -r _ py_requests py_bytes py_index py_size _ pct_requests pct_bytes pct_pages < <("$bin/packager-bench" --remote "$direct/py.zip" - 0.01)
# The index's transfer time over the delayed link: a range of its size, less a one-byte range (one round trip each).
index_time=$(python3 - "$delayed/syn.zip" "$syn_index" <<'PY'
import subprocess, sys
url, size = sys.argv[1], int(sys.argv[2])
def t(r):
    return min(float(subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{time_total}", "-r", r, url], capture_output=True, text=True).stdout) for _ in range(3))
print(max(0.0, t(f"0-{size - 1}") - t("0-0")))
PY
)
rtt=$(python3 -c "print(2 * $one_way_ms / 1000)")
# Plus what the mount costs here on loopback (reading and, in format version 3, inflating the index): the delay adds
# round trips and transfer time, not CPU.
mount_bound=$(python3 -c "print(2.5 * $rtt + $index_time + $syn_mount)")

# Serving python3.11-doc's pages from the remote bundle with a warm cache, beside the same bundle from a file.
cache="$work/cache"
"$packager" check "$direct/py.zip" --cache-dir "$cache" >/dev/null
pages_mix_lua "$work/py" "$work"
"$packager" serve "$direct/py.zip" --cache-dir "$cache" --port 18213 --threads 1 >"$work/serve-remote.log" 2>&1 &
serve_a=$!
"$packager" serve "$work/www/py.zip" --port 18214 --threads 1 >"$work/serve-file.log" 2>&1 &
serve_b=$!
wait_for "http://127.0.0.1:18213/"
wait_for "http://127.0.0.1:18214/"
for port in 18213 18214; do
    # Every page is there: a 404 would be counted by wrk as an answer.
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$(head -1 "$work/py-pages.txt")")
    [ "$code" = 200 ] || { echo "bench-remote: port $port answered $code for a page" >&2; exit 1; }
    wrk -t1 -c8 -d1s -s "$work/py-mix.lua" "http://127.0.0.1:$port/" >/dev/null
done
mix() { wrk -t1 -c32 -d${duration}s -s "$work/py-mix.lua" "http://127.0.0.1:$1/" | awk '/Requests\/sec/ {print $2}'; }
remote_best=0
file_best=0
for _ in 1 2 3; do
    remote_best=$(python3 -c "print(max($remote_best, $(mix 18213)))")
    file_best=$(python3 -c "print(max($file_best, $(mix 18214)))")
done
kill $serve_a $serve_b 2>/dev/null || true
wait $serve_a $serve_b 2>/dev/null || true

# Swaps under load: four releases that differ on every page, taking turns as release.zip on nginx.
for v in b c d; do
    cp -r "$work/py" "$work/py-$v"
    find "$work/py-$v" -name '*.html' -exec sh -c 'echo "<!-- release $2 -->" >>"$1"' _ {} "$v" \;
    "$packager" pack "$work/py-$v" --base-url http://bench.local/ -o "$work/py-$v.zip" >/dev/null
done
cp "$work/www/py.zip" "$work/py-a.zip"
cp "$work/py-a.zip" "$work/www/release.zip"
"$packager" serve "$direct/release.zip" --port 18215 --reload-check 0.5 --cache-dir "$work/cache-swaps" >"$work/serve-swaps.log" 2>&1 &
serve_a=$!
wait_for "http://127.0.0.1:18215/"
head -300 "$work/py-pages.txt" >"$work/swap-pages.txt"
read -r swap_requests swap_failed swap_neither swap_stale swap_detected < <(
    python3 "$scripts/remote-swaps.py" 18215 "$work/www" "$work/swap-pages.txt" "$swaps" 32 \
        "$work/py-a.zip" "$work/py" "$work/py-b.zip" "$work/py-b" "$work/py-c.zip" "$work/py-c" "$work/py-d.zip" "$work/py-d")
kill $serve_a 2>/dev/null || true
reloads=$(grep -c '^reloaded' "$work/serve-swaps.log" || true)

{
    echo "## Remote bundles (HTTP range reads from nginx)"
    echo
    echo "$(machine); nginx $(nginx -v 2>&1 | sed 's|.*/||'); the delayed link is scripts/delay-proxy.py adding ${one_way_ms} ms each way (RTT $(python3 -c "print(int($rtt * 1000))") ms). Cold mounts without a cache, best of 3."
    echo
    echo "| measure | result | target |"
    echo "|---|---|---|"
    echo "| cold mount, $count small files ($(python3 -c "print(f'{$syn_size / 1e6:.1f}')") MB, index.bin $(python3 -c "print(f'{$syn_index / 1e6:.2f}')") MB): requests | $syn_requests | ≤ 2 |"
    echo "| the same: bytes fetched | $syn_bytes (index + $(python3 -c "print(f'{($syn_bytes - $syn_index) / 1024:.1f}')") KiB) | ≤ index + 64 KiB |"
    echo "| the same: mount time, direct | $(python3 -c "print(f'{$syn_mount * 1000:.0f}')") ms | |"
    echo "| the same over +${one_way_ms} ms: mount time | $(python3 -c "print(f'{$dsyn_mount * 1000:.0f}')") ms ($dsyn_requests requests) | ≤ 2.5 × RTT + index transfer + the direct mount = $(python3 -c "print(f'{$mount_bound * 1000:.0f}')") ms |"
    echo "| python3.11-doc over +${one_way_ms} ms: mount, then the first page | $(python3 -c "print(f'{$dpy_mount * 1000:.0f}')") ms, then $(python3 -c "print(f'{$dpy_first * 1000:.0f}')") ms | page ≤ 1 RTT ($(python3 -c "print(int($rtt * 1000))") ms) more |"
    echo "| python3.11-doc: 1 % of the pages ($pct_pages) read after a cold mount: bytes fetched | $pct_bytes of $py_size ($(python3 -c "print(f'{100 * $pct_bytes / $py_size:.2f}')") %), $pct_requests requests | ≤ 3 % |"
    echo "| serve python3.11-doc pages in turn (wrk -c32, best of 3): URL with a warm cache vs the file | $remote_best vs $file_best req/s: $(r "$remote_best" "$file_best")x | ≥ 0.9x |"
    echo "| $swaps swaps of the object on nginx (4 releases in turn), 32 clients without pause | $swap_requests requests: $swap_failed failed, $swap_neither of no release, $swap_stale of the replaced release after the swap was seen ($swap_detected swaps seen, $reloads reloads) | 0, 0, 0 |"
} >"$out"
cat "$out"
