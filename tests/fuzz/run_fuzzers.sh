#!/usr/bin/env bash
# Builds and runs the libFuzzer targets for the safetensors and IDX parsers.
#
#   tests/fuzz/run_fuzzers.sh [SECONDS] [BUILD_DIR]
#
# SECONDS: how long each fuzzer runs (default 20). BUILD_DIR: a meson build of graft made with
# g++ (default: build-h7b, else the first build*/ holding libgraft.so); its libgraft.so is built
# first unless GRAFT_FUZZ_SKIP_LIB_BUILD=1 (then the existing one is used as is).
#
# How the targets are built: the parser sources (nn/safetensors.cpp, data/idx_reader.cpp) and the
# target are compiled with clang++ -fsanitize=fuzzer,address,undefined, so the parsers get
# coverage feedback and ASan/UBSan checks; the rest of graft (tensor factories, runtime) comes
# from the g++-built libgraft.so, which is ABI-compatible (both use libstdc++). Building all of
# libgraft with clang would also work but takes far longer and needs oneDNN/OpenMP flags.
# The executable's own (instrumented) parser definitions take precedence over libgraft's.
#
# Exits non-zero if a fuzzer finds a crash, leak, sanitizer error or timeout; crash inputs are
# left in $WORK (printed) as crash-*/leak-*/timeout-* files.
set -euo pipefail

SECONDS_EACH="${1:-20}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${2:-}"
if [[ -z "$BUILD" ]]; then
  if [[ -d "$ROOT/build-h7b" ]]; then BUILD="$ROOT/build-h7b"; else
    BUILD="$(ls -d "$ROOT"/build*/ 2>/dev/null | head -1)"; BUILD="${BUILD%/}"; fi
fi
[[ -n "$BUILD" && -f "$BUILD/build.ninja" ]] || { echo "no meson build dir found (meson setup build -Dcuda=disabled)" >&2; exit 2; }
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"

CLANG_RT_FUZZER="$(ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null | head -1 || true)"
if ! command -v clang++ >/dev/null || [[ -z "$CLANG_RT_FUZZER" ]]; then
  if [[ "$(id -u)" == 0 ]]; then
    apt-get install -y clang libclang-rt-14-dev
  else
    echo "clang++ with libFuzzer is missing: run (as root) apt-get install -y clang libclang-rt-14-dev" >&2; exit 2
  fi
fi

if [[ "${GRAFT_FUZZ_SKIP_LIB_BUILD:-0}" == 1 && -f "$BUILD/libgraft.so" ]]; then
  echo "== using the existing $BUILD/libgraft.so (GRAFT_FUZZ_SKIP_LIB_BUILD=1)"
else
  echo "== building libgraft in $BUILD"
  if ! ninja -C "$BUILD" libgraft.so >/dev/null; then
    [[ -f "$BUILD/libgraft.so" ]] || { echo "building libgraft.so failed" >&2; exit 2; }
    echo "!! ninja failed; using the existing $BUILD/libgraft.so (only the runtime is taken from it)" >&2
  fi
fi

WORK="$(mktemp -d /tmp/graft_fuzz_run_XXXXXX)"
echo "== work dir: $WORK"
CXXFLAGS=(-std=c++20 -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined
          -fno-sanitize-recover=undefined -I"$ROOT" -I"$BUILD" -I"$ROOT/tests/fuzz")
LDFLAGS=(-L"$BUILD" -lgraft -Wl,-rpath,"$BUILD" -lz)

build_target() {  # name sources...
  local name="$1"; shift
  clang++ "${CXXFLAGS[@]}" "$@" "$ROOT/tests/fuzz/$name.cpp" -o "$WORK/$name" "${LDFLAGS[@]}"
}
echo "== compiling fuzz targets with clang++"
build_target fuzz_safetensors "$ROOT/nn/safetensors.cpp"
build_target fuzz_idx "$ROOT/data/idx_reader.cpp"

status=0
run_target() {  # name corpus-dir
  local name="$1" seeds="$2"
  local corpus="$WORK/corpus_$name"
  mkdir -p "$corpus" && cp "$seeds"/* "$corpus"/
  echo "== running $name for ${SECONDS_EACH}s"
  # detect_leaks: a loader must not leak on any path. ASAN_OPTIONS halt on the first error.
  if ! (cd "$WORK" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "./$name" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
                  -print_final_stats=1 "$corpus" > "$WORK/$name.log" 2>&1); then
    echo "!! $name FAILED; see $WORK/$name.log and the crash-*/leak-*/timeout-* inputs in $WORK" >&2
    tail -40 "$WORK/$name.log" >&2
    status=1
  else
    grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" "$WORK/$name.log" | tail -2 || true
    echo "   $name: no crash"
  fi
}
run_target fuzz_safetensors "$ROOT/tests/fuzz/corpus_safetensors"
run_target fuzz_idx "$ROOT/tests/fuzz/corpus_idx"

if [[ $status == 0 ]]; then rm -rf "$WORK"; echo "== all fuzzers clean"; fi
exit $status
