#!/usr/bin/env bash
# Builds the DocC catalogs of the public modules into .build-docs/site/MODULE, with the toolchain's docc.
set -euo pipefail
cd "$(dirname "$0")/.."
graphs=.build-docs/symbol-graphs
# Symbol graphs are kept between runs: an incremental build only re-emits those of modules it recompiles.
rm -rf .build-docs/site && mkdir -p "$graphs" .build-docs/site
swift build --scratch-path .build-docs -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs"
for module in OfflineBundle OfflineBundleHummingbird OfflineBundleHTTPClient OfflineBundleURLSession PackagerKit; do
    mkdir -p ".build-docs/graphs-$module" ".build-docs/site/$module"
    rm -f ".build-docs/graphs-$module"/*
    cp "$graphs/$module".symbols.json "$graphs/$module"@*.symbols.json ".build-docs/graphs-$module/" 2>/dev/null || cp "$graphs/$module".symbols.json ".build-docs/graphs-$module/"
    docc convert "Sources/$module/$module.docc" --additional-symbol-graph-dir ".build-docs/graphs-$module" \
        --fallback-display-name "$module" --fallback-bundle-identifier "packager.$module" --output-path ".build-docs/site/$module"
done
echo "documentation in .build-docs/site/ (one folder per module)"
