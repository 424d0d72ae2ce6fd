#!/usr/bin/env bash
# Shardlight's one set-up script: installs what is missing, builds, then runs what you ask for.
#
#   tools/setup.sh demo [train args...]   set up, build, run the main job: the Fashion-MNIST CNN
#                                         with --strategy zero2 on 2 ranks (mpirun)
#   tools/setup.sh test [meson test args] set up, build, run the whole test suite
#   tools/setup.sh build                  set up and build only
#
# On Debian 12 run as root (or with sudo available): the apt packages below are installed only
# when missing. Environment:
#   SL_BUILD_DIR    build folder (default: build, relative to the source root)
#   SL_MESON_ARGS   extra `meson setup` arguments for a new build folder (e.g. -Dcuda=disabled)
#   SL_JOBS         ninja's parallel jobs (default: ninja's own choice)
#   SL_SKIP_APT=1   never call apt (fail later if something is missing)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build_dir="${SL_BUILD_DIR:-build}"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac

# Everything the build, the tests and the demo need, as Debian 12 package names.
packages=(
  meson ninja-build g++ pkg-config
  doctest-dev libeigen3-dev libopenblas-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist wordnet-base espeak-ng
  clang libclang-rt-14-dev
)

log() { printf '[setup] %s\n' "$*" >&2; }

missing_packages() {
  local p status
  for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || printf '%s\n' "$p"
  done
}

install_missing() {
  if [[ "${SL_SKIP_APT:-0}" == 1 ]]; then
    log "SL_SKIP_APT=1: not checking packages"
    return
  fi
  if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    log "no dpkg/apt here: install by hand: ${packages[*]}"
    return
  fi
  local missing
  mapfile -t missing < <(missing_packages)
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "all packages present"
    return
  fi
  log "installing: ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      log "error: not root and no sudo; install these packages: ${missing[*]}"
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure_and_build() {
  if [[ ! -f "$build_dir/build.ninja" ]]; then
    log "configuring $build_dir"
    # shellcheck disable=SC2086  # SL_MESON_ARGS is a list of words on purpose
    meson setup "$build_dir" "$root" ${SL_MESON_ARGS:-}
  fi
  log "building $build_dir"
  local jobs=()
  [[ -n "${SL_JOBS:-}" ]] && jobs=(-j "$SL_JOBS")
  ninja -C "$build_dir" "${jobs[@]}"
}

# Open MPI refuses to start as root unless told; the tests launch `mpirun` for multi-rank cases.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

action="${1:-build}"
[[ $# -gt 0 ]] && shift
case "$action" in
  build)
    install_missing
    configure_and_build
    ;;
  demo)
    install_missing
    configure_and_build
    # The main job: 2 ranks under mpirun, ZeRO-2, one thread per rank (2 ranks share the cores).
    # SL_DEMO_RANKS changes the rank count; later arguments override the defaults below.
    ranks="${SL_DEMO_RANKS:-2}"
    log "running: mpirun -np $ranks sl_train --model cnn --strategy zero2 $*"
    SL_NUM_THREADS="${SL_NUM_THREADS:-1}" exec mpirun -np "$ranks" --oversubscribe \
      "$build_dir/tools/sl_train" --model cnn --strategy zero2 "$@"
    ;;
  test)
    install_missing
    configure_and_build
    exec meson test -C "$build_dir" --print-errorlogs "$@"
    ;;
  -h | --help | help)
    sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    ;;
  *)
    log "unknown action '$action' (expected build, demo or test)"
    exit 2
    ;;
esac
