#!/usr/bin/env bash
# Benchmark of OfflineBundleVapor's middleware (a bundle) against Vapor's own FileMiddleware (the same files on disk),
# both in a Vapor 4 application with no other middleware, on Debian's python3.11-doc; wrk on loopback, in the same
# run. Usage: scripts/bench-vapor.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
quick=${4:-}
duration=10
[ "$quick" = "--quick" ] && duration=3
docs=/usr/share/doc/python3.11/html
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
if [ ! -f "$docs/library/functions.html" ]; then
    echo "bench-vapor: $docs is missing (apt-get install python3.11-doc)" >&2
    exit 1
fi
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
cp -rL "$docs" "$work/py"
"$bin/packager" pack "$work/py" --base-url http://bench.local/ -o "$work/py.zip" >/dev/null
"$bin/packager-bench-vapor" --bundle "$work/py.zip" 18101 >/dev/null 2>&1 & pids+=($!)
"$bin/packager-bench-vapor" --files "$work/py" 18102 >/dev/null 2>&1 & pids+=($!)
for port in 18101 18102; do
    wait_for "http://127.0.0.1:$port/library/functions.html"
    # Both must give the same bytes.
    curl -sf "http://127.0.0.1:$port/library/functions.html" | cmp - "$work/py/library/functions.html"
done
pages_mix_lua "$work/py" "$work"
one() { wrk -t1 -c32 -d${duration}s "http://127.0.0.1:$1$2" | awk '/Requests\/sec/ {print $2}'; }
mix() { wrk -t1 -c32 -d${duration}s -s "$work/py-mix.lua" "http://127.0.0.1:$1/" | awk '/Requests\/sec/ {print $2}'; }
best3() { local a b c; a=$("$@"); b=$("$@"); c=$("$@"); python3 -c "print(max($a, $b, $c))"; }
for port in 18101 18102; do wrk -t1 -c8 -d1s -s "$work/py-mix.lua" "http://127.0.0.1:$port/" >/dev/null; done
m_bundle=$(best3 mix 18101); m_files=$(best3 mix 18102)
f_bundle=$(best3 one 18101 /library/functions.html); f_files=$(best3 one 18102 /library/functions.html)
s_bundle=$(best3 one 18101 /library/index.html); s_files=$(best3 one 18102 /library/index.html)
r() { python3 -c "print(f'{$1 / $2:.2f}')"; }
version=$(python3 -c "import json; print(next(p['state'].get('version', '?') for p in json.load(open('Package.resolved'))['pins'] if p['identity'] == 'vapor'))" 2>/dev/null || echo "?")
{
    echo "## The Vapor middleware: requests per second"
    echo
    echo "Run by \`make bench\` (scripts/bench-vapor.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "Debian's python3.11-doc: OfflineBundleVapor's \`OfflineBundleMiddleware\` answering from the packed bundle, against Vapor $version's own \`FileMiddleware\` serving the same folder from disk; each alone in a Vapor application (production environment, NIO's event loops, one per core), answering identity. The bundle is mounted with \`inflatedCacheBytes\` of 64 MiB (the memory \`packager serve\` gives its caches by default), so a page asked again is not inflated again; FileMiddleware's files sit in the kernel's page cache."
    echo "wrk -t1 -c32 -d${duration}s on loopback, best of 3 runs each, after a warm-up; client and servers share the machine's $(nproc) cores."
    echo
    echo "| request | OfflineBundleMiddleware | FileMiddleware | ratio | target |"
    echo "|---|---|---|---|---|"
    echo "| every page of the site in turn | $m_bundle | $m_files | $(r "$m_bundle" "$m_files")x | >= 1.0x |"
    echo "| library/functions.html (290 KB) | $f_bundle | $f_files | $(r "$f_bundle" "$f_files")x | >= 1.0x |"
    echo "| library/index.html (small) | $s_bundle | $s_files | $(r "$s_bundle" "$s_files")x | >= 1.0x |"
    echo
} >"$out"
cat "$out"
