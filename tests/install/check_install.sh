#!/usr/bin/env bash
# Installs the build into a temporary root, then compiles and runs an outside program with
# `pkg-config --cflags --libs graft`, exactly as the README tells users to.
set -euo pipefail
builddir=$1 srcdir=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
meson install -C "$builddir" --destdir "$root" --no-rebuild --quiet
pc=$(find "$root" -name graft.pc | head -n 1)
[ -n "$pc" ] || { echo "graft.pc was not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root
flags=$(pkg-config --cflags --libs graft)
echo "pkg-config --cflags --libs graft: $flags"
libgraft=$(find "$root" -name 'libgraft.so' | head -n 1)
extra=""
# A sanitizer build of libgraft needs the sanitizer runtimes in the program too.
readelf -d "$libgraft" | grep -q 'libasan' && extra="-fsanitize=address,undefined"
g++ -std=c++20 $extra "$srcdir/tests/install/outside_program.cpp" $flags -o "$root/outside_program"
libdir=$(dirname "$(find "$root" -name 'libgraft.so*' | head -n 1)")
LD_LIBRARY_PATH=$libdir "$root/outside_program"
