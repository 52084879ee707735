#!/usr/bin/env bash
# Ctrl-C in the middle of an epoch, at a terminal (script(1) gives one): the progress bar is
# erased before synkrun's closing line, and the job ends with 130. Before, that line ran on
# after the bar ("... 183/235synkrun: stopped by signal 2").
# Usage: interrupt.sh SYNKRUN TRAIN_FMNIST
set -euo pipefail
synkrun=$1 train=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -d /usr/share/datasets/fashion-mnist ] || { echo "skipped: no Fashion-MNIST"; exit 77; }

# script runs synkrun on a pty of its own; the signal goes to synkrun once the bar is drawn.
script -qfec "\"$synkrun\" --timeout 60 -np 2 \"$train\" --epochs 50" "$work/typescript" \
  > /dev/null 2>&1 &
script_pid=$!
for _ in $(seq 600); do
  grep -q 'epoch   1 \[=' "$work/typescript" 2>/dev/null && break
  sleep 0.1
done
# synkrun is script's child, or its shell's.
synkrun_pid=$(pgrep -x -P "$script_pid" synkrun ||
  pgrep -x -P "$(pgrep -P "$script_pid" | tr '\n' ',' | sed 's/,$//')" synkrun) ||
  { echo "FAILED: no synkrun under script"; exit 1; }
kill -INT "$synkrun_pid"
set +e
wait "$script_pid"
rc=$?
set -e
fail() { echo "FAILED (exit $rc): $1"; cat -A "$work/typescript" | tail -c 2000; exit 1; }
grep -q 'epoch   1 \[=' "$work/typescript" || fail "no progress bar was drawn"
[ "$rc" -eq 130 ] || fail "exit $rc, expected 130"
# The closing line follows "\r\033[K" (the bar erased), not the bar itself; or a line's end,
# where the signal came between epochs (the epoch's line had erased the bar already).
python3 - "$work/typescript" <<'PY' || fail "synkrun's line does not follow an erased bar"
import sys
text = open(sys.argv[1], "rb").read()
at = text.find(b"synkrun: stopped by signal 2")
sys.exit(0 if at > 0 and (text[:at].endswith(b"\r\x1b[K") or text[:at].endswith(b"\n")) else 1)
PY
echo "interrupt passed"
