#!/usr/bin/env bash
# Checks the relative links of the docs: every `[text](target)` in README.md,
# ARCHITECTURE.md and docs/*.md (outside code blocks) that is not a URL, and every
# `../path` in backticks, must name a file or folder inside the repository, and
# a link's `#anchor`, if any, a heading of that file (GitHub's slugs). Prints each broken link as FILE:LINE: TARGET: why,
# and exits 1 if there is one.
#
#   scripts/check-links.sh            the docs above
#   scripts/check-links.sh FILE...    these markdown files instead
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

case "${1:-}" in
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
esac
files=("$@")
((${#files[@]} > 0)) || files=(README.md ARCHITECTURE.md docs/*.md)

# anchors FILE: the slug of every heading outside code blocks, one a line.
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# links FILE: LINE<TAB>TARGET for every inline link outside code blocks, and
# for every path in backticks that climbs out of its folder (`../x`): such a
# path is a link in all but name.
links() {
    awk '/^```/ { code = !code; next }
        !code {
            line = $0
            while (match(line, /\]\([^) ]+\)/)) {
                print FNR "\t" substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
            }
            line = $0
            while (match(line, /`\.\.\/[^` ]+`/)) {
                print FNR "\t" substr(line, RSTART + 1, RLENGTH - 2)
                line = substr(line, RSTART + RLENGTH)
            }
        }' "$1"
}

broken=0
checked=0
for file in "${files[@]}"; do
    dir="$(dirname "$file")"
    while IFS=$'\t' read -r line target; do
        case "$target" in
            http://* | https://* | mailto:*) continue ;;
        esac
        checked=$((checked + 1))
        path="${target%%#*}"
        anchor=""
        [[ $target == *"#"* ]] && anchor="${target#*#}"
        if [[ -z $path ]]; then
            resolved="$file"
        else
            resolved="$dir/$path"
        fi
        why=""
        if [[ ! -e $resolved ]]; then
            why="no such file"
        elif [[ $(realpath "$resolved") != "$root" && $(realpath "$resolved") != "$root"/* ]]; then
            why="outside the repository"
        # grep reads to the end (no -q): quitting at the first match broke the
        # pipe under pipefail, and a long file's heading then read as missing.
        elif [[ -n $anchor ]] && ! anchors "$resolved" | grep -xF -- "$anchor" >/dev/null; then
            why="no heading #$anchor in $resolved"
        fi
        if [[ -n $why ]]; then
            echo "$file:$line: $target: $why"
            broken=$((broken + 1))
        fi
    done < <(links "$file")
done
echo "check-links: $checked relative links in ${#files[@]} files, $broken broken"
((broken == 0))
