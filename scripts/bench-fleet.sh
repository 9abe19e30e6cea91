#!/usr/bin/env bash
# Benchmark of a fleet following a release channel, in one run: python3.11-doc packed as R0 and as five nightly releases
# that each edit 0.5 % of its pages (2 pages and a marker page), each listed with the delta from the one before, then a
# rollback to R0; nginx as the CDN (channel.json
# and releases/<digest>.zip), reached through a proxy adding 50 ms each way; 8 `packager serve --channel` nodes, each
# with its own cache folder, polling every second, under 32 clients without pause. Per release: the bytes each node
# fetched for release objects (from nginx's access log, by a header each node sends) beside the ideal (the new index,
# the bodies no earlier release held, and 128 KiB), and the time until every node answered it.
# Usage: scripts/bench-fleet.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
packager="$bin/packager"
scripts=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work/www/releases"
work=$(cd "$work" && pwd)
docs=/usr/share/doc/python3.11/html
nodes=8
clients=32
releases=5
check=1
if [ "$quick" = "--quick" ]; then nodes=3; clients=8; releases=2; fi
nginx_port=18231
proxy_port=18232
one_way_ms=50

# The releases: R0, then each a copy (hard links) with 2 pages edited and the marker page rewritten.
cp -rL "$docs" "$work/r0"
echo "<html><body>release 0</body></html>" >"$work/r0/bench-release.html"
(cd "$work/r0" && find . -name '*.html' | sed 's|^\.||' | sort) >"$work/pages.txt"
mapfile -t pages <"$work/pages.txt"
for n in $(seq 1 $releases); do
    cp -al "$work/r$((n - 1))" "$work/r$n"
    for k in 1 2; do
        page=${pages[$(((n * 97 + k * 31) % ${#pages[@]}))]}
        edited=$(mktemp)
        sed "s|</body>|<p>Edited in release $n.</p></body>|" "$work/r$n$page" >"$edited"
        rm "$work/r$n$page" && mv "$edited" "$work/r$n$page"
    done
    rm "$work/r$n/bench-release.html" && echo "<html><body>release $n</body></html>" >"$work/r$n/bench-release.html"
done
for n in $(seq 0 $releases); do "$packager" pack "$work/r$n" --base-url http://bench.local/ -o "$work/r$n.zip" >/dev/null; done
# Each release's channel document lists the delta from the one before.
for n in $(seq 1 $releases); do "$packager" delta "$work/r$((n - 1)).zip" "$work/r$n.zip" -o "$work/d$n.zip" >/dev/null; done
"$packager" keygen -o "$work/release" >/dev/null

mkdir -p "$work/nginx"
cat >"$work/nginx/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log;
user root;
events { worker_connections 4096; }
http {
    log_format fleet '\$http_x_node \$request_uri \$status \$bytes_sent';
    access_log $work/access.log fleet;
    sendfile on;
    keepalive_requests 1000000;
    server { listen 127.0.0.1:$nginx_port; root $work/www; etag on; }
}
NGINX
nginx -c "$work/nginx/nginx.conf"
python3 "$scripts/delay-proxy.py" "$proxy_port" 127.0.0.1 "$nginx_port" "$one_way_ms" &
proxy=$!
pids=()
cleanup() {
    kill $proxy "${pids[@]}" 2>/dev/null || true
    nginx -c "$work/nginx/nginx.conf" -s stop 2>/dev/null || true
}
trap cleanup EXIT
wait_for "http://127.0.0.1:$proxy_port/"

# R0 published before the nodes start.
d0=$("$packager" inspect "$work/r0.zip" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')
cp "$work/r0.zip" "$work/www/releases/$d0.zip"
"$packager" channel write "$work/r0.zip" --url 'releases/{digest}.zip' --sign-key "$work/release.key" -o "$work/www/channel.json" >/dev/null
ports=()
for n in $(seq 0 $((nodes - 1))); do
    port=$((18240 + n))
    "$packager" serve --channel "http://127.0.0.1:$proxy_port/channel.json" --public-key "$work/release.pub" --cache-dir "$work/cache-$n" \
        --reload-check $check --header "X-Node: n$n" --origin http://bench.local --port $port >"$work/node-$n.log" 2>&1 &
    pids+=($!)
    ports+=($port)
done
for port in "${ports[@]}"; do wait_for "http://127.0.0.1:$port/bench-release.html"; done

python3 - "$work" "$packager" "$releases" "$clients" "$check" "$one_way_ms" "${ports[@]}" >"$work/config.json" <<'PY'
import json, sys
work, packager, releases, clients, check, one_way = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
ports = [int(p) for p in sys.argv[7:]]
steps = [{"name": f"R{n}", "zip": f"{work}/r{n}.zip", "site": f"{work}/r{n}", "delta": f"{work}/d{n}.zip"} for n in range(1, releases + 1)]
# Back to R0, whose bodies every node's cache holds (R1 to R5 came by deltas, whose edited pages are patches).
steps.append({"name": "back to R0", "zip": f"{work}/r0.zip", "site": f"{work}/r0", "rollback": True})
print(json.dumps({
    "packager": packager, "www": f"{work}/www", "key": f"{work}/release.key", "log": f"{work}/access.log", "ports": ports,
    "pages": [line.strip() for line in open(f"{work}/pages.txt") if line.strip()], "marker": "/bench-release.html",
    "clients": clients, "check": check, "rtt": 2 * one_way / 1000,
    "initial": {"zip": f"{work}/r0.zip", "site": f"{work}/r0"}, "steps": steps}))
PY
python3 "$scripts/fleet-bench.py" "$work/config.json" >"$work/result.json"

python3 - "$work/result.json" "$nodes" "$clients" "$check" "$one_way_ms" "$(stat -c %s "$work/r1.zip")" "$(machine)" "$bin" >"$out" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
nodes, clients, check, one_way, size, machine = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
rtt = 2 * one_way / 1000
print("## A fleet following a release channel\n")
print(f"Run by scripts/bench-fleet.sh with the binaries of {sys.argv[8]}. Machine: {machine}. python3.11-doc ({size / 1e6:.1f} MB a release, 530 pages) as R0 and {len(result['steps']) - 1} nightly releases, "
      f"each editing 0.5 % of its pages, then a rollback; nginx behind a proxy adding {one_way} ms each way; {nodes} `packager serve --channel` "
      f"nodes (a cache folder each, `--reload-check {check:g}`), every page read through every node after each swap, {clients} clients "
      "asking random nodes for random pages without pause throughout. Before the cache shared across releases, a node fetched the whole "
      "release again for each (issue 48: 13.1 MB for a 3-page change, 48x the ideal).\n")
print("| release | bytes fetched per node (most) | ideal: the delta + 128 KiB (index + new bodies + 128 KiB without it) | ratio | target | every node answering it after | target |")
print("|---|---|---|---|---|---|---|")
for step in result["steps"]:
    ratio = step["bytes_max"] / step["ideal"]
    if step["rollback"]:
        ideal = f"{step['index'] + 128 * 1024:,} (index + 128 KiB; bodies cached)"
        target = "≤ index + 128 KiB"
        ratio = step["bytes_max"] / (step["index"] + 128 * 1024)
    elif step["delta"] is not None:
        ideal = f"{step['delta'] + 128 * 1024:,} (the delta, {step['delta']:,}, + 131,072; without it {step['ideal']:,})"
        target = "≤ 1.2x"
        ratio = step["bytes_max"] / (step["delta"] + 128 * 1024)
    else:
        ideal = f"{step['ideal']:,} ({step['index']:,} + {step['new_bodies']:,} + 131,072)"
        target = "≤ 1.2x"
    propagation = f"{step['propagation']:.2f} s" if step["propagation"] is not None else f"{step['nodes_behind']} nodes never"
    print(f"| {step['step']} | {step['bytes_max']:,} (least {step['bytes_min']:,}) | {ideal} | {ratio:.2f}x | {target} | {propagation} | ≤ {check:g} s + 3 RTT = {check + 3 * rtt:.2f} s |")
wrong = sum(s["wrong_reads"] for s in result["steps"]) + result["warm_wrong"]
print(f"\nUnder load: {result['requests']:,} requests: {result['failed']} failed, {result['neither']} of no release, {result['stale']} of the "
      f"replaced release after the node was seen on the new one (targets 0, 0, 0); every page read through every node after each swap: "
      f"{wrong} not the release's.\n")
PY
cat "$out"
