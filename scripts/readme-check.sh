#!/usr/bin/env bash
# Runs README.md as a new user would: every line starting with "$ " in a ```console block, in order, in one shell,
# in a scratch copy of what they need (Templates/, and PACKAGER_BINARY as .build/debug/packager and on PATH as
# packager). A ```yaml block whose first line is "# NAME.yml" is saved as NAME in the shell's current folder at that
# point ("save this as packager.yml"). Everything runs on loopback: the README itself starts the origin
# (python3 -m http.server 8480 ... &) and packager serve (port 8481), clear of the free ports packager demo picks.
#
# A command passes when it exits 0, or with the status the README shows for it: either a "$ echo $?" line right
# after it followed by the status, or a trailing "# exits N" comment. A line ending in "&" runs in the background;
# when it names a port (--port N, http.server N) the check waits until that port answers, and refuses to start
# when something already answers there. Every process started is stopped at the end (and on any failure).
# Exits 0 when all passed; 1 naming the README line of the first command that failed, or that still ran when the
# whole run passed READMECHECK_TIMEOUT seconds (default 100; it takes a few seconds).
#
# Then the outputs the README shows are compared with what the commands printed (scripts/readme-outputs.py: `…` elides,
# and what changes from run to run, times, sizes, digests, is compared by its shape); with --update, the outputs that
# differ are written again into the README from this run.
#
# Usage: scripts/readme-check.sh [--update] PACKAGER_BINARY [README]   (READMECHECK_VERBOSE=1 prints every command's output)
set -euo pipefail

if [ "${1:-}" = --run ]; then
    # The inner runner: one shell, so cd, export and background jobs (%1) carry over as in a terminal.
    steps=$2 files=$3 readme_name=$4 current=$5 logs=$6
    trap 'for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
    set +eu +o pipefail
    fail() { echo "readme-check: $readme_name:$1: $2" >&2; exit 1; }
    # A connection, not a request: a request would count in the metrics and the logs the README shows.
    answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
    count=0
    while IFS=$'\t' read -r kind line expected text; do
        case $kind in
        FILE)
            cp "$files/$line" "$text" || fail "$line" "cannot write $text in $PWD"
            echo "$readme_name:$line  (saved $text)"
            continue ;;
        ECHO)
            echo "$readme_name:$line  \$ $text  (checked above)"
            continue ;;
        esac
        port=
        background=false
        if [[ "$text" =~ \&[[:space:]]*(#.*)?$ ]]; then
            background=true
            if [[ "$text" =~ (--port|http\.server)[[:space:]]+([0-9]+) ]]; then
                port=${BASH_REMATCH[2]}
                answers "$port" && fail "$line" "port $port is already in use; stop what answers there first"
            fi
        fi
        count=$((count + 1))
        log=$logs/$line
        printf '%s:%s: `%s`\n' "$readme_name" "$line" "$text" >"$current"
        eval "$text" >"$log" 2>&1 </dev/null
        status=$?
        if $background; then
            pid=$!
            if [ -n "$port" ]; then
                for _ in $(seq 100); do answers "$port" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                answers "$port" || { cat "$log" >&2; fail "$line" "\`$text\` did not answer on port $port"; }
            fi
        fi
        if [ "${READMECHECK_VERBOSE:-}" = 1 ]; then
            echo "--- $readme_name:$line  \$ $text  (exit $status)"
            cat "$log"
        else
            echo "$readme_name:$line  \$ $text  (exit $status)"
        fi
        if [ "$status" != "$expected" ]; then
            echo "--- its output:" >&2
            tail -n 30 "$log" >&2
            fail "$line" "\`$text\` exited $status; the README expects $expected"
        fi
    done <"$steps"
    echo "readme-check: all $count commands of $readme_name ran as written"
    exit 0
fi

update=
if [ "${1:-}" = --update ]; then
    update=--update
    shift
fi
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
    echo "usage: scripts/readme-check.sh [--update] PACKAGER_BINARY [README]" >&2
    exit 2
fi
binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
readme=${2:-$root/README.md}
readme=$(cd "$(dirname "$readme")" && pwd)/$(basename "$readme")

work=$(mktemp -d "${TMPDIR:-/tmp}/readme-check.XXXXXX")
runner=
cleanup() {
    # timeout put the runner and everything it started in one process group: stop what is left of it.
    if [ -n "$runner" ]; then kill -- "-$runner" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The scratch copy: the reader's repository as far as the README's commands use it.
mkdir -p "$work/repo/.build/debug" "$work/bin" "$work/tmp" "$work/files" "$work/outputs"
cp -a "$root/Templates" "$work/repo/Templates"
ln -s "$binary" "$work/repo/.build/debug/packager"
ln -s "$binary" "$work/bin/packager"

# README.md -> steps: CMD/ECHO/FILE, README line, expected exit status, text (one per line, tab-separated).
python3 - "$readme" "$work/steps" "$work/files" <<'PY'
import re, sys
readme, steps_path, files = sys.argv[1:4]
lines = open(readme, encoding="utf-8").read().split("\n")
steps = []   # [kind, line, expected, text]
i = 0
while i < len(lines):
    fence = re.match(r"^```(\w*)", lines[i])
    if not fence:
        i += 1
        continue
    lang, start = fence.group(1), i + 1
    end = start
    while end < len(lines) and not lines[end].startswith("```"):
        end += 1
    body = lines[start:end]
    if lang == "yaml" and body and re.fullmatch(r"# ([\w.-]+\.ya?ml)", body[0].strip()):
        name = body[0].strip()[2:]
        open(f"{files}/{start + 1}", "w", encoding="utf-8").write("\n".join(body) + "\n")
        steps.append(["FILE", start + 1, 0, name])
    elif lang == "console":
        j = 0
        while j < len(body):
            if not body[j].startswith("$ "):
                j += 1
                continue
            number, text = start + j + 1, body[j][2:]
            while text.endswith("\\") and j + 1 < len(body):
                j += 1
                text = text[:-1] + " " + body[j].strip()
            j += 1
            if text.strip() == "echo $?":
                shown = body[j].strip() if j < len(body) else ""
                previous = next((s for s in reversed(steps) if s[0] == "CMD"), None)
                if not shown.isdigit() or previous is None:
                    sys.exit(f"readme-check: {readme}:{number}: 'echo $?' must follow a command and show a number")
                previous[2] = int(shown)
                steps.append(["ECHO", number, 0, text])
                continue
            exits = re.search(r"#.*\bexits (\d+)", text)
            steps.append(["CMD", number, int(exits.group(1)) if exits else 0, text])
    i = end + 1
if not any(s[0] == "CMD" for s in steps):
    sys.exit(f"readme-check: no '$ ' command lines in the console blocks of {readme}")
with open(steps_path, "w", encoding="utf-8") as out:
    for kind, number, expected, text in steps:
        out.write(f"{kind}\t{number}\t{expected}\t{text}\n")
PY

cd "$work/repo"
limit=${READMECHECK_TIMEOUT:-100}
set +e
PATH="$work/bin:$PATH" TMPDIR="$work/tmp" NO_COLOR=1 timeout -k 5 "$limit" \
    bash "$root/scripts/readme-check.sh" --run "$work/steps" "$work/files" "$(basename "$readme")" "$work/current" "$work/outputs" &
runner=$!
wait "$runner"
status=$?
set -e
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "readme-check: $(cat "$work/current" 2>/dev/null) still running after $limit s in all; stopped" >&2
fi
[ "$status" = 0 ] || exit "$status"
python3 "$root/scripts/readme-outputs.py" "$readme" "$work/steps" "$work/outputs" $update
