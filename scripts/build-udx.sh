#!/usr/bin/env bash
# Builds the patched UDX binding for linux-x64 from vendor/udx-native (see its
# README.md): the vendored udx-native 1.13.3 source, libudx included, with
# patches/rto-margin.patch applied in a scratch copy, compiled by Debian's gcc
# against the Node-API and libuv headers Debian's nodejs package installs
# (/usr/include/node). libuv itself is node's own: the addon links none.
#
#   scripts/build-udx.sh           write vendor/udx-native/prebuilds/linux-x64/udx-native.node
#   scripts/build-udx.sh --check   rebuild in a scratch dir and fail unless it matches the committed binary
#
# Built as a release (NDEBUG: no asserts, no libudx debug lines on stderr),
# like upstream prebuilds. Reproducible: fixed flags, no debug info, build
# paths mapped away, so the same compiler and headers give the same bytes.
# CC and NODE_INCLUDE override the compiler and the headers.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/vendor/udx-native
out=$src/prebuilds/linux-x64/udx-native.node
cc=${CC:-gcc}
include=${NODE_INCLUDE:-/usr/include/node}

check=0
case "${1:-}" in
  '') ;;
  --check) check=1 ;;
  *) echo "usage: scripts/build-udx.sh [--check]" >&2; exit 2 ;;
esac

if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
  echo "build-udx: builds the linux-x64 binary only (this is $(uname -s)-$(uname -m))" >&2
  exit 1
fi
for h in node_api.h uv.h; do
  if [ ! -f "$include/$h" ]; then
    echo "build-udx: $include/$h not found: install Debian's nodejs headers (apt-get install nodejs) or set NODE_INCLUDE" >&2
    exit 1
  fi
done
command -v "$cc" >/dev/null || { echo "build-udx: $cc not found: apt-get install gcc" >&2; exit 1; }
command -v patch >/dev/null || { echo "build-udx: patch not found: apt-get install patch" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work=$tmp/udx-native
mkdir -p "$work"
cp -R "$src/binding.c" "$src/macros.h" "$src/vendor" "$work/"
patch --quiet -p1 -d "$work" < "$src/patches/rto-margin.patch"

built=$tmp/udx-native.node
(
  cd "$work"
  "$cc" -std=gnu99 -O2 -fPIC -shared -fvisibility=hidden \
    -ffile-prefix-map="$work"=udx-native -DNAPI_VERSION=8 -DNDEBUG \
    -I"$include" -Ivendor/libudx/include \
    binding.c vendor/libudx/src/cirbuf.c vendor/libudx/src/endian.c vendor/libudx/src/queue.c \
    vendor/libudx/src/udx.c vendor/libudx/src/io_posix.c \
    -lm -Wl,--build-id=sha1 -o "$built"
)

if [ "$check" = 1 ]; then
  if cmp -s "$built" "$out"; then
    echo "build-udx: $out matches a fresh build ($(sha256sum "$built" | cut -c1-16))"
  else
    echo "build-udx: $out differs from a fresh build ($("$cc" --version | head -1)): rebuild with scripts/build-udx.sh and commit it" >&2
    exit 1
  fi
else
  mkdir -p "$(dirname "$out")"
  cp "$built" "$out"
  echo "build-udx: wrote $out ($(sha256sum "$out" | cut -c1-16), $("$cc" --version | head -1))"
fi
