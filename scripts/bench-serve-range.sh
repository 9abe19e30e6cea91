#!/usr/bin/env bash
# Memory of `packager serve` under 20 concurrent one-byte Range requests of a 1 GiB stored body (256 MiB with
# --quick): peak RSS (VmHWM) of the server, first while the body is still unchecked (the first request reads it
# once to check it), then once it is. Usage: scripts/bench-serve-range.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
bin=$1
work=$2
out=$3
size=1G
[ "${4:-}" = "--quick" ] && size=256M
rm -rf "$work" && mkdir -p "$work/site"
work=$(cd "$work" && pwd)
head -c "$size" /dev/urandom >"$work/site/big.bin"
"$bin/packager" pack "$work/site" --base-url http://bench.local/ -o "$work/big.zip" >/dev/null
rm "$work/site/big.bin"
"$bin/packager" serve "$work/big.zip" --port 18133 >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_for http://127.0.0.1:18133/   # any answer; asking for big.bin itself would check it
burst() { # OFFSET-STEM: 20 concurrent one-byte ranges; prints the seconds, then the distinct answers (status:bytes)
    local t0 t1 codes
    t0=$(date +%s.%N)
    codes=$(seq 20 | xargs -P 20 -I{} curl -s -o /dev/null -w "%{http_code}:%{size_download}\n" -r "{}$1-{}$1" http://127.0.0.1:18133/big.bin | sort -u | tr '\n' ' ')
    t1=$(date +%s.%N)
    echo "$(python3 -c "print(f'{$t1 - $t0:.2f}')") $codes"
}
read -r s1 c1 < <(burst 000)
read -r s2 c2 < <(burst 777)
hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status)
{
    echo "## packager serve: Range requests of a large body"
    echo
    echo "Run by \`make bench\` (scripts/bench-serve-range.sh) on $(date -u +%Y-%m-%dT%H:%M:%SZ), $(machine)."
    echo "A $size body of random bytes (stored), packed and served; 20 one-byte Range requests at once (curl), twice."
    echo
    echo "| measure | result | target |"
    echo "|---|---|---|"
    echo "| answers (status:bytes) | ${c1} and ${c2} | 206:1 |"
    echo "| 20 ranges, body not yet checked (read once to check it) | $s1 s | - |"
    echo "| 20 ranges, body checked | $s2 s | - |"
    echo "| peak RSS of packager serve | $((hwm / 1024)) MB | < 100 MB |"
    echo
} >"$out"
cat "$out"
