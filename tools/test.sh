#!/usr/bin/env bash
# Builds graft and runs the whole Catch2 suite with meson test; ends with "N passed, N failed".
# Usage: tools/test.sh [--sanitize]   (--sanitize: a separate ASan+UBSan debug build)
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh || exit 1
source tools/build_common.sh
builddir=${GRAFT_BUILDDIR:-build}
flavour=release
if [ "${1:-}" = "--sanitize" ]; then
  builddir=${GRAFT_BUILDDIR:-build-asan}
  flavour=sanitize
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
graft_configure "$builddir" "$flavour" || { echo "0 passed, 1 failed"; exit 1; }
ninja -C "$builddir" || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
meson test -C "$builddir" --num-processes "$(nproc)" --print-errorlogs 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
graft_summary "$log" "$rc"
rm -f "$log"
exit "$rc"
