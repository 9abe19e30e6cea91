#!/usr/bin/env bash
# Type-checks every ```swift block of README.md as pasted, each alone as a program's main file, against the modules of
# a debug build of this package (so each block must carry its own imports and declare what it uses).
# Usage: scripts/readme-swift-check.sh [BUILD_FOLDER] [README]   (BUILD_FOLDER: .build/<triple>/debug by default)
# Exits 0 when every block type-checks; 1 naming the README line of each block that does not, with the compiler's words.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-$(swift build --show-bin-path)}
readme=${2:-README.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-I "$build/Modules")
while IFS= read -r map; do
    flags+=(-Xcc "-fmodule-map-file=$map" -Xcc -I -Xcc "$(dirname "$map")")
done < <(find "$build" -maxdepth 2 -name module.modulemap; find .build/checkouts -path '*include/module.modulemap'; ls Sources/C*/module.modulemap)
# Each block to its own folder, named by the README line it starts on.
awk -v work="$work" '/^```swift/ { n++; line = NR + 1; dir = work "/" line; system("mkdir -p " dir); file = dir "/main.swift"; inside = 1; next }
    /^```/ { if (inside) close(file); inside = 0; next }
    inside { print > file }' "$readme"
failed=0
count=0
for dir in "$work"/*/; do
    count=$((count + 1))
    line=$(basename "$dir")
    if ! output=$(swiftc -typecheck -swift-version 6 "${flags[@]}" "$dir/main.swift" 2>&1); then
        echo "readme-swift-check: $readme:$line: the block does not compile as pasted:" >&2
        echo "$output" | grep -E "error:" | head -5 >&2
        failed=1
    fi
done
[ "$count" -gt 0 ] || { echo "readme-swift-check: no swift blocks in $readme" >&2; exit 1; }
[ "$failed" = 0 ] && echo "readme-swift-check: all $count swift blocks of $readme compile as pasted"
exit "$failed"
