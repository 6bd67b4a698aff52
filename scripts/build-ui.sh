#!/usr/bin/env bash
# Builds the web console (GET /ui) from control/ui/src into control/ui/dist, which is
# committed: the control crate embeds dist/ with include_bytes!, so `cargo build` never
# needs Node. Run this after editing control/ui/src and commit dist/ with the sources;
# an end-to-end test (tests/e2e/console.rs) checks that dist/ is what this script builds.
#
#   scripts/build-ui.sh                  type-check (tsc), bundle (esbuild), copy into dist/
#   scripts/build-ui.sh --out DIR        the same into DIR (dist/ untouched)
#   scripts/build-ui.sh --install-only   only install the npm devDependencies
#
# The devDependencies (esbuild, typescript, and playwright-core for the browser test) are
# installed from control/ui/package-lock.json into control/ui/node_modules (ignored by git),
# once: a stamp holds the lock file's hash, so an unchanged lock costs nothing.
set -euo pipefail

usage() {
    echo "usage: scripts/build-ui.sh [--out DIR] [--install-only]"
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ui="$root/control/ui"
out="$ui/dist"
install_only=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            out="$2"
            shift 2
            ;;
        --install-only)
            install_only=1
            shift
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
done

log() { printf 'build-ui: %s\n' "$*"; }

for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        log "$tool is missing (scripts/install-deps.sh installs it)" >&2
        exit 1
    fi
done

modules="$ui/node_modules"
stamp="$modules/.stamp-package-lock"
sum="$(sha256sum "$ui/package-lock.json" | cut -d' ' -f1)"
if [[ -f $stamp && $(cat "$stamp") == "$sum" && -x $modules/.bin/esbuild ]]; then
    log "npm: devDependencies already installed"
else
    # --ignore-scripts: esbuild's binary comes as an optional dependency; its install
    # script only re-checks it.
    (cd "$ui" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error </dev/null)
    echo "$sum" >"$stamp"
    log "npm: installed devDependencies from package-lock.json"
fi
[[ $install_only == 1 ]] && exit 0

mkdir -p "$out"
"$modules/.bin/tsc" -p "$ui"
# From $ui: the bundle's comments name the sources relative to it, the same from anywhere.
(cd "$ui" && "$modules/.bin/esbuild" src/main.ts --bundle --format=iife --target=es2020 \
    --charset=utf8 --legal-comments=none --log-level=warning --outfile="$out/console.js")
cp "$ui/src/index.html" "$ui/src/console.css" "$ui/src/favicon.svg" "$out/"
log "built $(cd "$out" && wc -c index.html console.js console.css favicon.svg | tail -n 1 | awk '{print $1}') bytes into ${out#"$root"/}"
