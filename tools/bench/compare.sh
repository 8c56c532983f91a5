#!/usr/bin/env bash
# Builds graft and the libtorch reference against two anchors, runs them alternately (graft,
# libtorch 2.x, libtorch 1.13, graft, ...) so all see the same machine state, and prints one table:
# workload, graft, each anchor with graft's ratio to it, and the roofline (the fraction of the
# machine's measured matmul rate or memory bandwidth that graft's figure reaches).
#
# Anchors:
#   libtorch 2.x  the `torch` wheel from PyPI (MKL, oneDNN 3.x), in a venv cached at
#                 $builddir/torch-venv; its C++ API is site-packages/torch/{include,lib}
#                 (C++20, _GLIBCXX_USE_CXX11_ABI=1). Skipped with a note when PyPI is unreachable.
#   libtorch 1.13 Debian's libtorch-dev (OpenBLAS). When OpenBLAS picks a generic core on a CPU
#                 with AVX-512 or AVX2, OPENBLAS_CORETYPE names the right one for its runs.
#   python        with COMPARE_PYTHON=1, tools/bench/pytorch_reference.py --device cpu in the same
#                 venv (PyTorch's Python overhead included) as a last column.
#
# Usage: tools/bench/compare.sh [rounds=3] [extra args for every program, e.g. --filter mlp]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
shift || true
bash tools/deps.sh
builddir=${GRAFT_BENCH_BUILDDIR:-build-bench}
mkdir -p "$builddir"

# ---- libtorch 1.13 (Debian) ----
have13=1
if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtorch-dev libopenblas0-pthread >/dev/null || have13=0
  else
    echo "compare.sh: no libtorch 1.13 column (apt-get install -y libtorch-dev libopenblas0-pthread)" >&2
    have13=0
  fi
fi
opt13=disabled
[ "$have13" = 1 ] && opt13=enabled
if [ ! -f "$builddir/build.ninja" ]; then
  # The anchors run on the CPU: the CUDA backend would only lengthen the build.
  meson setup "$builddir" -Dbuildtype=release -Dlibtorch_bench=$opt13 -Dtests=false -Dcuda=disabled >/dev/null
fi
targets=(tools/graft)
[ "$have13" = 1 ] && targets+=(tools/libtorch_reference)
if ! ninja -C "$builddir" "${targets[@]}" > "$builddir/compare-build.log" 2>&1; then
  tail -n 30 "$builddir/compare-build.log" >&2
  echo "compare.sh: the build failed (full log: $builddir/compare-build.log)" >&2
  exit 1
fi

# ---- libtorch 2.x (PyPI) ----
venv=$builddir/torch-venv
ref2=$builddir/libtorch2_reference
have2=1
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "compare.sh: installing the torch wheel from PyPI into $venv (once; about 5 GB)" >&2
  { python3 -m venv "$venv" && "$venv/bin/pip" install -q torch numpy; } >&2 || have2=0
fi
if [ "$have2" = 1 ]; then
  tdir=$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))")
  if [ ! -x "$ref2" ] || [ tools/bench/libtorch_reference.cpp -nt "$ref2" ] || [ tools/bench/bench_stats.h -nt "$ref2" ]; then
    echo "compare.sh: building $ref2 against $tdir" >&2
    g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 -w -I. -I"$tdir/include" \
      -I"$tdir/include/torch/csrc/api/include" tools/bench/libtorch_reference.cpp -o "$ref2" \
      -L"$tdir/lib" -Wl,-rpath,"$tdir/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 || have2=0
  fi
else
  echo "compare.sh: no libtorch 2.x column (pip install torch failed: is PyPI reachable?)" >&2
fi
havepy=0
[ "$have2" = 1 ] && [ "${COMPARE_PYTHON:-0}" = 1 ] && havepy=1

# ---- OpenBLAS's core for libtorch 1.13 ----
ref13=$builddir/tools/libtorch_reference
core13=""
if [ "$have13" = 1 ]; then
  core13=$(OPENBLAS_VERBOSE=2 "$ref13" --filter '^matmul1024$' --repeat 1 2>&1 | sed -n 's/^Core: *//p' | head -1)
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  want=""
  case "$core13" in
    Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai|Coppermine|Northwood|Banias|Opteron|Barcelona|"")
      if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* ]]; then want=SkylakeX
      elif [[ " $flags " == *" avx2 "* ]]; then want=Haswell; fi ;;
  esac
  if [ -n "$want" ] && [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    echo "compare.sh: OpenBLAS chose the generic core '${core13:-?}' on a CPU with $( [ $want = SkylakeX ] && echo AVX-512 || echo AVX2 ); libtorch 1.13 runs with OPENBLAS_CORETYPE=$want" >&2
    core13="$want (OPENBLAS_CORETYPE; detected ${core13:-?})"
    export OPENBLAS_CORETYPE=$want
  fi
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
{
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
  echo "graft: $("$builddir/tools/graft" info | grep -i -m1 -E '^graft|version' || true)"
  [ "$have2" = 1 ] && echo "libtorch 2.x: $("$ref2" --about)"
  [ "$have13" = 1 ] && echo "libtorch 1.13: $("$ref13" --about), OpenBLAS core ${core13:-?}"
  [ "$havepy" = 1 ] && echo "python: torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') (pytorch_reference.py --device cpu)"
} > "$out/header"
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds: graft" >&2
  "$builddir/tools/graft" bench --json "$out/graft_$r.json" "$@" >&2
  if [ "$have2" = 1 ]; then
    echo "round $r/$rounds: libtorch 2.x" >&2
    "$ref2" --json "$out/torch2_$r.json" "$@" >&2
  fi
  if [ "$have13" = 1 ]; then
    echo "round $r/$rounds: libtorch 1.13" >&2
    "$ref13" --json "$out/torch13_$r.json" "$@" >&2
  fi
  if [ "$havepy" = 1 ]; then
    echo "round $r/$rounds: python" >&2
    "$venv/bin/python" tools/bench/pytorch_reference.py --device cpu --json "$out/python_$r.json" "$@" >&2
  fi
done
cat "$out/header"
python3 - "$out" "$rounds" "$have2" "$have13" "$havepy" <<'PY'
import json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
have = {"torch2": sys.argv[3] == "1", "torch13": sys.argv[4] == "1", "python": sys.argv[5] == "1"}
def load(prefix):
    figs = {}
    for r in range(1, rounds + 1):
        path = f"{out}/{prefix}_{r}.json"
        if not os.path.exists(path):
            continue
        for name, f in json.load(open(path)).items():
            figs.setdefault(name, (f["unit"], []))[1].append(f["value"])
    return {k: (u, statistics.median(v)) for k, (u, v) in figs.items()}
g = load("graft")
cols = [(k, label, load(k)) for k, label in (("torch2", "libtorch 2.x"), ("torch13", "libtorch 1.13"),
                                            ("python", "python")) if have[k]]

# Work per figure, from the workloads' shapes (tools/bench/graft_workloads.cpp). A GEMM of
# [m, k] x [k, n] is 2mkn FLOP; a convolution is 2 x (output elements) x (Cin x kh x kw); backward
# computes dW for every layer and dX for every layer but the first (its input needs no grad).
def mlp_macs(batch, dims):
    fwd = sum(a * b for a, b in zip(dims, dims[1:])) * batch
    return fwd + 2 * fwd - batch * dims[0] * dims[1]
mlp = 2 * mlp_macs(128, [784, 512, 512, 10])                  # mlp_step: one step
conv1, conv2 = 64 * 32 * 28 * 28 * 9, 64 * 64 * 14 * 14 * 32 * 9
fc = 64 * 3136 * 128 + 64 * 128 * 10
cnn = 2 * (conv1 + conv2 + fc + conv1 + 2 * conv2 + 2 * fc)   # conv1 needs dW only
deep = 2 * (3 * 64 * 256 * 1024 * 1024 - 256 * 1024 * 1024)  # 64 x Linear 1024, batch 256
epoch = 2 * mlp_macs(60000, [784, 256, 10])                    # 60000 samples, 784-256-10
work = {  # name: (kind, amount per unit of the figure's own time)
    "mlp_step_ms": ("flop", mlp), "cnn_step_ms": ("flop", cnn), "cnn_channels_last_step_ms": ("flop", cnn), "deep_mlp_step_ms": ("flop", deep),
    "train_mlp_epoch_s": ("flop", epoch), "matmul1024_gflops": ("rate", "flop"),
    "elementwise_add_gbps": ("rate", "byte"),
}
rates = [c[2].get("matmul1024_gflops", (0, 0))[1] for c in cols] + [g.get("matmul1024_gflops", (0, 0))[1]]
peak_flops = max(rates) * 1e9 if max(rates) > 0 else None
bw = g.get("stream_triad_gbps", (None, None))[1]
peak_bytes = bw * 1e9 if bw else None
if peak_flops:
    print(f"roofline: matmul {peak_flops / 1e9:.0f} GFLOP/s (best matmul1024 of the columns)"
          + (f", memory {bw:.1f} GB/s (graft bench's stream_triad_gbps)" if bw else ""))
def roofline(name, unit, v):
    if name not in work:
        return "-"
    kind, amount = work[name]
    if kind == "rate":
        peak = peak_flops if amount == "flop" else peak_bytes
        return f"{v * 1e9 / peak:.0%}" if peak else "-"
    seconds = v / 1000 if unit == "ms" else v
    return f"{amount / seconds / peak_flops:.0%}" if peak_flops else "-"

head = f"{'workload':<30} {'graft':>10}"
for _, label, _ in cols:
    head += f" {label:>13} {'ratio':>6}"
print(head + f" {'roofline':>8}  unit")
for name, (unit, gv) in g.items():
    row = f"{name:<30} {gv:>10.4g}"
    for _, _, t in cols:
        tv = t.get(name, (unit, None))[1]
        row += f" {tv:>13.4g} {gv / tv:>6.2f}" if tv else f" {'-':>13} {'-':>6}"
    print(row + f" {roofline(name, unit, gv):>8}  {unit}")
for key, label, t in cols:
    mm = t.get("matmul1024_gflops", (None, None))[1]
    if mm is not None and mm < 50:
        print(f"\n{label}'s matmul is below 50 GFLOP/s: it is using a reference or generic BLAS core; "
              "the comparison flatters graft.")
print(f"\nratio = graft / anchor, medians over {rounds} alternating rounds; lower is better for ms/s/us, "
      "higher for GFLOP/s and GB/s. roofline: graft's FLOP rate (from the shapes) over the matmul rate, "
      "or its bandwidth over the memory bandwidth.")
PY
