#!/usr/bin/env bash
# The GPU check, in two halves (see issue 8 and the device machine's notes):
#
#   tools/gpu_check.sh          HERE (no GPU needed): builds a release tree with CUDA, collects the
#                               CUDA test binaries, tools/graft and the non-system shared libraries
#                               they need into gpu_bundle/ (git-ignored; one stripped, xz-compressed
#                               tarball, small enough for the device tool's `carry`).
#   tools/gpu_check.sh --run    THERE, from the repository root on the GPU machine, with gpu_bundle/
#                               carried: runs the CUDA tests (with a world-size-1 NCCL all-reduce
#                               when dist/ was built with NCCL), `graft bench --device cuda` and
#                               tools/bench/pytorch_reference.py, and prints a side-by-side table.
#                               Everything lands in $OUT (or ./gpu_check_out). The whole run keeps
#                               to a time budget (GPU_CHECK_BUDGET_S, default 450 s) with a
#                               timeout per step. `--run --steps bench,torch` reruns some steps;
#                               `--run --steps reduced` runs only the bfloat16/float16 cases of
#                               the CPU-vs-CUDA harness (Catch tag [reduced]), a step capped at 200 s.
#
# Environment for the first half: GRAFT_GPU_BUILDDIR (default build-gpu), GRAFT_GPU_JOBS (ninja -j,
# default 1: the development machine is shared).
set -uo pipefail
cd "$(dirname "$0")/.."

# Build outputs that the device machine needs, relative to the build directory.
BINARIES=(tools/graft tests/cuda_test_cuda_op_coverage tests/cuda_test_cuda_vs_cpu
          tests/cuda_test_cuda_graph_features tests/cuda_test_caching_allocator
          tests/autograd_test_save_on_cpu_cuda)
# Built only when dist/ found MPI and the CUDA build found NCCL; bundled when the build has it.
NCCL_TEST=tests/dist_test_nccl_world1
BUNDLE=gpu_bundle
TARBALL=$BUNDLE/graft_gpu.tar.xz

# ------------------------------------------------------------------------------------------------
# HERE: build and bundle
# ------------------------------------------------------------------------------------------------
make_bundle() {
  set -e
  local builddir=${GRAFT_GPU_BUILDDIR:-build-gpu}
  export PATH=/usr/local/cuda/bin:$PATH
  if [ ! -f "$builddir/build.ninja" ]; then
    meson setup "$builddir" -Dbuildtype=release -Dcuda=enabled
  fi
  grep -q "define GRAFT_HAVE_CUDA 1" "$builddir/graft_config.h" || {
    echo "gpu_check: $builddir is not configured with CUDA (-Dcuda=enabled)" >&2
    exit 1
  }
  local binaries=("${BINARIES[@]}")
  if ninja -C "$builddir" -t query "$NCCL_TEST" >/dev/null 2>&1; then
    binaries+=("$NCCL_TEST")
  else
    echo "gpu_check: $builddir has no $NCCL_TEST (dist/ built without MPI or NCCL): the NCCL step will not run" >&2
  fi
  ninja -C "$builddir" -j"${GRAFT_GPU_JOBS:-1}" "${binaries[@]}"

  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib/compat"
  for b in "${binaries[@]}"; do cp "$builddir/$b" "$stage/bin/"; done
  # Shared libraries: ours and those a CUDA machine image need not have. The C library, the
  # driver (libcuda) and cuBLAS (about 700 MB; the device machine's CUDA toolkit or PyTorch's
  # wheels have it) are left out. libstdc++/libgcc_s go to lib/compat, used there only when the
  # machine's own are older than the ones these binaries were linked against. NCCL (218 MB, 180
  # MB compressed: over carry's 64 MiB) is left out too; the target's CUDA or PyTorch has it.
  local libs
  libs=$(for b in "${binaries[@]}"; do ldd "$builddir/$b"; done | awk '/=> \//{print $3}' | sort -u)
  for l in $libs; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libcuda.so*|libcublas*|libz.so*|libnccl.so*) ;;
      libstdc++.so*|libgcc_s.so*) cp -L "$l" "$stage/lib/compat/" ;;
      *) cp -L "$l" "$stage/lib/" ;;
    esac
  done
  chmod u+w "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/compat/* 2>/dev/null || true
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/compat/* 2>/dev/null || true
  {
    echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), from $builddir"
    echo "needs from the target: glibc >= $(objdump -T "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null |
      grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1), libcuda (driver), libcublas.so.13, libcublasLt.so.13, libz.so.1, libnccl.so.2 (the NCCL test only)"
    echo "files:"
    (cd "$stage" && find . -type f -printf '%8k KiB  %p\n' | sort -k3)
  } > "$stage/MANIFEST"
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE"
  tar -C "$stage" -cf - . | xz -T0 -6 > "$TARBALL"
  cp "$stage/MANIFEST" "$BUNDLE/MANIFEST"
  rm -rf "$stage"
  cat "$BUNDLE/MANIFEST"
  echo
  echo "bundle: $(du -k "$TARBALL" | cut -f1) KiB in $TARBALL ($(du -sk "$BUNDLE" | cut -f1) KiB with the manifest)"
  cat <<EOF
Run it on the lent GPU machine with the device tool:
  run(command="bash tools/gpu_check.sh --run", carry=["$BUNDLE"], timeout_s=540)
EOF
}

# ------------------------------------------------------------------------------------------------
# THERE: run
# ------------------------------------------------------------------------------------------------
START=$(date +%s)
BUDGET=${GPU_CHECK_BUDGET_S:-450}
RESULTS=()

remaining() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME CAP LOG CMD...: runs CMD with a timeout of min(CAP, what is left of the budget),
# appending its output to LOG (and to stdout), and records its exit status.
step() {
  local name=$1 cap=$2 log=$3
  shift 3
  local left t rc
  left=$(remaining)
  t=$((left < cap ? left : cap))
  if [ "$t" -lt 10 ]; then
    echo "== $name: not run, the time budget is spent" | tee -a "$log"
    RESULTS+=("$name: not run (budget)")
    return
  fi
  echo "== $name (timeout ${t}s)" | tee -a "$log"
  local t0=$SECONDS
  timeout -k 5 "$t" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  local verdict
  case $rc in
    0) verdict=passed ;;
    77) verdict=SKIPPED ;;
    124|137) verdict="TIMED OUT" ;;
    *) verdict="FAILED (exit $rc)" ;;
  esac
  echo "== $name: $verdict in $((SECONDS - t0)) s" | tee -a "$log"
  RESULTS+=("$name: $verdict ($((SECONDS - t0)) s)")
}

# The directory holding library $1 (libcublas.so.13, libnccl.so.2) on this machine: the CUDA
# toolkit, the linker cache, or the NVIDIA wheels next to PyTorch.
find_lib() {
  local name=$1 d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-13*/lib64 \
           /usr/local/cuda-13*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -e "$d/$name" ] && { echo "$d"; return; }
  done
  d=$(ldconfig -p 2>/dev/null | awk -v n="$name" '$1 == n {print $NF; exit}')
  [ -n "$d" ] && { dirname "$d"; return; }
  python3 - "$name" <<'PY'
import glob, os, site, sys
roots = list(dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()] + sys.path))
for r in roots:
    hits = glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1] + "*"), recursive=True)
    if hits:
        print(os.path.dirname(hits[0]))
        break
PY
}

print_table() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return {}
g, t = load(sys.argv[1]), load(sys.argv[2])
higher = {"GFLOP/s", "TFLOP/s", "GB/s", "x"}
print(f"| {'workload':<30} | {'graft':>10} | {'PyTorch':>10} | {'graft/PyTorch':>13} | unit |")
print(f"|{'-' * 32}|{'-' * 12}|{'-' * 12}|{'-' * 15}|------|")
for name in list(g) + [n for n in t if n not in g]:
    gv, tv = g.get(name, {}).get("value"), t.get(name, {}).get("value")
    unit = (g.get(name) or t.get(name))["unit"]
    fmt = lambda v: f"{v:.4g}" if v is not None else "-"
    ratio = f"{gv / tv:.2f}" if gv is not None and tv else "-"
    print(f"| {name:<30} | {fmt(gv):>10} | {fmt(tv):>10} | {ratio:>13} | {unit} |")
print("\nmedians; graft/PyTorch above 1 is better for TFLOP/s, GB/s and x, below 1 for ms, s, us and MiB.")
PY
}

run_checks() {
  local steps="tests,bench,torch"
  while [ $# -gt 0 ]; do
    case $1 in
      --steps) steps=$2; shift 2 ;;
      *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
    esac
  done
  local out=${OUT:-$PWD/gpu_check_out}
  mkdir -p "$out"
  [ -f "$TARBALL" ] || { echo "gpu_check: $TARBALL is missing: carry $BUNDLE (run tools/gpu_check.sh here first)" >&2; exit 1; }
  # A fresh directory per run, removed at exit.
  BUNDLE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/graft_gpu_bundle.XXXXXX") || exit 1
  trap 'rm -rf "$BUNDLE_DIR"' EXIT
  local b=$BUNDLE_DIR
  if ! tar -C "$b" -xJf "$TARBALL" 2>/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$TARBALL" "$b" || exit 1
  fi
  local info=$out/info.txt gpu torchv
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  torchv=$(python3 -c 'import torch; print("torch", torch.__version__, "(CUDA", str(torch.version.cuda) + ")")' 2>/dev/null)
  {
    echo "GPU: ${gpu:-none found by nvidia-smi}"
    echo "PyTorch: ${torchv:-not importable}"
    head -2 "$b/MANIFEST"
  } | tee "$info"
  local cublas nccl
  cublas=$(find_lib libcublas.so.13)
  echo "cuBLAS from: ${cublas:-not found}" | tee -a "$info"
  nccl=$(find_lib libnccl.so.2)
  echo "NCCL from: ${nccl:-not found}" | tee -a "$info"
  # PyTorch keeps the machine's own library path: the bundled libcudart/libgomp are graft's.
  local torch_ld=${LD_LIBRARY_PATH:-}
  export LD_LIBRARY_PATH="$b/lib${cublas:+:$cublas}${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Prefer the machine's C++ runtime; fall back to the bundled one when it is too old.
  if ! "$b/bin/graft" info >/dev/null 2>"$out/ld_probe.txt"; then
    if grep -q "GLIBCXX\|CXXABI\|GCC_" "$out/ld_probe.txt"; then
      export LD_LIBRARY_PATH="$b/lib/compat:$LD_LIBRARY_PATH"
      echo "using the bundled libstdc++ (the machine's is older)" | tee -a "$info"
    fi
  fi
  rm -f "$out/ld_probe.txt"
  "$b/bin/graft" info 2>&1 | tee -a "$info"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

  if [[ ",$steps," == *",tests,"* ]]; then
    local log=$out/tests.log
    : > "$log"
    step "cuda/test_cuda_op_coverage" 60 "$log" "$b/bin/cuda_test_cuda_op_coverage"
    step "cuda/test_caching_allocator" 60 "$log" "$b/bin/cuda_test_caching_allocator"
    step "autograd/test_save_on_cpu_cuda" 60 "$log" "$b/bin/autograd_test_save_on_cpu_cuda"
    # A world-size-1 NcclProcessGroup: all-reduce, broadcast, all-gather and barrier through NCCL.
    if [ ! -x "$b/bin/dist_test_nccl_world1" ]; then
      echo "== dist/test_nccl_world1: not run, not in the bundle (dist/ built without MPI or NCCL)" | tee -a "$log"
      RESULTS+=("dist/test_nccl_world1: not run (not built)")
    elif [ -z "$nccl" ]; then
      echo "== dist/test_nccl_world1: not run, libnccl.so.2 not found on this machine" | tee -a "$log"
      RESULTS+=("dist/test_nccl_world1: not run (no libnccl.so.2)")
    else
      step "dist/test_nccl_world1" 60 "$log" env NCCL_DEBUG="${NCCL_DEBUG:-WARN}" "$b/bin/dist_test_nccl_world1"
    fi
    step "cuda/test_cuda_graph_features" 120 "$log" env GRAFT_EXE="$b/bin/graft" "$b/bin/cuda_test_cuda_graph_features"
    # The 16-bit cases first and on their own, so their verdict shows even if the table runs long.
    step "cuda/test_cuda_vs_cpu [reduced] (bf16, fp16)" 200 "$log" "$b/bin/cuda_test_cuda_vs_cpu" "[reduced]"
    step "cuda/test_cuda_vs_cpu" 200 "$log" "$b/bin/cuda_test_cuda_vs_cpu" "~[reduced]"
  elif [[ ",$steps," == *",reduced,"* ]]; then
    step "cuda/test_cuda_vs_cpu [reduced] (bf16, fp16)" 200 "$out/tests.log" "$b/bin/cuda_test_cuda_vs_cpu" "[reduced]"
  fi
  if [[ ",$steps," == *",bench,"* ]]; then
    step "graft bench --device cuda" 170 "$out/bench_graft.txt" "$b/bin/graft" bench --device cuda --json "$out/graft_cuda.json"
  fi
  if [[ ",$steps," == *",torch,"* ]]; then
    step "pytorch_reference.py" 140 "$out/bench_torch.txt" env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$torch_ld" \
      python3 tools/bench/pytorch_reference.py \
      --json "$out/torch_cuda.json"
  fi
  {
    echo
    echo "## GPU check: ${gpu:-no GPU}, ${torchv:-no PyTorch}, $(date -u +%F)"
    echo
    print_table "$out/graft_cuda.json" "$out/torch_cuda.json"
    echo
    for r in "${RESULTS[@]}"; do echo "- $r"; done
    echo "- total $(($(date +%s) - START)) s of a ${BUDGET} s budget"
  } | tee "$out/summary.md"
}

case ${1:-} in
  --run) shift; run_checks "$@" ;;
  "") make_bundle ;;
  -h|--help) sed -n '2,19p' "$0" ;;
  *) echo "usage: tools/gpu_check.sh [--run [--steps tests,reduced,bench,torch]]" >&2; exit 2 ;;
esac
