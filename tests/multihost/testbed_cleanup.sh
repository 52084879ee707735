#!/usr/bin/env bash
# The bed cleans up after itself: after a normal end, after Ctrl-C (SIGINT) and after a failing
# command, nothing it made is left (namespaces, links, holder processes, mounts); after a
# SIGKILL, which no trap sees, the next bed starts clean and works.
# Usage: testbed_cleanup.sh BIN_DIR
source "$(dirname "$0")/case_lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)

# What a bed leaves in this machine: its namespaces and holder processes.
leftovers() {
  ip netns list | awk '{print $1}' | grep "^synkmh-" | tr '\n' ' '
  pgrep -f "^sleep infinity" -a 2>/dev/null | while read -r pid _; do
    [ "$(ip netns identify "$pid" 2>/dev/null | cut -c1-7)" = synkmh- ] && echo -n "holder:$pid "
  done
}

expect_nothing_left() {
  local left
  left=$(leftovers)
  [ -z "$left" ] || fail "$1: left $left"
}

# A bed in another shell that prints "up" once its hosts run, then waits. (Started with SIGINT
# at its default: a shell's background job ignores it, and bash cannot trap an ignored signal.)
start_bed_shell() {
  python3 -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL);
os.execvp("bash", ["bash"] + sys.argv[1:])' -c "source '$HERE/testbed.sh'; bed_up hostA hostB || exit 1
           on_host hostB hostname > '$WORK/bed.host'; echo up; $1" > "$WORK/bed.out" 2>&1 &
  BED_SHELL=$!
  wait_for "$WORK/bed.out" "^up$" 20
}

echo "a bed that ends normally"
start_bed_shell "true"
wait $BED_SHELL
[ "$(cat "$WORK/bed.host")" = hostB ] || fail "hostB's hostname is '$(cat "$WORK/bed.host")'"
expect_nothing_left "after a normal end"

echo "a bed whose command fails"
start_bed_shell "false"
wait $BED_SHELL
expect_nothing_left "after a failing command"

echo "Ctrl-C (SIGINT) to a bed"
start_bed_shell "sleep 60 & echo \$! >> $WORK/sleepers; wait"
kill -INT $BED_SHELL
wait $BED_SHELL
rc=$?
echo "  exit $rc"
[ $rc = 130 ] || fail "a bed stopped by SIGINT: exit $rc, expected 130"
expect_nothing_left "after SIGINT"

echo "SIGKILL to a bed, then a new one"
start_bed_shell "sleep 60 & echo \$! >> $WORK/sleepers; wait"
kill -KILL $BED_SHELL
wait $BED_SHELL 2>/dev/null
echo "  left by the killed bed: $(leftovers)"
[ -n "$(leftovers)" ] || fail "a SIGKILLed bed left nothing: this check shows nothing"
bed_up hostA hostB hostC
[ "$(on_host hostC hostname)" = hostC ] || fail "the bed after a killed one: hostC is not up"
run_job after_kill 60 "$SYNKRUN" -H hostA:1,hostC:1 "$BIN/host_probe" layout
expect_rc 0 "a job on the bed after a killed one"
bed_down
expect_nothing_left "after the bed that followed the killed one"
xargs -r kill < "$WORK/sleepers" 2>/dev/null  # the killed shells' waits
case_end
