#!/usr/bin/env bash
# float32 against bf16 autocast, graft and libtorch 2.x, alternating the two programs for N rounds
# (default 3); take each figure's median over the rounds. The libtorch reference is the one
# compare.sh builds (build-bench/libtorch2_reference; run compare.sh once first).
#   tools/bench/precision_compare.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
graft=${GRAFT:-build/tools/graft}
ref=${LIBTORCH_REFERENCE:-build-bench/libtorch2_reference}
filter='^(mlp|mlp_bf16|cnn|cnn_bf16|matmul1024|matmul1024_bf16|vit|vit_bf16)$'
for r in $(seq "$rounds"); do
  echo "== round $r"
  "$graft" bench --filter "$filter" | grep -E "_ms |_gflops " | sed 's/^/graft    /'
  if [ -x "$ref" ]; then "$ref" --filter "$filter" | grep -E "_ms |_gflops " | sed 's/^/libtorch /'; fi
done
"$graft" bench --filter '^cnn_peak$' | grep peak | sed 's/^/graft    /'
