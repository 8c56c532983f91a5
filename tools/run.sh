#!/usr/bin/env bash
# The main job: install what is missing (the Fashion-MNIST data set too), configure, build, and
# train the default model (an MLP, 1 epoch), printing its test accuracy.
# Usage: tools/run.sh [graft arguments...]   (default: `graft info` then `graft train`)
set -euo pipefail
cd "$(dirname "$0")/.."
GRAFT_WITH_DATA=1 bash tools/deps.sh
source tools/build_common.sh
builddir=${GRAFT_BUILDDIR:-build}
graft_configure "$builddir" release
ninja -C "$builddir" tools/graft >/dev/null
if [ $# -gt 0 ]; then
  exec "$builddir/tools/graft" "$@"
fi
"$builddir/tools/graft" info
echo
"$builddir/tools/graft" train
