#!/usr/bin/env bash
# Fuzzes the bundle reader and the responder with libFuzzer (swiftc -sanitize=fuzzer,address): an input is a
# bundle, optionally followed by a request to answer over each of its entries.
#
#   scripts/fuzz.sh [SECONDS] [PACKAGER_BINARY]
#
# Builds Tests/Fuzz (a package of its own, in .build-fuzz) and seeds the corpus with real bundles made by
# `packager pack` (a tiny site, the same site signed, and one with redirects and a duplicate body), then
# fuzzes for SECONDS (default 300). Crashes, hangs and over-allocations are written to
# Tests/Fuzz/findings/, where the test suite (FuzzFindingsTests) mounts each one as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-300}
packager=${2:-}
scratch=.build-fuzz
work=$scratch/work
findings=Tests/Fuzz/findings

if [ -z "$packager" ]; then
    swift build --product packager >/dev/null
    packager=$(swift build --show-bin-path)/packager
fi

echo "building the fuzzer (release, -sanitize=fuzzer,address) in $scratch ..."
swift build -c release --package-path Tests/Fuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address --product BundleReaderFuzzer
fuzzer=$(swift build -c release --package-path Tests/Fuzz --scratch-path "$scratch" --show-bin-path)/BundleReaderFuzzer

rm -rf "$work"
mkdir -p "$work/site/docs" "$work/seeds" "$work/corpus" "$findings"
printf '<!doctype html><title>t</title><a href="docs/">docs</a>\n' >"$work/site/index.html"
printf 'body { color: red }\n' >"$work/site/style.css"
printf '<p>same</p>\n' >"$work/site/docs/index.html"
printf '<p>same</p>\n' >"$work/site/docs/copy.html"
printf '\x89PNG\r\n\x1a\nnot really a png' >"$work/site/logo.png"
"$packager" pack "$work/site" --base-url http://127.0.0.1:8080/ -o "$work/seeds/site.zip" >/dev/null
"$packager" keygen -o "$work/key" >/dev/null
"$packager" pack "$work/site" --base-url http://127.0.0.1:8080/ -o "$work/seeds/signed.zip" --sign-key "$work/key.key" >/dev/null
rm "$work/site/logo.png" "$work/site/docs/copy.html"
"$packager" pack "$work/site" --base-url https://example.com/a/ -o "$work/seeds/small.zip" >/dev/null
# The same bundles with a request after them (method, target, Range, If-None-Match, If-Modified-Since, If-Range,
# Accept-Encoding, one per line): the harness answers it over every entry.
i=0
while IFS= read -r request; do
    i=$((i + 1))
    for bundle in site small; do
        { cat "$work/seeds/$bundle.zip"; printf '\nPACKAGER-REQUEST\n'; printf '%b' "$request"; } >"$work/seeds/$bundle-request-$i"
    done
done <<'REQUESTS'
GET\n\nbytes=0-18446744073709551615\n\n\n\ngzip
GET\n?a=1#x\nbytes=18446744073709551615-\n"a,b", W/"c"\nSun, 06 Nov 1994 08:49:37 GMT\n"x"\nidentity
HEAD\n/../..\nbytes=-99999999999999999999\n*\nMonday, 06-Nov-94 08:49:37 GMT\nSun, 06 Nov 1994 08:49:37 GMT\ngzip;q=0, *;q=1
GET\nhttp://127.0.0.1:8080/docs/\nbytes=5-4, 0-0\nW/"\nSun Nov  6 08:49:37 1994\nW/"x"\nx-gzip;q=0.5
REQUESTS
cp "$findings"/* "$work/seeds/" 2>/dev/null || true
# The format's test vectors: both versions (a version-1 index is converted on mount), ZIP64 end records, damaged ones.
cp docs/vectors/*.zip "$work/seeds/"

echo "fuzzing for $duration s with $(ls "$work/seeds" | wc -l) seeds ..."
set +e
ASAN_OPTIONS=detect_leaks=0 "$fuzzer" "$work/corpus" "$work/seeds" \
    -max_total_time="$duration" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -artifact_prefix="$findings/" -print_final_stats=1 2>&1 | tee "$work/fuzz.log" | grep -E "^#[0-9]+ +(INITED|DONE|pulse)|ERROR|SUMMARY|stat::" 
status=${PIPESTATUS[0]}
set -e
echo "fuzzer exit status: $status (0 = ran to the time limit with no finding)"
echo "corpus: $(ls "$work/corpus" | wc -l) inputs; findings kept in $findings: $(ls "$findings" | wc -l)"
exit "$status"
