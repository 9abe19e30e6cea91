#!/usr/bin/env bash
# make test's stages, each run whatever the one before did, and every failure listed again at the end.
# Chromium's tests, and the Vapor test that swaps bundles under 32 clients, each run on their own: on two cores they
# would slow the timing tests of the first stage (and each other). The refused-port test runs alone: in the full first
# stage its failure once took 27 to 29 s (2 to 3 s alone), before its port was held bound (TestSupport's closedPort).
# The fault tests run alone too: their origin stalls for 8 s against a 4 s request timeout, and in CI's full first stage
# a plain 503 answer once took longer than those 4 s (reported "timed out" where the test expects "HTTP 503").
# The SwiftPM plugin's tests run last, alone: they build the CLI in a package of their own (.build-plugin; about 10
# minutes the first time on two cores, a minute or two after a change), which would starve every other stage.
set -uo pipefail
SWIFT=${SWIFT:-swift}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=("everything else" "Chromium (BrowserTests)" "bundle swaps under load (swapsUnderLoad)" "a refused port (refusedPortFailsFast)" "faults while crawling and verifying (FaultTests)" "the SwiftPM plugin (PluginTests)")
stages=(
    "--skip BrowserTests --skip swapsUnderLoad --skip refusedPortFailsFast --skip PackagerKitTests.FaultTests --skip PackagerKitTests.PluginTests"
    "--filter BrowserTests"
    "--filter swapsUnderLoad"
    "--filter refusedPortFailsFast"
    "--filter PackagerKitTests.FaultTests"
    "--filter PackagerKitTests.PluginTests"
)
failed=0
results=()
for i in "${!stages[@]}"; do
    echo "== stage $((i + 1)) of ${#stages[@]}: ${names[$i]}"
    start=$SECONDS
    # shellcheck disable=SC2086
    $SWIFT test --skip-build ${stages[$i]} 2>&1 | tee "$logs/$i.log"
    status=${PIPESTATUS[0]}
    seconds=$((SECONDS - start))
    if [ "$status" = 0 ]; then
        results+=("  ok      stage $((i + 1)): ${names[$i]} (${seconds} s)")
    else
        failed=1
        results+=("  FAILED  stage $((i + 1)): ${names[$i]} (exit $status, ${seconds} s)")
        # Swift Testing marks a failed test with ✘; XCTest says "failed".
        while IFS= read -r line; do results+=("          $line"); done < <(grep -E '✘ Test .* (failed|recorded)|error: .*: failed' "$logs/$i.log" | sed 's/^ *//' | head -40)
    fi
done
echo
echo "== make test: every stage ran"
printf '%s\n' "${results[@]}"
exit $failed
