#!/usr/bin/env bash
# The small benchmark tools' arguments, as synk-bench's: --help prints the usage and exits 0, a
# bad argument is an error naming it (exit 2), before any MPI starts.
# Usage: tools_args.sh TOOL...
set -uo pipefail
fail=0
for tool in "$@"; do
  name=$(basename "$tool")
  out=$("$tool" --help 2>&1); rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "^Usage: $name" <<<"$out"; then
    echo "FAIL $name --help: exit $rc"; echo "$out"; fail=1
  fi
  out=$("$tool" --bogus 2>&1); rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q -- "--bogus" <<<"$out"; then
    echo "FAIL $name --bogus: exit $rc, not 2"; echo "$out"; fail=1
  fi
done
case_range() {  # TOOL ARG...: refused (exit 2) at once, before any MPI starts
  out=$(timeout 20 "$@" 2>&1); rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $(basename "$1") ${*:2}: exit $rc, not 2"; echo "$out"; fail=1
  fi
}
for tool in "$@"; do
  case $(basename "$tool") in
    synk-bench-shared-list) case_range "$tool" 0 ;;
    # Two threads on one CPU (or a CPU it may not run on) took minutes per line.
    core-pingpong)
      case_range "$tool" 0
      case_range "$tool" 0.01 0 0
      case_range "$tool" 0.01 0 1023 ;;
    # A bad list failed after MPI started (exit 1); a mode named twice timed one KeyValue twice.
    bench_fusion)
      for modes in kv,bogus kv,kv ""; do case_range "$tool" --modes "$modes"; done ;;
  esac
done
[ "$fail" -eq 0 ] && echo "every tool's --help and bad argument behave"
exit "$fail"
