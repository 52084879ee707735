#!/usr/bin/env bash
# A multi-rank GoogleTest program across the bed's hosts under synkrun, on the backend auto
# picks (hier): every rank must pass every test, on hosts as -H gives them. (Rank 0 prints the
# log; the others print their failures, and the exit code is nonzero on every rank if any
# failed: tests/multirank/mpi_main.cc.)
# Usage: gtest_across.sh BIN_DIR -H host:slots,... PROGRAM [VAR=VALUE...]
source "$(dirname "$0")/case_lib.sh"
[ "$2" = -H ] || { echo "usage: $0 BIN_DIR -H host:slots,... PROGRAM [VAR=VALUE...]"; exit 2; }
hosts=$3
program=$4
shift 4
exports=()
for kv in "$@"; do exports+=(-x "$kv"); done
mapfile -t names < <(tr ',' '\n' <<< "$hosts" | cut -d: -f1)
bed_up "${names[@]}"
ranks=$(tr ',' '\n' <<< "$hosts" | cut -d: -f2 | paste -sd+ | bc)

echo "$program on -H $hosts ($ranks ranks)"
run_job grid 600 "$SYNKRUN" -H "$hosts" -x SYNK_BACKEND=auto -x SYNK_LOG=info "${exports[@]}" \
  --timeout 540 "$BIN/$program"
expect_rc 0 "$program"
expect_in "$WORK/grid.out" "\[  PASSED  \]" "$program's summary"
expect_not_in "$WORK/grid.out" "FAILED" "$program"
expect_in "$WORK/grid.out" "info: backend hier \(auto\) for $ranks ranks on ${#names[@]} nodes" \
  "auto picks hier"
grep -m1 -E "tests? from .* test suites? ran" "$WORK/grid.out"
expect_hosts_clean "$program" "after the run"
case_end
