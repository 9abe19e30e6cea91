#!/usr/bin/env bash
# make install's files: scripts/install.sh BINARY GENERATE_MANUAL PREFIX, or scripts/install.sh --uninstall PREFIX.
# Installs PREFIX/bin/packager, a man page per command in PREFIX/share/man/man1 (packager.1, packager.build.1, ...:
# `man packager.build`), and the bash, zsh and fish completions where each shell looks under PREFIX.
set -euo pipefail
completions=(share/bash-completion/completions/packager share/zsh/site-functions/_packager share/fish/vendor_completions.d/packager.fish)
if [ "${1:-}" = --uninstall ]; then
    prefix=${2:?usage: scripts/install.sh --uninstall PREFIX}
    rm -f "$prefix/bin/packager" "$prefix/share/man/man1/packager.1" "$prefix"/share/man/man1/packager.*.1
    for file in "${completions[@]}"; do rm -f "${prefix:?}/$file"; done
    echo "removed packager, its man pages and its completions from $prefix"
    exit 0
fi
binary=${1:?usage: scripts/install.sh BINARY GENERATE_MANUAL PREFIX}
manual=${2:?usage: scripts/install.sh BINARY GENERATE_MANUAL PREFIX}
prefix=${3:?usage: scripts/install.sh BINARY GENERATE_MANUAL PREFIX}
install -D -m 0755 "$binary" "$prefix/bin/packager"
# The pages carry the date of the last commit (or SOURCE_DATE_EPOCH), so two installs of one commit are identical.
date=$(date -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}" +%Y-%m-%d)
pages=$(mktemp -d)
trap 'rm -rf "$pages"' EXIT
"$manual" "$prefix/bin/packager" --multi-page --date "$date" --output-directory "$pages"
# A blank line between paragraphs of a command's discussion is a paragraph break in mdoc (.Pp), not an empty line.
sed -i 's/^$/.Pp/' "$pages"/*.1
install -d "$prefix/share/man/man1"
install -m 0644 "$pages"/*.1 "$prefix/share/man/man1/"
for file in "${completions[@]}"; do mkdir -p "$(dirname "$prefix/$file")"; done
"$prefix/bin/packager" --generate-completion-script bash > "$prefix/${completions[0]}"
"$prefix/bin/packager" --generate-completion-script zsh > "$prefix/${completions[1]}"
"$prefix/bin/packager" --generate-completion-script fish > "$prefix/${completions[2]}"
echo "installed $prefix/bin/packager, $(ls "$pages" | wc -l) man pages (man packager; man packager.build) and bash, zsh and fish completions"
