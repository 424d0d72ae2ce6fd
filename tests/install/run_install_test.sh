#!/usr/bin/env bash
# Installs the built library with DESTDIR into a temporary prefix, then builds and runs the README
# example against it using only `pkg-config --cflags --libs shardlight` (no path into the source
# or build tree), as a program outside the tree would. Also checks that the README's example is
# this file, word for word.
#
# usage: run_install_test.sh SOURCE_ROOT BUILD_ROOT "CXX [ARGS]" SANITIZE
set -euo pipefail
src="$1" build="$2" cxx="$3" sanitize="$4"

example="$src/tests/install/example.cpp"
readme="$src/README.md"
if [[ -f "$readme" ]]; then
  # the fenced block right after the marker line
  extracted="$(awk '/<!-- example: tests\/install\/example.cpp -->/ {found=1; next}
                    found && /^```/ { if (inblock) exit; inblock=1; next }
                    inblock { print }' "$readme")"
  if [[ "$extracted" != "$(cat "$example")" ]]; then
    echo "FAIL: README.md's example differs from tests/install/example.cpp:" >&2
    diff <(printf '%s\n' "$extracted") "$example" >&2 || true
    exit 1
  fi
  echo "README example matches tests/install/example.cpp"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$tmp/root" >/dev/null

pc="$(find "$tmp/root" -name shardlight.pc -print -quit)"
[[ -n "$pc" ]] || { echo "FAIL: no shardlight.pc installed" >&2; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$pc")"
prefix="$(pkg-config --variable=prefix shardlight)"
pcflags=(--define-variable=prefix="$tmp/root$prefix")
cflags="$(pkg-config "${pcflags[@]}" --cflags shardlight)"
libs="$(pkg-config "${pcflags[@]}" --libs shardlight)"
libdir="$(pkg-config "${pcflags[@]}" --variable=libdir shardlight)"
echo "pkg-config --cflags --libs shardlight: $cflags $libs"
case "$cflags $libs" in
  *"$src"* | *"$build"*) echo "FAIL: flags point into the source/build tree" >&2; exit 1 ;;
esac

extra=()
[[ "$sanitize" != none && -n "$sanitize" ]] && extra=(-fsanitize="$sanitize")
mkdir "$tmp/app" && cp "$example" "$tmp/app/main.cpp" && cd "$tmp/app"
# -Woverloaded-virtual: g++ 13 turns it on with -Wall (a user's build there failed on the loss
# modules' forward(input, target) hiding Module::forward); g++ 12 and clang check it only when asked
# shellcheck disable=SC2086  # cxx, cflags and libs are word lists
$cxx -std=c++20 -Wall -Wextra -Woverloaded-virtual -Werror "${extra[@]}" main.cpp -o app $cflags $libs
# meson test points LD_LIBRARY_PATH at the build tree; the app must load the installed copy
export LD_LIBRARY_PATH="$libdir"
resolved="$(ldd ./app | awk '/libshardlight/ {print $3}')"
[[ "$resolved" == "$libdir/"* ]] || { echo "FAIL: app loads '$resolved', not the install" >&2; exit 1; }
./app
echo "installed library: example built and ran"
