#!/usr/bin/env bash
# Builds graft and the libtorch reference, runs them alternately (A B A B ...) so both see the same
# machine state, and prints one table: workload, graft, libtorch, ratio (graft / libtorch).
# Usage: tools/bench/compare.sh [rounds=3] [extra args for both, e.g. --filter mlp]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
shift || true
bash tools/deps.sh
if ! dpkg-query -W -f='${Status}' libtorch-dev 2>/dev/null | grep -q "install ok installed"; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libtorch-dev libopenblas0-pthread >/dev/null
  else
    echo "compare.sh: needs libtorch-dev: apt-get install -y libtorch-dev libopenblas0-pthread" >&2
    exit 1
  fi
fi
builddir=${GRAFT_BENCH_BUILDDIR:-build-bench}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir" -Dbuildtype=release -Dlibtorch_bench=enabled -Dtests=false >/dev/null
ninja -C "$builddir" tools/graft tools/libtorch_reference >/dev/null
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds: graft" >&2
  "$builddir/tools/graft" bench --json "$out/graft_$r.json" "$@" >&2
  echo "round $r/$rounds: libtorch" >&2
  "$builddir/tools/libtorch_reference" --json "$out/torch_$r.json" "$@" >&2
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def load(prefix):
    figs = {}
    for r in range(1, rounds + 1):
        for name, f in json.load(open(f"{out}/{prefix}_{r}.json")).items():
            figs.setdefault(name, (f["unit"], []))[1].append(f["value"])
    return {k: (u, statistics.median(v)) for k, (u, v) in figs.items()}
g, t = load("graft"), load("torch")
print(f"{'workload':<22} {'graft':>12} {'libtorch':>12} {'ratio':>8}  unit")
for name, (unit, gv) in g.items():
    tv = t.get(name, (unit, None))[1]
    ratio = f"{gv / tv:.2f}" if tv else "-"
    tvs = f"{tv:.4g}" if tv is not None else "-"
    print(f"{name:<22} {gv:>12.4g} {tvs:>12} {ratio:>8}  {unit}")
mm = t.get("matmul1024_gflops", (None, None))[1]
if mm is not None and mm < 50:
    print("\nlibtorch's matmul is below 50 GFLOP/s: it is using reference BLAS. "
          "Run `apt-get install libopenblas0-pthread` and compare again.")
print(f"\nratio = graft / libtorch, medians over {rounds} alternating rounds; "
      "lower is better for ms/us, higher for GFLOP/s and GB/s")
PY
rm -rf "$out"
