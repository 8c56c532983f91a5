#!/usr/bin/env bash
# float32 against bf16 autocast, graft and libtorch 2.x, alternating the two programs for N rounds
# (default 3), then each figure's median over the rounds. The libtorch reference is the one
# compare.sh builds (build-bench/libtorch2_reference; run compare.sh once first).
#   tools/bench/precision_compare.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
graft=${GRAFT:-build/tools/graft}
ref=${LIBTORCH_REFERENCE:-build-bench/libtorch2_reference}
filter='^(mlp|mlp_bf16|cnn|cnn_bf16|matmul1024|matmul1024_bf16|vit|vit_bf16)$'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq "$rounds"); do
  echo "== round $r"
  "$graft" bench --filter "$filter" | grep -E "_ms |_gflops " | sed 's/^/graft    /' | tee -a "$log"
  if [ -x "$ref" ]; then "$ref" --filter "$filter" | grep -E "_ms |_gflops " | sed 's/^/libtorch /' | tee -a "$log"; fi
done
"$graft" bench --filter '^cnn_peak$' | grep peak | sed 's/^/graft    /'
# The table: a workload's float32 figure beside its bf16 one (the same name with _bf16 in it:
# mlp_step_ms, mlp_bf16_step_ms), for each program.
python3 - "$log" <<'PY'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, "tools/bench")
from round_medians import median, read_rounds
rows = read_rounds(sys.argv[1])
print(f"{'workload (medians over rounds)':<32}{'graft fp32':>12}{'graft bf16':>12}{'lt fp32':>12}{'lt bf16':>12}  unit")
for name, d in rows.items():
    if "_bf16_" in name:
        continue
    bf = next((b for b in rows if "_bf16_" in b and b.replace("_bf16_", "_") == name), "")
    cells = [median(rows, name, "graft"), median(rows, bf, "graft"), median(rows, name, "libtorch"), median(rows, bf, "libtorch")]
    print(f"{name:<32}" + "".join(f"{c:>12.4g}" if c is not None else f"{'-':>12}" for c in cells) + f"  {d['unit']}")
PY
