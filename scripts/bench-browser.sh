#!/usr/bin/env bash
# Benchmark of `packager build --browser` against the plain crawl of the same site in the same run: python3.11-doc
# served by nginx, time and peak memory of packager and Chromium together (the resident memory of the whole process
# tree, sampled every 0.1 s), then `packager check --browser` on the bundle with Sphinx's search page and its query.
# Usage: scripts/bench-browser.sh PACKAGER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
packager=$1
work=$2
out=$3
quick=${4:-}
docs=/usr/share/doc/python3.11/html
rm -rf "$work" && mkdir -p "$work"
work=$(cd "$work" && pwd)
if ! command -v chromium-headless-shell >/dev/null && [ -z "${PACKAGER_CHROMIUM:-}" ]; then
    printf '## packager build --browser\n\nNot run: Chromium is not installed (apt-get install chromium-headless-shell).\n' >"$out"
    exit 0
fi
trap 'stop_nginx "$work"' EXIT
start_nginx "$work" "$docs" 127.0.0.1:18191 1
base=http://127.0.0.1:18191
depth=()
[ "$quick" = "--quick" ] && depth=(--max-depth 1)

# tree_rss PID: the resident KiB of PID and every process below it.
tree_rss() {
    local total=0 pids=("$1") next
    while [ ${#pids[@]} -gt 0 ]; do
        next=()
        for p in "${pids[@]}"; do
            total=$((total + $(awk '/VmRSS/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)))
            while read -r c; do next+=("$c"); done < <(pgrep -P "$p" || true)
        done
        pids=("${next[@]}")
    done
    echo "$total"
}

# run_build NAME ARGS...: seconds, peak tree KiB and entries of one build.
run_build() {
    local name=$1; shift
    local start end peak=0 rss
    start=$(date +%s.%N)
    "$packager" build --seed "$base/index.html" --no-robots "${depth[@]}" -o "$work/$name.zip" "$@" >"$work/$name.txt" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        rss=$(tree_rss "$pid"); [ "$rss" -gt "$peak" ] && peak=$rss
        sleep 0.1
    done
    wait "$pid" || true
    end=$(date +%s.%N)
    local entries
    entries=$(grep -o '^built [^:]*: [0-9]* entries' "$work/$name.txt" | grep -o '[0-9]* entries' | cut -d' ' -f1)
    echo "$(python3 -c "print(round($end - $start, 2))") $peak ${entries:-0}"
}

read -r s_plain m_plain e_plain < <(run_build plain)
read -r s_browser m_browser e_browser < <(run_build browser --browser)
search="$base/search.html?q=dictionary&check_keywords=yes&area=default"
check_plain=$("$packager" check "$work/plain.zip" --browser --sample 10 --open "$search" | grep '^browser:' || true)
missing_plain=$("$packager" check "$work/plain.zip" --browser --sample 10 --open "$search" | grep -c 'not in the bundle' || true)
check_browser=$("$packager" check "$work/browser.zip" --browser --sample 10 --open "$search" | grep '^browser:' || true)
missing_browser=$("$packager" check "$work/browser.zip" --browser --sample 10 --open "$search" | grep -c 'not in the bundle' || true)

cat >"$out" <<MD
## packager build --browser: what scripts load

Run by \`make bench\` (scripts/bench-browser.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine); $(chromium-headless-shell --version 2>/dev/null || echo Chromium).
Debian's python3.11-doc served by nginx (1 worker); both builds crawl from /index.html, robots.txt off${depth:+, ${depth[*]}}; memory is the
resident memory of packager and every process under it (Chromium's), sampled every 0.1 s.

| build | seconds | peak memory | entries | vs the plain crawl | target |
|---|---|---|---|---|---|
| plain crawl | $s_plain | $((m_plain / 1024)) MiB | $e_plain | - | - |
| --browser (one page per set of scripts) | $s_browser | $((m_browser / 1024)) MiB | $e_browser | $(python3 -c "print(f'{$s_browser / $s_plain:.2f}x')") | <= 3x, <= 1.5 GB |

\`packager check --browser --sample 10 --open '$search'\` on each bundle (offline: the bundle answers every request):

| bundle | check | requests it could not answer |
|---|---|---|
| plain crawl | ${check_plain#browser: } | $missing_plain |
| --browser | ${check_browser#browser: } | $missing_browser |
MD
cat "$out"
