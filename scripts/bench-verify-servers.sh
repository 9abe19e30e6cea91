#!/usr/bin/env bash
# `packager verify` against the web servers people run, on real content: Debian's python3.11-doc HTML served by
# nginx, Apache httpd, lighttpd and Caddy (each plain and compressing, scripts/origin.sh), crawled by `packager build`
# and packed by `packager pack`. Counts the entries not found fresh while nothing changed (the target is none), then
# after two pages are edited and one deleted (the target is exactly those three), with the time verify took.
# Usage: scripts/bench-verify-servers.sh PACKAGER WORK OUTPUT.md [--quick]
set -euo pipefail
packager=$1
work=$2
out=$3
quick=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
docs=/usr/share/doc/python3.11/html
[ -f "$docs/index.html" ] || { echo "python3.11-doc is not installed (make deps)" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
kinds=$(bash "$here/origin.sh" kinds)
[ "$quick" = "--quick" ] && kinds=$(echo "$kinds" | head -2)

state=""
trap '[ -n "$state" ] && bash "$here/origin.sh" stop "$state" >/dev/null 2>&1 || true' EXIT

# Flagged entries of a JSON report: "non-fresh-count seconds list".
flagged() {
    python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = sorted(f"{e['url'].split('/', 3)[-1]}={e['verdict']}" for e in r["entries"] if e["verdict"] != "fresh")
print(len(bad), f"{r['seconds']:.2f}", len(r["entries"]), " ".join(bad[:6]) or "-")
PY
}

verify() { # BUNDLE REPORT
    "$packager" verify "$1" --allow-private-addresses --format json -o "$2" --concurrency 16 >/dev/null 2>&1 || true
}

rows=()
port=18120
for kind in $kinds; do
    site="$work/$kind/site"
    state="$work/$kind/server"
    mkdir -p "$work/$kind"
    # A copy the run edits; links into /usr/share/javascript become files; deployed an hour before the build.
    cp -rL "$docs" "$site"
    find "$site" -exec touch -h -d '1 hour ago' {} +
    chmod -R a+rX "$work"
    ln -s . "$site/pyv"
    port=$((port + 1))
    bash "$here/origin.sh" start "$kind" "$site" "$port" "$state"
    base="http://127.0.0.1:$port"
    "$packager" build --seed "$base/" --concurrency 8 -o "$work/$kind/crawl.zip" >/dev/null 2>&1
    "$packager" pack "$site" --base-url "$base/pyv/" -o "$work/$kind/pack.zip" >/dev/null 2>&1
    verify "$work/$kind/crawl.zip" "$work/$kind/crawl-before.json"
    verify "$work/$kind/pack.zip" "$work/$kind/pack-before.json"
    # Two edits a minute after the build, one deletion.
    for page in library/functions.html tutorial/classes.html; do
        echo "<!-- edited -->" >>"$site/$page"
        touch -d '1 minute' "$site/$page"
    done
    rm "$site/library/os.html"
    verify "$work/$kind/crawl.zip" "$work/$kind/crawl-after.json"
    verify "$work/$kind/pack.zip" "$work/$kind/pack-after.json"
    bash "$here/origin.sh" stop "$state"
    state=""
    read -r cb cbs ce _ < <(flagged "$work/$kind/crawl-before.json")
    read -r pb pbs pe _ < <(flagged "$work/$kind/pack-before.json")
    read -r ca cas _ clist < <(flagged "$work/$kind/crawl-after.json")
    read -r pa pas _ plist < <(flagged "$work/$kind/pack-after.json")
    rows+=("| $kind | $ce | $cb | $ca | $cbs s | $pe | $pb | $pa | $pbs s |")
    echo "$kind: crawled $ce entries, $cb flagged unchanged, $ca after ($clist); packed $pe entries, $pb flagged unchanged, $pa after ($plist)" >&2
    rm -rf "$site"
done

{
    echo "## packager verify against real web servers"
    echo
    echo "Run by \`make bench\` (scripts/bench-verify-servers.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores."
    echo
    echo "Debian's python3.11-doc HTML served on loopback by each server as Debian ships it (scripts/origin.sh: plain,"
    echo "and compressing text types on the fly), crawled by \`packager build --seed\` and packed by \`packager pack\`."
    echo "*Flagged* counts entries whose verdict is not fresh: first with nothing changed (target 0), then after"
    echo "\`library/functions.html\` and \`tutorial/classes.html\` were edited and \`library/os.html\` deleted (target 3:"
    echo "2 stale, 1 gone). A packed bundle has no validators from the origin, so every body is fetched and hashed."
    echo
    echo "| server | crawled entries | flagged, unchanged | flagged, after 3 changes | verify time | packed entries | flagged, unchanged | flagged, after 3 changes | verify time |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$out"
cat "$out"
