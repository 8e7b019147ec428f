#!/bin/sh
# run_fuzz.sh TARGET... -- runs each built fuzz target (build/fuzz/fuzz_NAME)
# for FUZZ_SECONDS from its corpus: the committed seeds in
# tests/fuzz/corpus/NAME (every crash ever found, once fixed, goes there)
# and the inputs earlier runs kept in build/fuzz/corpus/NAME. The codegen
# target is also seeded with the project's own schema files. Prints one
# summary line per target (runs, exec/s, corpus size) and fails on a crash,
# leaving the input in build/fuzz/crashes/. With FUZZ_REPLAY set, each
# target only replays its saved inputs once (CI: deterministic). FUZZ_SEED
# fixes libFuzzer's random seed: the same code and corpus then explore the
# same way (up to how many runs fit in the time). FUZZ_RUNS bounds each
# target by a number of runs instead of FUZZ_SECONDS: one number for every
# target, or NAME=N words (`lua=30000 capi=400`; a target not named runs
# for FUZZ_SECONDS). With FUZZ_SEED, a bound in runs explores the same
# inputs on every machine: CI's exploration stage (.ci/run).
S=${FUZZ_SECONDS:-60}
# runs_for NAME: the run bound FUZZ_RUNS gives NAME, or nothing
runs_for() {
  for w in $FUZZ_RUNS; do
    case "$w" in
      *=*) [ "${w%%=*}" = "$1" ] && { echo "${w#*=}"; return; } ;;
      *) echo "$w"; return ;;
    esac
  done
}
mkdir -p build/fuzz/crashes
status=0
for t in "$@"; do
  work=build/fuzz/corpus/$t
  mkdir -p "$work" "tests/fuzz/corpus/$t"
  if [ "$t" = codegen ]; then
    for f in schema/ops/*.yaml; do
      fam=$(basename "$f")
      { cat "$f"; printf '\n#8<\n'; [ -f "schema/derivatives/$fam" ] && cat "schema/derivatives/$fam"; } > "$work/seed-$fam"
    done
  fi
  opts="-timeout=20 -rss_limit_mb=3072 -max_len=4096 -print_final_stats=1 -artifact_prefix=build/fuzz/crashes/$t-"
  [ -n "$FUZZ_SEED" ] && opts="$opts -seed=$FUZZ_SEED"
  log=build/fuzz/$t.log
  if [ -n "$FUZZ_REPLAY" ]; then
    # replay only: every saved input once, no new ones (what CI runs)
    "build/fuzz/fuzz_$t" $opts -runs=0 "$work" "tests/fuzz/corpus/$t" > "$log" 2>&1
  else
    n_runs=$(runs_for "$t")
    if [ -n "$n_runs" ]; then bound="-runs=$n_runs"; else bound="-max_total_time=$S"; fi
    "build/fuzz/fuzz_$t" $opts $bound "$work" "tests/fuzz/corpus/$t" > "$log" 2>&1
  fi
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  n=$(ls "$work" | wc -l)
  if [ $rc -eq 0 ]; then
    if [ -n "$FUZZ_REPLAY" ]; then
      echo "fuzz $t: ok, ${runs:-?} saved inputs replayed"
    else
      if [ -n "$n_runs" ]; then took="(${speed:-?}/s)"; else took="in ${S}s (${speed:-?}/s)"; fi
      echo "fuzz $t: ok, ${runs:-?} runs $took, corpus $n inputs"
    fi
  else
    echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} runs; the input is in build/fuzz/crashes/, the log in $log:"
    grep -m 20 -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$log" | head -30
    status=1
  fi
done
exit $status
