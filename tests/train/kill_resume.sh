#!/usr/bin/env bash
# Kill-and-resume test of `graft train --run-dir/--resume` on the real binary and real data.
#
#   kill_resume.sh GRAFT_BINARY [WORKDIR]      (KEEP=1 keeps the work directory)
#
# For each configuration one uninterrupted reference run, then runs killed with SIGKILL at a chosen
# step (GRAFT_TEST_KILL_AT_STEP) or between a checkpoint's .tmp write and its rename
# (GRAFT_TEST_KILL_BEFORE_RENAME), or stopped by SIGTERM/SIGINT, each resumed with --resume. A
# resumed run must save weights byte-identical (cmp) to the reference's, and the epoch and progress
# lines (timings stripped) of the killed run must be the reference's up to the kill, those of the
# resumed run the reference's from its checkpoint on. Also: a damaged newest checkpoint falls back
# to the previous one, two damaged ones fail naming both, and --resume refuses changed recipe flags.
#
# The kill steps are drawn from a fixed seed (RANDOM=12345), so every run of the test uses the same
# ones; they are printed. Exit 0: all passed; 1: a check failed (a FAIL line each); 77: skipped (no
# Fashion-MNIST data). Without mpirun (or a graft built without dist) the --nproc 2 cases are skipped.
set -uo pipefail
RANDOM=12345

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 GRAFT_BINARY [WORKDIR]" >&2
  exit 2
fi
G=$(realpath "$1") || exit 2
[[ -x $G ]] || { echo "kill_resume: $1 is not an executable" >&2; exit 2; }
DATA=/usr/share/datasets/fashion-mnist  # the binary's default --data
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  if [[ ! -f $DATA/$f ]]; then
    echo "SKIP: Fashion-MNIST is not installed ($DATA/$f is missing)"
    exit 77
  fi
done
# Bit-exact comparisons across processes need one fixed op thread count: some kernels (the ViT's)
# give other bits on 1 thread than on 2, and graft's contention monitor switches to 1 thread while
# other processes keep the cores busy. One thread is also the fastest on a busy 2-core machine.
export GRAFT_CONTENTION=fixed OMP_NUM_THREADS=1
base=${2:-${TMPDIR:-/tmp}}
mkdir -p "$base" || exit 2
W=$(mktemp -d "$base/kill_resume.XXXXXX") || exit 2
bg_pid=""
cleanup() {
  [[ -n $bg_pid ]] && kill -KILL "$bg_pid" 2>/dev/null
  if [[ ${KEEP:-0} == 1 ]]; then echo "kill_resume: kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
start_s=$(date +%s.%N)
fails=0 kill_runs=0 signal_runs=0 other_checks=0

now() { date +%s.%N; }
lap_s=$start_s
lap() {  # lap NAME: the seconds since the previous lap
  local t
  t=$(now)
  awk -v n="$1" -v a="$lap_s" -v b="$t" 'BEGIN { printf "  %s: %.1f s\n", n, b - a }'
  lap_s=$t
}

fail() {  # fail MESSAGE...: one FAIL line (details, if any, follow it)
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# pick VAR COUNT LO HI: append to VAR COUNT distinct pseudo-random integers in [LO, HI] (not
# already in it). Not in a $(...): bash reseeds RANDOM in every subshell.
pick() {
  local -n to=$1
  local count=$2 lo=$3 hi=$4 v n=0
  while ((n < count)); do
    v=$((lo + RANDOM % (hi - lo + 1)))
    [[ " $to " == *" $v "* ]] && continue
    to=${to:+$to }$v
    n=$((n + 1))
  done
  to=$(tr ' ' '\n' <<<"$to" | sort -n | paste -sd ' ')
}

# lines N FILE...: the epoch lines and progress lines of a run's output, timings stripped, each as
# "position<TAB>line", in order. N is the steps per epoch. Position: 2*global step for the step's
# progress line, 2*global step + 1 for an epoch's line (printed after its last step's progress).
lines() {
  local n=$1
  shift
  cat "$@" | awk -v N="$n" '
    /^epoch [0-9]+\/[0-9]+ step [0-9]+\/[0-9]+ loss / {
      split($2, e, "/"); split($4, s, "/")
      printf "%d\t%s %s %s %s %s %s\n", 2 * ((e[1] - 1) * s[2] + s[1]), $1, $2, $3, $4, $5, $6
      next
    }
    /^epoch [0-9]+: train loss / {
      line = $0; sub(/, [0-9.]+ s$/, "", line)
      ep = $2; sub(/:$/, "", ep)
      printf "%d\t%s\n", 2 * ep * N + 1, line
    }' | sort -s -n -k1,1
}

# range FILE LO HI: the lines of a `lines` file with LO < position <= HI.
range() { awk -F'\t' -v lo="$2" -v hi="$3" '$1 > lo && $1 <= hi' "$1"; }

# same WHAT EXPECTED ACTUAL CONTEXT: FAIL with the diff unless the two files are equal.
same() {
  if ! cmp -s "$2" "$3"; then
    fail "$4: $1 differ (< expected, > actual):"
    diff "$2" "$3" | sed 's/^/    /' | head -40
    return 1
  fi
}

# The newest final-named checkpoint's global step in a run directory, or -1.
newest_step() {
  local f
  f=$(ls "$1" 2>/dev/null | grep -E '^checkpoint-[0-9]{8,}\.safetensors$' | sort | tail -n 1)
  if [[ -n $f ]]; then f=${f#checkpoint-}; echo $((10#${f%.safetensors})); else echo -1; fi
}

# ref NAME NPROC N FLAGS...: the uninterrupted reference run of a configuration, into $W/NAME/
# (out, err, weights.st, run/, lines); N is its steps per epoch.
ref() {
  local name=$1 nproc=$2 n=$3
  shift 3
  local d=$W/$name np=()
  ((nproc > 1)) && np=(--nproc "$nproc")
  mkdir -p "$d"
  "$G" train "$@" "${np[@]}" --run-dir "$d/run" --save "$d/weights.st" >"$d/out" 2>"$d/err"
  local rc=$?
  if ((rc != 0)); then
    grep -q 'built without the dist component' "$d/err" && return 2
    fail "$name: the reference run (graft train $* ${np[*]}) exited $rc:"
    tail -n 20 "$d/out" "$d/err" | sed 's/^/    /'
    return 1
  fi
  lines "$n" "$d/out" "$d/err" >"$d/lines"
  grep -E '^graft train: model ' "$d/out" >"$d/banner"
}

# check_resume CONTEXT REF N RUNDIR KIND NPROC: resume RUNDIR on NPROC processes and check it
# against reference REF: exit 0, no "not usable", the banner, the printed lines after what the
# checkpoint holds (KIND step: a SIGKILL's checkpoint, which holds its step's lines and its epoch's
# line if the step ended an epoch; stop: a signal's, after which that epoch has not ended), the
# saved weights (cmp). Sets resumed_step.
resumed_step=-1
check_resume() {
  local ctx=$1 refname=$2 n=$3 rd=$4 p_of=$5 nproc=$6
  local d=$rd.resume r=$W/$refname np=()
  ((nproc > 1)) && np=(--nproc "$nproc")
  mkdir -p "$d"
  "$G" train --resume "$rd" "${np[@]}" --save "$d/weights.st" >"$d/out" 2>"$d/err"
  local rc=$?
  if ((rc != 0)); then
    fail "$ctx: resume exited $rc:"
    tail -n 20 "$d/out" "$d/err" | sed 's/^/    /'
    return 1
  fi
  if grep -q 'not usable' "$d/err"; then
    fail "$ctx: resume rejected a checkpoint:"
    grep 'not usable' "$d/err" | sed 's/^/    /'
  fi
  local line
  line=$(grep -E '^graft train: resuming ' "$d/out")
  if [[ ! $line =~ global\ step\ ([0-9]+)\)$ ]]; then
    fail "$ctx: no 'graft train: resuming ... global step G)' line:"
    head -n 5 "$d/out" | sed 's/^/    /'
    return 1
  fi
  resumed_step=${BASH_REMATCH[1]}
  local p
  case $p_of in
    step) p=$((2 * resumed_step + 1)) ;;
    stop) p=$((2 * resumed_step)) ;;
  esac
  grep -E '^graft train: model ' "$d/out" >"$d/banner"
  same "banner lines" "$r/banner" "$d/banner" "$ctx (resumed from global step $resumed_step)"
  lines "$n" "$d/out" "$d/err" >"$d/lines"
  range "$r/lines" "$p" 1000000000 >"$d/expected_lines"
  same "resumed run's epoch/progress lines" "$d/expected_lines" "$d/lines" "$ctx (resumed from global step $resumed_step)"
  if ! cmp "$r/weights.st" "$d/weights.st"; then
    fail "$ctx: the resumed run's final weights differ from the uninterrupted run's (cmp above)"
  fi
}

# Expected newest checkpoint before SIGKILL in step K: the last save point before K (every
# SAVE_EVERY steps, and at each epoch's end, every N steps).
last_save_before() {
  local k=$1 every=$2 n=$3 s
  for ((s = k - 1; s > 0; --s)); do
    if ((s % every == 0 || s % n == 0)); then echo "$s"; return; fi
  done
  echo -1
}

# kill_at REF NPROC N EVERY K FLAGS...: SIGKILL in global step K (of a run like reference REF, N
# steps an epoch, --save-every EVERY, on NPROC processes), then resume and compare.
kill_at() {
  local refname=$1 nproc=$2 n=$3 every=$4 k=$5
  shift 5
  local d=$W/$refname.kill$k np=()
  ((nproc > 1)) && np=(--nproc "$nproc")
  local ctx="$refname [graft train $* ${np[*]} --save-every $every] killed in step $k"
  mkdir -p "$d"
  kill_runs=$((kill_runs + 1))
  { GRAFT_TEST_KILL_AT_STEP=$k "$G" train "$@" "${np[@]}" --save-every "$every" --run-dir "$d/run" \
      --save "$d/weights.st" >"$d/out" 2>"$d/err"; } 2>/dev/null
  local rc=$?
  if ((nproc > 1 ? rc == 0 : rc != 137)); then
    fail "$ctx: exit status $rc, expected $( ((nproc > 1)) && echo 'nonzero' || echo 137) (SIGKILL):"
    tail -n 20 "$d/out" "$d/err" | sed 's/^/    /'
    return
  fi
  local newest expect
  newest=$(newest_step "$d/run")
  expect=$(last_save_before "$k" "$every" "$n")
  if ((newest < 0)); then
    fail "$ctx: no checkpoint-*.safetensors in the run directory:"
    ls -la "$d/run" | sed 's/^/    /'
    return
  fi
  ((newest == expect)) || fail "$ctx: newest checkpoint is step $newest, expected $expect"
  lines "$n" "$d/out" "$d/err" >"$d/lines"
  range "$W/$refname/lines" -1 $((2 * k - 1)) >"$d/expected_lines"
  same "killed run's epoch/progress lines" "$d/expected_lines" "$d/lines" "$ctx"
  check_resume "$ctx" "$refname" "$n" "$d/run" step "$nproc" || return
  ((resumed_step == newest)) || fail "$ctx: resumed from global step $resumed_step, the newest checkpoint is $newest"
}

# kill_rename REF N EVERY K FLAGS...: SIGKILL in the K-th save, between its .tmp and the rename.
kill_rename() {
  local refname=$1 n=$2 every=$3 k=$4
  shift 4
  local ctx="$refname [graft train $* --save-every $every] killed before the rename of save $k"
  local d=$W/$refname.rename$k
  mkdir -p "$d"
  kill_runs=$((kill_runs + 1))
  { GRAFT_TEST_KILL_BEFORE_RENAME=$k "$G" train "$@" --save-every "$every" --run-dir "$d/run" \
      --save "$d/weights.st" >"$d/out" 2>"$d/err"; } 2>/dev/null
  local rc=$?
  if ((rc != 137)); then
    fail "$ctx: exit status $rc, expected 137 (SIGKILL):"
    tail -n 20 "$d/out" "$d/err" | sed 's/^/    /'
    return
  fi
  local tmp s newest
  tmp=$(ls "$d/run" | grep -E '^checkpoint-[0-9]{8,}\.safetensors\.tmp$')
  if [[ -z $tmp ]]; then
    fail "$ctx: no checkpoint-*.safetensors.tmp left in the run directory:"
    ls -la "$d/run" | sed 's/^/    /'
    return
  fi
  s=${tmp#checkpoint-}
  s=$((10#${s%.safetensors.tmp}))
  newest=$(newest_step "$d/run")
  if ((newest < 0 || newest >= s)); then
    fail "$ctx: the newest checkpoint ($newest) should be the save before the interrupted one ($s):"
    ls -la "$d/run" | sed 's/^/    /'
    return
  fi
  lines "$n" "$d/out" "$d/err" >"$d/lines"
  range "$W/$refname/lines" -1 $((2 * s + 1)) >"$d/expected_lines"
  same "killed run's epoch/progress lines" "$d/expected_lines" "$d/lines" "$ctx (.tmp of step $s)"
  check_resume "$ctx (.tmp of step $s)" "$refname" "$n" "$d/run" step 1 || return
  ((resumed_step == newest)) || fail "$ctx: resumed from global step $resumed_step, the newest checkpoint is $newest"
}

# stop_with SIG STATUS REF N FLAGS...: SIGTERM/SIGINT once the first checkpoint exists; the run must
# stop with STATUS after a step, with a checkpoint; its lines and the resumed run's are the reference's.
stop_with() {
  local sig=$1 status=$2 refname=$3 n=$4
  shift 4
  local ctx="$refname [graft train $*] SIG$sig"
  local d=$W/$refname.$sig
  mkdir -p "$d"
  signal_runs=$((signal_runs + 1))
  "$G" train "$@" --run-dir "$d/run" --save "$d/weights.st" >"$d/out" 2>"$d/err" &
  bg_pid=$!
  local i
  for ((i = 0; i < 3000; ++i)); do  # 30 s at 10 ms
    ls "$d/run" 2>/dev/null | grep -qE '^checkpoint-[0-9]{8,}\.safetensors$' && break
    kill -0 "$bg_pid" 2>/dev/null || break
    sleep 0.01
  done
  kill -"$sig" "$bg_pid" 2>/dev/null
  wait "$bg_pid"
  local rc=$?
  bg_pid=""
  if ((rc != status)); then
    fail "$ctx: exit status $rc, expected $status$( ((i >= 3000)) && echo ' (no checkpoint appeared within 30 s)'; ((rc == 0)) && echo ' (the run ended before the signal: make it longer)'):"
    tail -n 20 "$d/out" "$d/err" | sed 's/^/    /'
    return
  fi
  local line
  line=$(grep -E "^graft train: stopped by SIG$sig after step [0-9]+; resume with --resume " "$d/out")
  if [[ ! $line =~ after\ step\ ([0-9]+)\; ]]; then
    fail "$ctx: no 'graft train: stopped by SIG$sig after step K; resume with --resume DIR' line:"
    tail -n 5 "$d/out" | sed 's/^/    /'
    return
  fi
  local stopped=${BASH_REMATCH[1]} newest
  newest=$(newest_step "$d/run")
  ((newest == stopped)) || fail "$ctx: stopped after step $stopped, but the newest checkpoint is step $newest"
  lines "$n" "$d/out" "$d/err" >"$d/lines"
  range "$W/$refname/lines" -1 $((2 * stopped)) >"$d/expected_lines"
  same "stopped run's epoch/progress lines" "$d/expected_lines" "$d/lines" "$ctx (stopped after step $stopped)"
  check_resume "$ctx (stopped after step $stopped)" "$refname" "$n" "$d/run" stop 1 || return
  ((resumed_step == stopped)) || fail "$ctx: resumed from global step $resumed_step, stopped after $stopped"
  echo "  SIG$sig: stopped after step $stopped"
}

# ---------------------------------------------------------------------------------------------
MLP=(--epochs 2 --train-samples 1024 --test-samples 256)  # 8 steps an epoch, 16 in all
VIT=(--model vit --dropout 0.1 --epochs 2 --train-samples 512 --test-samples 256)  # 4 an epoch

# 1. MLP fp32: 8 kills, from step 4 (the first checkpoint is step 3's) to 15, in both epochs.
k_mlp="" k_vit="" k_bf16="" k_fp16="" k_dp="" r_mlp="" r_vit=""
pick k_mlp 3 4 8
pick k_mlp 5 9 15
# 2. ViT with dropout (the RNG state): 4 kills in steps 4..7.
pick k_vit 4 4 7
# 3. bf16 and fp16 (the GradScaler's state): one kill in each epoch.
pick k_bf16 1 4 8
pick k_bf16 1 9 15
pick k_fp16 1 4 8
pick k_fp16 1 9 15
# 4. Two ranks: 3 kills.
pick k_dp 1 4 8
pick k_dp 2 9 15
# 5. Killed before a rename: the k-th save (k >= 2, so an older checkpoint exists). MLP saves at
#    steps 3 6 8 9 12 15 16, ViT at 3 4 6 8.
pick r_mlp 2 2 6
pick r_vit 1 2 3
echo "kill_resume: $G, work directory $W"
echo "  kill steps: mlp fp32 [$k_mlp], vit [$k_vit], bf16 [$k_bf16], fp16 [$k_fp16], --nproc 2 [$k_dp]"
echo "  killed before the rename of save: mlp [$r_mlp], vit [$r_vit]"

if ref mlp 1 8 "${MLP[@]}" --save-every 3; then
  for k in $k_mlp; do kill_at mlp 1 8 3 "$k" "${MLP[@]}"; done
  for k in $r_mlp; do kill_rename mlp 8 3 "$k" "${MLP[@]}"; done
fi
lap "mlp fp32"
if ref vit 1 4 "${VIT[@]}" --save-every 3; then
  for k in $k_vit; do kill_at vit 1 4 3 "$k" "${VIT[@]}"; done
  for k in $r_vit; do kill_rename vit 4 3 "$k" "${VIT[@]}"; done
fi
lap "vit"
if ref bf16 1 8 "${MLP[@]}" --precision bf16 --save-every 3; then
  for k in $k_bf16; do kill_at bf16 1 8 3 "$k" "${MLP[@]}" --precision bf16; done
fi
if ref fp16 1 8 "${MLP[@]}" --precision fp16 --save-every 3; then
  for k in $k_fp16; do kill_at fp16 1 8 3 "$k" "${MLP[@]}" --precision fp16; done
fi
lap "bf16, fp16"

mpi_skipped=""
if ! command -v mpirun >/dev/null; then
  mpi_skipped="no mpirun"
else
  ref dp 2 8 "${MLP[@]}" --save-every 3
  case $? in
    0) for k in $k_dp; do kill_at dp 2 8 3 "$k" "${MLP[@]}"; done ;;
    2) mpi_skipped="graft was built without the dist component" ;;
  esac
fi
if [[ -n $mpi_skipped ]]; then echo "  SKIP: the --nproc 2 cases ($mpi_skipped)"; else lap "--nproc 2"; fi

# 5b. The character-level GPT (graft train --model gpt, with dropout: the RNG state, the random
#     windows' loader position and the validation windows): two SIGKILLs; the resumed run's
#     weights and its validation lines must be the uninterrupted run's.
GPT=(--model gpt --iters 24 --eval-every 8 --batch-size 4 --dropout 0.1 --data "$W/gpt.txt")
k_gpt=""
pick k_gpt 2 5 22
gpt_vals() { cat "$@" | grep -E '^iter [0-9]+: val loss|^final val loss' | sort -u; }
awk 'BEGIN { srand(7); for (i = 0; i < 4000; i++) printf "%s%s", substr("the cat sat on a mat and ran far", int(rand() * 30) + 1, 3), (i % 17 == 16 ? "\n" : " ") }' >"$W/gpt.txt"
d=$W/gpt_ref
mkdir -p "$d"
if "$G" train "${GPT[@]}" --run-dir "$d/run" --save-every 4 --save "$d/weights.st" >"$d/out" 2>"$d/err"; then
  gpt_vals "$d/out" >"$d/vals"
  for k in $k_gpt; do
    kill_runs=$((kill_runs + 1))
    r=$W/gpt_kill_$k
    mkdir -p "$r"
    GRAFT_TEST_KILL_AT_STEP=$k "$G" train "${GPT[@]}" --run-dir "$r/run" --save-every 4 --save "$r/weights.st" \
      >"$r/out1" 2>"$r/err1"
    rc=$?
    ((rc == 137)) || { fail "gpt killed at step $k: exited $rc, not 137 (SIGKILL)"; continue; }
    ((${#k} > 0 && $(newest_step "$r/run") >= 0)) || { fail "gpt killed at step $k: no checkpoint left"; continue; }
    "$G" train --resume "$r/run" --save "$r/weights.st" >"$r/out2" 2>"$r/err2" ||
      { fail "gpt resume after a kill at step $k failed:"; tail -n 5 "$r/err2" | sed 's/^/    /'; continue; }
    cmp -s "$d/weights.st" "$r/weights.st" || fail "gpt killed at step $k: resumed weights differ from the uninterrupted run's"
    gpt_vals "$r/out1" "$r/out2" >"$r/vals"
    same "validation lines" "$d/vals" "$r/vals" "gpt killed at step $k"
  done
else
  fail "gpt reference run failed:"
  tail -n 5 "$d/err" | sed 's/^/    /'
fi
lap "gpt [$k_gpt]"

# 6. SIGTERM and SIGINT: a run of 240 steps (a second or two), signalled once its first
#    checkpoint (epoch 1's end) exists.
SIGRUN=(--epochs 60 --train-samples 512 --test-samples 256)
if ref sig 1 4 "${SIGRUN[@]}"; then
  stop_with TERM 143 sig 4 "${SIGRUN[@]}"
  stop_with INT 130 sig 4 "${SIGRUN[@]}"
fi
lap "signals"

# 7. A damaged newest checkpoint: a flipped byte falls back to the previous one (resumed with one
#    epoch more, which 8. needs too); then both truncated: no usable checkpoint, naming both.
if [[ -d $W/mlp/run ]]; then
  c=$W/corrupt
  cp -r "$W/mlp/run" "$c"
  ctx="corrupt [the mlp reference's run directory]"
  f=$c/$(ls "$c" | grep -E '^checkpoint-[0-9]+\.safetensors$' | sort | tail -n 1)
  size=$(stat -c %s "$f")
  off=$((size / 2))
  byte=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
  printf "\\$(printf %03o $((byte ^ 0xff)))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
  other_checks=$((other_checks + 1))
  "$G" train --resume "$c" --epochs 3 >"$c.out" 2>"$c.err"
  rc=$?
  if ((rc != 0)); then
    fail "$ctx: resume with --epochs 3 after flipping byte $off of $f exited $rc:"
    tail -n 20 "$c.out" "$c.err" | sed 's/^/    /'
  elif ! grep -qE "checkpoint '$f' is not usable: checksum mismatch.*; falling back to the previous checkpoint, " "$c.err"; then
    fail "$ctx: no 'not usable: checksum mismatch ...; falling back' line for $f (byte $off flipped):"
    sed 's/^/    /' "$c.err"
  fi
  # 8. (part) --epochs may change, and says so.
  other_checks=$((other_checks + 1))
  grep -qE '^graft train: resumed with --epochs 3' "$c.out" ||
    { fail "$ctx: --resume --epochs 3 printed no 'resumed with --epochs' line:"; sed 's/^/    /' "$c.out"; }

  other_checks=$((other_checks + 1))
  files=$(ls "$c" | grep -E '^checkpoint-[0-9]+\.safetensors$')
  for f in $files; do truncate -s $(($(stat -c %s "$c/$f") / 2)) "$c/$f"; done
  "$G" train --resume "$c" >"$c.out2" 2>"$c.err2"
  rc=$?
  if ((rc == 0)); then
    fail "$ctx: resume with every checkpoint truncated exited 0"
  elif ! grep -q "no usable checkpoint" "$c.err2"; then
    fail "$ctx: resume with every checkpoint truncated did not say 'no usable checkpoint':"
    sed 's/^/    /' "$c.err2"
  else
    for f in $files; do
      grep -q "checkpoint '$c/$f' is not usable" "$c.err2" ||
        { fail "$ctx: the 'no usable checkpoint' error does not name $f:"; sed 's/^/    /' "$c.err2"; }
    done
  fi
fi

# 8. Conflicting recipe flags are refused, naming the flag.
if [[ -d $W/mlp/run ]]; then
  other_checks=$((other_checks + 1))
  "$G" train --resume "$W/mlp/run" --lr 0.5 >"$W/conflict.out" 2>"$W/conflict.err"
  rc=$?
  if ((rc == 0)) || ! grep -q -- '--lr' "$W/conflict.err"; then
    fail "conflict [graft train --resume DIR --lr 0.5]: exit $rc (expected nonzero, with an error naming --lr):"
    cat "$W/conflict.out" "$W/conflict.err" | sed 's/^/    /'
  fi
fi

lap "damaged checkpoints, flags"
secs=$(awk -v a="$start_s" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
if ((fails > 0)); then
  echo "kill_resume: $fails check(s) FAILED in $kill_runs kill runs, $signal_runs signal runs, $other_checks other checks ($secs s)"
  exit 1
fi
echo "kill_resume: $kill_runs kill runs, $signal_runs signal runs, $other_checks other checks, all exact ($secs s)"
