#!/usr/bin/env bash
# The GPT's speed against libtorch 2.x and PyTorch eager, alternating the programs for N rounds
# (default 3) so all see the same machine state, then each figure's median over the rounds:
#   gpt_step_ms                          graft bench, libtorch_train_reference gpt, pytorch_gpt.py --bench step
#   gpt_generate_tokens_per_s            graft bench (KV cache), libtorch_train_reference gpt-generate and
#                                        pytorch_gpt.py --bench generate (nanoGPT's loop, no cache)
#   gpt_generate_nocache_tokens_per_s    graft bench (the same sampler recomputing its window)
# The venv and the libtorch build are compare.sh's (build-bench/torch-venv; run compare.sh once
# first). libtorch_train_reference is built here against that venv when missing or older than
# its source.
#   tools/bench/gpt_compare.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
graft=${GRAFT:-build/tools/graft}
venv=${TORCH_VENV:-build-bench/torch-venv}
ref=${LIBTORCH_TRAIN_REFERENCE:-build-bench/libtorch_train_reference}
fortunes=/usr/share/games/fortunes
threads=${GPT_COMPARE_THREADS:-$(nproc)}
[ -x "$graft" ] || { echo "gpt_compare: $graft is missing (build graft first)" >&2; exit 1; }
[ -x "$venv/bin/python" ] || { echo "gpt_compare: no venv at $venv (run tools/bench/compare.sh once, or set TORCH_VENV)" >&2; exit 1; }
if [ ! -x "$ref" ] || [ tools/bench/libtorch_train_reference.cpp -nt "$ref" ]; then
  tdir=$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))")
  echo "gpt_compare: building $ref against $tdir" >&2
  mkdir -p "$(dirname "$ref")"
  g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI=1 -w -I. -I"$tdir/include" \
    -I"$tdir/include/torch/csrc/api/include" tools/bench/libtorch_train_reference.cpp -o "$ref" \
    -L"$tdir/lib" -Wl,-rpath,"$tdir/lib" -Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -lz
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for r in $(seq "$rounds"); do
  echo "== round $r" >&2
  start=$(wc -l < "$log")
  "$graft" bench --filter '^gpt_(step|generate)$' --threads "$threads" | grep -E "^gpt_" | sed 's/^/graft /' >> "$log"
  "$ref" gpt "$fortunes" 40 2>/dev/null | grep -E "^gpt_step_ms" | sed 's/^/libtorch /' >> "$log"
  "$ref" gpt-generate "$fortunes" 200 2>/dev/null | grep -E "^gpt_generate" | sed 's/^/libtorch /' >> "$log"
  "$venv/bin/python" tools/bench/pytorch_gpt.py --bench step --threads "$threads" 2>/dev/null | sed 's/^/pytorch /' >> "$log"
  "$venv/bin/python" tools/bench/pytorch_gpt.py --bench generate --threads "$threads" 2>/dev/null | sed 's/^/pytorch /' >> "$log"
  tail -n +"$((start + 1))" "$log" >&2  # this round's figures
done
python3 - "$log" <<'PY'
import sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, "tools/bench")
from round_medians import median, read_rounds
rows = read_rounds(sys.argv[1])
progs = ["graft", "libtorch", "pytorch"]
print(f"{'workload':<36}" + "".join(f"{p:>12}" for p in progs) + "  unit   (medians over rounds)")
for name, d in rows.items():
    cells = [median(rows, name, p) for p in progs]
    print(f"{name:<36}" + "".join(f"{c:>12.4g}" if c is not None else f"{'-':>12}" for c in cells) + f"  {d['unit']}")
def ratio(a, b, label, fmt):
    if a is not None and b is not None:
        print(label + fmt.format(a / b))
ratio(median(rows, "gpt_step_ms", "graft"), median(rows, "gpt_step_ms", "libtorch"), "gpt_step_ms graft/libtorch: ", "{:.2f}")
cache = median(rows, "gpt_generate_tokens_per_s", "graft")
ratio(cache, median(rows, "gpt_generate_nocache_tokens_per_s", "graft"), "graft KV cache / no cache: ", "{:.2f}x")
ratio(cache, median(rows, "gpt_generate_tokens_per_s", "pytorch"), "graft KV cache / PyTorch eager sampling: ", "{:.2f}x")
PY
