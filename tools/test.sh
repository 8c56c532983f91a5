#!/usr/bin/env bash
# Builds graft and runs the whole Catch2 suite with meson test; ends with "N passed, N failed".
# Usage: tools/test.sh [--sanitize]   (--sanitize: a separate ASan+UBSan debug build)
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh || exit 1
[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"
builddir=${GRAFT_BUILDDIR:-build}
opts=(-Dbuildtype=release)
# With nvcc present the CUDA backend must build (a compile error fails CI instead of silently
# dropping the backend); without it the build is CPU-only.
command -v nvcc >/dev/null && opts+=(-Dcuda=enabled)
if [ "${1:-}" = "--sanitize" ]; then
  builddir=${GRAFT_BUILDDIR:-build-asan}
  # CUDA device code cannot run here and nvcc does not take the sanitizer flags: leave it out.
  opts=(-Dbuildtype=debugoptimized -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled)
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
if [ ! -f "$builddir/build.ninja" ]; then
  meson setup "$builddir" "${opts[@]}" >/dev/null || { echo "0 passed, 1 failed"; exit 1; }
fi
ninja -C "$builddir" || { echo "0 passed, 1 failed"; exit 1; }
log=$(mktemp)
meson test -C "$builddir" --num-processes "$(nproc)" --print-errorlogs 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
ok=$(grep -E '^Ok:' "$log" | awk '{print $2}')
fail=$(grep -E '^Fail:' "$log" | awk '{print $2}')
skip=$(grep -E '^Skipped:' "$log" | awk '{print $2}')
timeout=$(grep -E '^Timeout:' "$log" | awk '{print $2}')
rm -f "$log"
fail=$(( ${fail:-0} + ${timeout:-0} ))
[ -z "$ok" ] && { ok=0; [ "$rc" != 0 ] && fail=$(( fail > 0 ? fail : 1 )); }
if [ "${skip:-0}" -gt 0 ]; then
  echo "${ok} passed, ${fail} failed, ${skip} skipped"
else
  echo "${ok} passed, ${fail} failed"
fi
exit "$rc"
