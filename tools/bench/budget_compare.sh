#!/usr/bin/env bash
# Training under a memory budget, graft against PyTorch (the `torch` wheel from PyPI, in a venv
# cached in the bench build directory): the deep MLP at 50%, 25% and 12% of plain's activation
# peak. graft plans with nn::plan_checkpoint; PyTorch's eager answer is the fastest
# checkpoint_sequential segment count whose peak fits. Runs the two alternately (A B A B ...) and
# prints one table of medians. Also graft's disk offload (deep_mlp_disk), prefetch off and K=2.
# Usage: tools/bench/budget_compare.sh [rounds=3]   (GRAFT_TORCH_PYTHON: use this python instead)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
bash tools/deps.sh
builddir=${GRAFT_BENCH_BUILDDIR:-build-bench}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$builddir" tools/graft >/dev/null
py=${GRAFT_TORCH_PYTHON:-$builddir/torch-venv/bin/python}
if ! "$py" -c "import torch" 2>/dev/null; then
  python3 -m venv "$builddir/torch-venv"
  "$builddir/torch-venv/bin/pip" install -q torch
  py=$builddir/torch-venv/bin/python
fi
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds: graft" >&2
  "$builddir/tools/graft" bench --filter '^deep_mlp_(budget|disk)$' --json "$out/graft_$r.json" >&2
  echo "round $r/$rounds: pytorch" >&2
  "$py" tools/bench/pytorch_budget.py --json "$out/torch_$r.json" 2>&1 | grep -v "USDT\|ERROR:.*gpuGetDeviceCount\|NumPy\|_conversion_method" >&2
done
python3 - "$out" "$rounds" "$("$py" -c 'import torch; print(torch.__version__)')" <<'PY'
import json, statistics, sys
out, rounds, version = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(prefix):
    figs = {}
    for r in range(1, rounds + 1):
        for name, f in json.load(open(f"{out}/{prefix}_{r}.json")).items():
            figs.setdefault(name, []).append(f["value"])
    return {k: statistics.median(v) for k, v in figs.items()}
g, t = load("graft"), load("torch")
def f(d, k, fmt="{:.0f}"):
    return fmt.format(d[k]) if k in d else "-"
print(f"deep MLP 64 x (Linear 1024 + Tanh), batch 256; medians of {rounds} alternating rounds; PyTorch {version}")
print(f"plain: graft {f(g, 'deep_mlp_budget_plain_peak_mib')} MiB, {f(g, 'deep_mlp_budget_plain_step_ms')} ms; "
      f"PyTorch {f(t, 'deep_mlp_budget_plain_peak_mib')} MiB, {f(t, 'deep_mlp_budget_plain_step_ms')} ms")
print()
print("| budget | graft plan: peak (predicted) | graft step (predicted) | graft best checkpoint_sequential | PyTorch best checkpoint_sequential |")
print("|---|---|---|---|---|")
for pct in (50, 25, 12):
    p = f"deep_mlp_budget_{pct}_"
    gb = f"{g[p + 'budget_mib']:.1f} MiB" if p + "budget_mib" in g else "-"
    tb = f"{t[p + 'budget_mib']:.1f} MiB" if p + "budget_mib" in t else "-"
    seq = f(g, p + "best_sequential_ms") + " ms" if p + "best_sequential_ms" in g else (
        f"none fits (lowest {g['deep_mlp_budget_25_sequential_lowest_peak_mib']:.0f} MiB, "
        f"{g['deep_mlp_budget_25_sequential_lowest_peak_step_ms']:.0f} ms)" if pct == 25 else "not swept")
    pt = (f"{tb}: {t[p + 'best_sequential_ms']:.0f} ms ({t[p + 'best_sequential_segments']:.0f} segments, "
          f"{t[p + 'best_sequential_peak_mib']:.0f} MiB)" if p + "best_sequential_ms" in t else
          f"{tb}: none fits (lowest {t['deep_mlp_budget_sequential_lowest_peak_mib']:.0f} MiB)")
    print(f"| {pct}% ({gb}) | {f(g, p + 'peak_mib')} MiB ({f(g, p + 'predicted_peak_mib')}) | "
          f"{f(g, p + 'step_ms')} ms ({f(g, p + 'predicted_step_ms')}) | {seq} | {pt} |")
print()
print("| all saved activations on disk (SaveOnDisk) | peak | step | vs plain |")
print("|---|---|---|---|")
print(f"| plain | {f(g, 'deep_mlp_disk_plain_peak_mib')} MiB | {f(g, 'deep_mlp_disk_plain_step_ms')} ms | 1.00x |")
for m, label in (("off", "prefetch off"), ("k2", "prefetch K=2")):
    print(f"| {label} | {f(g, f'deep_mlp_disk_{m}_peak_mib')} MiB | {f(g, f'deep_mlp_disk_{m}_step_ms')} ms | "
          f"{f(g, f'deep_mlp_disk_{m}_vs_plain', '{:.2f}')}x |")
PY
rm -rf "$out"
