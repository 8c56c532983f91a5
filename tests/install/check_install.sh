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

# graft-dist.pc (only when graft was built with Open MPI): an outside program that links
# libgraft_dist.so and runs with no LD_LIBRARY_PATH. Its own rpath names only the directory of
# libgraft_dist.so; libgraft_dist.so finds libgraft.so through its RUNPATH ($ORIGIN).
dist_pc=$(find "$root" -name graft-dist.pc | head -n 1)
if libdist=$(find "$root" -name 'libgraft_dist.so' | head -n 1) && [ -n "$libdist" ]; then
  [ -n "$dist_pc" ] || { echo "libgraft_dist.so is installed without graft-dist.pc"; exit 1; }
  readelf -d "$libdist" | grep -E 'RUNPATH|RPATH' | grep -q '\$ORIGIN' ||
    { echo "libgraft_dist.so has no \$ORIGIN RUNPATH:"; readelf -d "$libdist" | grep -E 'RUNPATH|RPATH'; exit 1; }
  dflags=$(pkg-config --cflags --libs graft-dist)
  echo "pkg-config --cflags --libs graft-dist: $dflags"
  g++ -std=c++20 $extra "$srcdir/tests/install/outside_dist_program.cpp" $dflags \
    -Wl,--as-needed -Wl,-rpath,"$(dirname "$libdist")" -o "$root/outside_dist_program"
  env -u LD_LIBRARY_PATH "$root/outside_dist_program"
else
  echo "graft was built without Open MPI: no libgraft_dist.so to check"
fi
