#!/usr/bin/env bash
# Faults an operator meets, injected into `packager serve` and `packager build` (scripts/faults.py says what and how):
# SIGTERM under 20 slow downloads, 105 damaged bodies with and without --scrub, python3.11-doc's build killed 20 times
# and resumed. Counts, not speeds: the same on any machine that runs it.
# Usage: scripts/bench-faults.sh BIN_FOLDER WORK OUTPUT.md [--quick]
set -euo pipefail
exec python3 "$(dirname "$0")/faults.py" "$@"
