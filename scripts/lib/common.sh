# shellcheck shell=bash
# Shared helpers for the TimeWarp scripts. Source this file; do not execute it.
#
#   tw_log / tw_warn / tw_die   messages on stderr
#   tw_section TITLE            a visible section header on stderr
#   tw_install_deps             install missing Debian packages (no-op when equipped)
#   tw_build_dir                the build directory (TIMEWARP_BUILD_DIR or <repo>/build)
#   tw_build [cmake args...]    configure with Ninja and build
#   tw_port_free PORT           true when nothing listens on PORT of 127.0.0.1
#   tw_free_port FROM LAST      print the first free port from FROM to LAST - 1
#
# Environment:
#   TIMEWARP_BUILD_DIR   build directory (relative paths are taken from the repo root)
#   TIMEWARP_JOBS        parallel build jobs (default 2)

if [[ -n "${TW_COMMON_SH_LOADED:-}" ]]; then
    return 0
fi
TW_COMMON_SH_LOADED=1

# Repository root, derived from this file's location (scripts/lib/common.sh).
TW_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export TW_REPO_ROOT

# Debian packages needed to build, test and run TimeWarp.
TW_DEB_PACKAGES=(
    build-essential cmake ninja-build pkg-config
    libboost-dev libboost-filesystem-dev libcli11-dev libspdlog-dev libfmt-dev
    libzstd-dev libsqlite3-dev libssl-dev libpq-dev libgtest-dev libgmock-dev nlohmann-json3-dev libfuse3-dev fuse3
    libcurl4-openssl-dev libpugixml-dev # objstore/: S3 requests signed by libcurl, XML answers
    postgresql postgresql-client systemd
    ceph-mon ceph-osd radosgw ceph-common curl # the one-node S3 gateway of the objstore tests (scripts/lib/ceph.sh)
    python3 python3-jsonschema # tests/integration/readme_tour_test.py checks each --json against its schema
    tzdata # the retention policy's calendar in a named time zone (retention_timezone)
    clang libclang-rt-dev # scripts/test's thread-safety stage (libFuzzer for its fuzz targets)
)

tw_log() { printf '[timewarp] %s\n' "$*" >&2; }
tw_warn() { printf '[timewarp] warning: %s\n' "$*" >&2; }
tw_die() {
    printf '[timewarp] error: %s\n' "$*" >&2
    exit 1
}

# A stage's banner, with the seconds since the script began (the log shows each stage's time).
tw_section() {
    printf '\n==== %s (at %d s) ====\n' "$*" "$SECONDS" >&2
}

# True when the Debian package $1 is installed (any "want" flag, state "installed").
tw_pkg_installed() {
    local status
    status="$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" || return 1
    [[ "$status" == *" installed" ]]
}

# Install whatever is missing from TW_DEB_PACKAGES. Does no apt work at all when
# everything is present; exits 1 with the list when packages are missing and we are
# not root.
tw_install_deps() {
    local missing=() pkg
    if ! command -v dpkg-query >/dev/null 2>&1; then
        tw_warn "dpkg-query not found: not a Debian system, skipping package checks"
        return 0
    fi
    for pkg in "${TW_DEB_PACKAGES[@]}"; do
        tw_pkg_installed "$pkg" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        tw_log "all required packages are installed"
        return 0
    fi
    if ((EUID != 0)); then
        printf '[timewarp] error: missing Debian packages: %s\n' "${missing[*]}" >&2
        printf '[timewarp] install them as root:\n  apt-get update && apt-get install -y %s\n' \
            "${missing[*]}" >&2
        exit 1
    fi
    tw_log "installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q || tw_die "apt-get update failed"
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        tw_die "apt-get install failed for: ${missing[*]}"
}

# True when nothing listens on TCP port $1 of 127.0.0.1 (or of the wildcard address).
tw_port_free() {
    local port="$1"
    if command -v ss >/dev/null 2>&1; then
        [[ -z "$(ss -Hltn "sport = :$port" 2>/dev/null)" ]] || return 1
    fi
    # Fallback (and double check): a successful connect means the port is taken.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        return 1
    fi
    return 0
}

# Print the first free port from $1 to $2 - 1 (status 1: none).
tw_free_port() {
    local port="$1" last="$2"
    while ((port < last)); do
        if tw_port_free "$port"; then
            printf '%s\n' "$port"
            return 0
        fi
        port=$((port + 1))
    done
    return 1
}

# Print the absolute build directory.
tw_build_dir() {
    local dir="${TIMEWARP_BUILD_DIR:-build}"
    [[ "$dir" == /* ]] || dir="$TW_REPO_ROOT/$dir"
    printf '%s\n' "$dir"
}

# Configure (Ninja, RelWithDebInfo unless overridden by a later -D) and build.
# Extra arguments go to the cmake configure step.
tw_build() {
    local dir jobs cache generator
    dir="$(tw_build_dir)"
    jobs="${TIMEWARP_JOBS:-2}"
    [[ -f "$TW_REPO_ROOT/CMakeLists.txt" ]] ||
        tw_die "no CMakeLists.txt in $TW_REPO_ROOT: nothing to build"

    # A build tree made with another generator cannot be reconfigured with Ninja.
    cache="$dir/CMakeCache.txt"
    if [[ -f "$cache" ]]; then
        generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$cache")"
        if [[ -n "$generator" && "$generator" != "Ninja" ]]; then
            tw_die "$dir was configured with '$generator', not Ninja; remove it or set TIMEWARP_BUILD_DIR"
        fi
    fi

    tw_log "configuring $dir"
    cmake -S "$TW_REPO_ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" ||
        tw_die "cmake configure failed"
    # TW_BUILD_TARGETS (space separated) limits the build to those targets.
    local targets=()
    if [[ -n "${TW_BUILD_TARGETS:-}" ]]; then
        read -r -a targets <<<"$TW_BUILD_TARGETS"
        targets=(--target "${targets[@]}")
    fi
    tw_log "building with -j$jobs ${targets[*]}"
    cmake --build "$dir" -j"$jobs" "${targets[@]}" || tw_die "build failed"
}
