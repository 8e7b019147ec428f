#!/bin/sh
# run_tests.sh -- runs the Check suites and the Lua test scripts, then prints
# one closing line "N passed, N failed" for the whole run. Called by make test.
B=${BUILD:-build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

echo "== Check suites (C)"
EM_CODEGEN=$B/codegen EM_EMBER=$B/ember "$B/check_runner" 2>&1 | tee "$out"
c_status=$?
# Check prints: "100%: Checks: 42, Failures: 0, Errors: 0"
c_line=$(grep -E 'Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$out" | tail -n 1)
c_total=$(echo "$c_line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
c_fail=$(echo "$c_line" | sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1+\2/')
c_total=${c_total:-0}
c_fail=$(( ${c_fail:-1} ))
[ -z "$c_line" ] && c_fail=1

echo "== Lua scripts"
EMBER=$B/ember EMBER_HOST=$B/example_host "$B/ember" tests/lua/run.lua 2>&1 | tee "$out"
l_line=$(grep -E '^lua: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
l_pass=$(echo "$l_line" | sed -E 's/lua: ([0-9]+) passed.*/\1/')
l_fail=$(echo "$l_line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
l_pass=${l_pass:-0}
l_fail=${l_fail:-1}
[ -z "$l_line" ] && l_fail=1

echo "== install (DESTDIR)"
i_pass=0 i_fail=0
if [ -n "$SAN" ]; then
  echo "skipped in the sanitizer build (the installed library would need the sanitizer runtime)"
else
  BUILD=$B sh tests/install_test.sh 2>&1 | tee "$out"
  i_line=$(grep -E '^install: [0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
  i_pass=$(echo "$i_line" | sed -E 's/install: ([0-9]+) passed.*/\1/')
  i_fail=$(echo "$i_line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  i_pass=${i_pass:-0}
  i_fail=${i_fail:-1}
  [ -z "$i_line" ] && i_fail=1
fi

passed=$(( c_total - c_fail + l_pass + i_pass ))
failed=$(( c_fail + l_fail + i_fail ))
echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
