#!/usr/bin/env bash
# The embedded demo, all on loopback, no internet: an origin serves Templates/demo-site; packager build crawls it
# with a declaration (a blocked ad script, a substituted logo); packager serve answers from the bundle with the
# origin stopped; two pages change and one is deleted at the origin; packager verify flags those three and
# writes its HTML report. Every process started here is stopped. Usage: scripts/demo.sh PACKAGER OUT_FOLDER
set -euo pipefail
packager=$1
out=$2
origin_port=${DEMO_ORIGIN_PORT:-18480}
serve_port=${DEMO_SERVE_PORT:-18481}
root=$(cd "$(dirname "$0")/.." && pwd)

rm -rf "$out/demo"
mkdir -p "$out/demo"
demo=$(cd "$out/demo" && pwd)
cp -R "$root/Templates/demo-site" "$demo/site"
mkdir -p "$demo/local"
cp "$root/Templates/demo-logo.svg" "$demo/local/logo.svg"

pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop_all EXIT
wait_for() { for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return 0; sleep 0.1; done; echo "demo: $1 did not come up" >&2; exit 1; }
start_origin() {
    python3 -m http.server "$origin_port" --bind 127.0.0.1 -d "$demo/site" >"$demo/origin.log" 2>&1 &
    origin_pid=$!
    pids+=("$origin_pid")
    wait_for "http://127.0.0.1:$origin_port/"
}
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

origin="http://127.0.0.1:$origin_port"
cat >"$demo/packager.yml" <<EOF
# The demo's declaration: written by scripts/demo.sh from the starter's keys.
output: demo.bundle.zip
seeds: ["$origin/"]
concurrency: {total: 8, per-host: 8}
retries: {attempts: 2, backoff: 200ms}
substitutions:
  - url: $origin/assets/img/logo.svg
    file: local/logo.svg
block: ["*/ads/*"]
drop-query-parameters: ["utm_*"]
EOF

step "1. an origin on $origin serves Templates/demo-site"
start_origin

step "2. packager build packager.yml"
"$packager" build "$demo/packager.yml"
"$packager" check "$demo/demo.bundle.zip"
unzip -tq "$demo/demo.bundle.zip"

step "3. the origin stops; packager serve answers from the bundle on port $serve_port"
kill "$origin_pid"; wait "$origin_pid" 2>/dev/null || true
"$packager" serve "$demo/demo.bundle.zip" --port "$serve_port" >"$demo/serve.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$serve_port/"
for path in / /docs/getting-started.html /about/ /assets/img/logo.svg /ads/tracker.js /not-in-the-bundle; do
    curl -s -o /dev/null -w "  GET %{url_effective}  ->  %{http_code}, %{size_download} bytes, %{content_type}\n" "http://127.0.0.1:$serve_port$path"
done
curl -s -D - -o /dev/null -H 'Accept-Encoding: gzip' "http://127.0.0.1:$serve_port/docs/faq.html" | grep -iE '^(HTTP|etag|last-modified|content-encoding)' | sed 's/^/  /'
stop_all

step "4. the origin changes two pages and deletes one"
start_origin
printf '\n<p>Updated after the release.</p>\n' >>"$demo/site/docs/faq.html"
printf '\n<p>New pricing.</p>\n' >>"$demo/site/docs/rate-limits.html"
touch -d '+1 hour' "$demo/site/docs/faq.html" "$demo/site/docs/rate-limits.html"
rm "$demo/site/docs/changelog.html"
echo "  changed docs/faq.html and docs/rate-limits.html, deleted docs/changelog.html"

step "5. packager verify"
set +e
"$packager" verify "$demo/demo.bundle.zip" --retries 1
status=$?
"$packager" verify "$demo/demo.bundle.zip" --retries 1 --format html --output "$demo/verify.html" >/dev/null
"$packager" verify "$demo/demo.bundle.zip" --retries 1 --format junit --output "$demo/verify.xml" >/dev/null
set -e
stop_all
flagged=$(python3 -c "
import xml.etree.ElementTree as ET
root = ET.parse('$demo/verify.xml').getroot()
print(' '.join(sorted(c.get('name').rsplit('/', 1)[-1] for c in root.iter('testcase') if c.find('failure') is not None)))")
echo "  exit status $status (1: something is stale, gone or moved); flagged: $flagged"
if [ "$flagged" != "changelog.html faq.html rate-limits.html" ]; then
    echo "demo: expected faq.html, rate-limits.html and changelog.html to be flagged" >&2
    exit 1
fi

step "done: everything is in $demo"
cat <<EOF
  declaration     $demo/packager.yml
  bundle          $demo/demo.bundle.zip   (packager inspect it; unzip -l it)
  verify report   $demo/verify.html (HTML), $demo/verify.xml (JUnit)
  the site        $demo/site (as changed in step 4)
  logs            $demo/origin.log, $demo/serve.log
EOF
