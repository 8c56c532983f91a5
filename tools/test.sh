#!/usr/bin/env bash
# Builds graft and runs the whole Catch2 suite with meson test; ends with "N passed, N failed".
# Usage: tools/test.sh [--sanitize | --tsan]
#   --sanitize: a separate ASan+UBSan debug build (build-asan), the whole suite
#   --tsan:     a separate ThreadSanitizer build (build-tsan) of the library and the tests of meson
#               suite 'tsan' only (tsan_tests in tests/meson.build), with one OpenMP thread
set -uo pipefail
cd "$(dirname "$0")/.."
# Fashion-MNIST too (30 MB): the kill-and-resume test and the training samples run on it, and
# report SKIPPED without it.
GRAFT_WITH_DATA=${GRAFT_WITH_DATA:-1} bash tools/deps.sh || exit 1
source tools/build_common.sh
builddir=${GRAFT_BUILDDIR:-build}
flavour=release
test_args=()
if [ "${1:-}" = "--sanitize" ]; then
  builddir=${GRAFT_BUILDDIR:-build-asan}
  flavour=sanitize
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
elif [ "${1:-}" = "--tsan" ]; then
  builddir=${GRAFT_BUILDDIR:-build-tsan}
  flavour=tsan
  # libgomp is not instrumented: TSan cannot see its barriers, so a team of threads would report
  # races that are not there. One thread runs each parallel region on the caller.
  export OMP_NUM_THREADS=1
  # The first report ends the program with exit code 66, and meson counts it as a failure.
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:exitcode=66:second_deadlock_stack=1}
  test_args=(--suite tsan --no-rebuild)
fi
graft_configure "$builddir" "$flavour" || { echo "0 passed, 1 failed"; exit 1; }
targets=()
if [ "$flavour" = tsan ]; then
  # Only the suite's executables and what they link (libgraft), not the whole tree. Regenerate
  # first if meson.build changed, so that the introspected list is the current one.
  ninja -C "$builddir" build.ninja >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
  mapfile -t targets < <(meson introspect "$builddir" --tests | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "tsan" for s in t["suite"]):
        print(os.path.relpath(t["cmd"][0], sys.argv[1]))' "$builddir")
  [ ${#targets[@]} -gt 0 ] || { echo "no tests in suite tsan"; echo "0 passed, 1 failed"; exit 1; }
fi
ninja -C "$builddir" "${targets[@]}" || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
meson test -C "$builddir" --num-processes "$(nproc)" --print-errorlogs "${test_args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
graft_summary "$log" "$rc"
rm -f "$log"
exit "$rc"
