# Sourced by tools/run.sh, tools/test.sh and .ci/run: the build options and the "N passed, N failed"
# line each live here once, so the scripts cannot drift apart (a build dir configured by run.sh
# keeps the CUDA backend when test.sh reuses it, and the other way round).

[ -d /usr/local/cuda/bin ] && export PATH="/usr/local/cuda/bin:$PATH"

# graft_configure BUILDDIR release|sanitize|tsan: sets up BUILDDIR with that flavour's options, or
# applies them to an existing one (meson keeps an option it is not given, so a dir made by hand
# with other options is brought back to these).
graft_configure() {
  local dir=$1 flavour=$2 opts
  if [ "$flavour" = sanitize ]; then
    # CUDA device code cannot run here and nvcc does not take the sanitizer flags: leave it out.
    # -O1 -g1: line tables are all a sanitizer report needs, and the build, which was half of CI's
    # time at -O2 -g, compiles about 2.5x faster; the tests run a little slower.
    opts=(-Dbuildtype=debugoptimized -Doptimization=1 -Dc_args=-g1 -Dcpp_args=-g1
          -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled)
  elif [ "$flavour" = tsan ]; then
    # ThreadSanitizer, CPU only as above, and no dist/ (its tests are not in the job). -O1: its
    # tests take seconds, and it compiles the library about 40% faster than -O2.
    opts=(-Dbuildtype=debugoptimized -Doptimization=1 -Db_sanitize=thread -Db_lundef=false -Dcuda=disabled
          -Ddist=disabled)
  else
    opts=(-Dbuildtype=release)
    # With nvcc present the CUDA backend must build (a compile error fails CI instead of silently
    # dropping the backend); without it the build is CPU-only.
    if command -v nvcc >/dev/null; then opts+=(-Dcuda=enabled); else opts+=(-Dcuda=disabled); fi
  fi
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "${opts[@]}" >/dev/null
  else
    meson setup "$dir" "${opts[@]}" >/dev/null
  fi
}

# graft_summary MESON_TEST_LOG RC: prints "N passed, N failed" (", N skipped" when some were) from
# meson test's summary block. A timeout counts as a failure; a non-zero rc with no summary is one.
graft_summary() {
  local log=$1 rc=$2 ok fail skip timeout
  ok=$(grep -E '^Ok:' "$log" | awk '{print $2}')
  fail=$(grep -E '^Fail:' "$log" | awk '{print $2}')
  skip=$(grep -E '^Skipped:' "$log" | awk '{print $2}')
  timeout=$(grep -E '^Timeout:' "$log" | awk '{print $2}')
  fail=$(( ${fail:-0} + ${timeout:-0} ))
  [ -z "$ok" ] && { ok=0; [ "$rc" != 0 ] && fail=$(( fail > 0 ? fail : 1 )); }
  if [ "${skip:-0}" -gt 0 ]; then echo "${ok} passed, ${fail} failed, ${skip} skipped"; else echo "${ok} passed, ${fail} failed"; fi
}

# graft_summary_fields LOG: the last summary line of LOG as "passed failed skipped" (empty if none).
graft_summary_fields() {
  grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1 | awk '{print $1, $3, ($5 == "" ? 0 : $5)}'
}

# graft_failure_digest BUILDDIR [LINES]: for each test that did not pass in BUILDDIR's last meson
# test run (meson-logs/testlog.json), its name, result and duration, then the last LINES (40) lines
# of its output. CI prints it just before its summary line, where a reader of only the tail of a
# long log still sees which test failed and why.
graft_failure_digest() {
  local json=$1/meson-logs/testlog.json
  [ -f "$json" ] || return 0
  python3 - "$json" "${2:-40}" <<'PY'
import json, sys
path, keep = sys.argv[1], int(sys.argv[2])
for line in open(path, encoding="utf-8", errors="replace"):
    try:
        t = json.loads(line)
    except ValueError:
        continue
    if t.get("result") in ("OK", "SKIP", "EXPECTEDFAIL"):
        continue
    print(f"== {path.split('/meson-logs')[0]}: {t.get('name')} {t.get('result')} "
          f"after {t.get('duration', 0):.1f} s (rc {t.get('returncode')})")
    text = (t.get("stdout") or "") + (t.get("stderr") or "")
    for l in text.splitlines()[-keep:]:
        print("   | " + l[:300])
PY
}
