#!/usr/bin/env bash
# Faults across hosts, with SYNK_TIMEOUT=10:
# - a rank SIGKILLed on hostB: synkrun names the rank and host, exits non-zero, well within
#   SYNK_TIMEOUT;
# - hostB's daemon SIGKILLed: synkrun names hostB, within 15 s;
# - hostB's link cut in the middle of a large all_reduce: every rank on every host ends with an
#   error within SYNK_TIMEOUT + 6 s, and synkrun (whose mpirun waits for hostB's daemon) within
#   SYNK_TIMEOUT + 20 s, naming hostB as the host none of whose ranks said why;
# - every process of hostB stopped (SIGSTOP) in the middle of small all_reduces: no rank of
#   hostA is blamed for its leader's wait between the nodes, and synkrun names hostB;
# and after each, no rank on any host and nothing in any host's /dev/shm.
# Usage: faults_hosts.sh BIN_DIR
source "$(dirname "$0")/case_lib.sh"
PROBE=$BIN/host_probe
export SYNK_TIMEOUT=10

# start_all_reduce NAME COUNT: a 2 x 2 job all-reducing COUNT floats until it fails.
start_all_reduce() {
  on_host hostA timeout -s KILL 90 "$SYNKRUN" -H hostA:2,hostB:2 -x SYNK_TIMEOUT "$PROBE" \
    allreduce "$2" > "$WORK/$1.out" 2>&1 &
  JOB=$!
  LAST_NAME=$1
  wait_for "$WORK/$1.out" "all_reduce running" 30
}

bed_up hostA hostB
echo "a rank SIGKILLed on hostB"
start_all_reduce killed 100000
victim=$(program_pids hostB host_probe | head -1)
start=$(date +%s.%N)
kill -9 "$victim"
wait $JOB
RC=$?
echo "  synkrun: exit $RC in $(since "$start") s"
[ "$RC" != 0 ] || fail "a killed rank: synkrun exit 0"
# Named with its host by mpirun, whose line synkrun repeats when it is the first failure it
# reads (a busy machine may let the other rank of hostB, which saw it die, report first). On a
# busy machine (seen in CI) a rank of hostA writing to the dead one may end by SIGPIPE and be
# reported first: synkrun then notes that the broken pipe's cause went before it.
pipe="^synkrun: note: a broken pipe: .* went away before it$"
named="process rank [23] with PID $victim on node hostB exited on signal 9"
expect_in "$WORK/killed.out" "$named|$pipe" \
  "mpirun names the killed rank and its host (or synkrun a broken pipe's earlier cause)"
killed_first="^synkrun: rank [23] on hostB \(signal 9, Killed\) failed first; exit code 137$"
exited_first="^synkrun: rank [0-3] on host[AB] \(exit code [0-9]+\) failed first"
piped_first="^synkrun: rank [01] on hostA \(signal 13, Broken pipe\) failed first"
expect_in "$WORK/killed.out" "$killed_first|$exited_first|$piped_first" \
  "synkrun names the first failing rank"
awk -v t="$(since "$start")" 'BEGIN { exit !(t < 10) }' || fail "a killed rank: the job took $(since "$start") s"
expect_hosts_clean host_probe "after the killed rank"
bed_down

bed_up hostA hostB
echo "hostB's daemon (orted) SIGKILLed in the middle of an all_reduce"
start_all_reduce orted 100000
start=$(date +%s.%N)
kill -9 $(program_pids hostB orted)
wait $JOB
RC=$?
echo "  synkrun: exit $RC in $(since "$start") s"
[ "$RC" != 0 ] || fail "a killed daemon: synkrun exit 0"
# mpirun names the host, and synkrun's line with it. On a busy machine (seen in CI) mpirun may
# first report a rank of hostA ended by SIGPIPE as it takes the job down, and never the daemon:
# synkrun then notes that the broken pipe's cause went before it.
lost="^synkrun: error: mpirun could not start or lost its daemon on a host; it lost the one on"
expect_in "$WORK/orted.out" "$lost hostB|$pipe" \
  "synkrun names the host whose daemon was lost (or a broken pipe's earlier cause)"
awk -v t="$(since "$start")" 'BEGIN { exit !(t < 15) }' ||
  fail "a killed daemon: the job took $(since "$start") s"
# Open MPI's own segments (vader_segment.hostB.*) stay on hostB: its daemon removed them.
for h in hostA hostB; do
  [ -z "$(program_pids "$h" host_probe)" ] || fail "after the killed daemon: host_probe on $h"
done
bed_down

bed_up hostA hostB
echo "hostB's link down in the middle of an all_reduce of 4M floats"
start_all_reduce cut 4000000
sleep 0.3
start=$(date +%s.%N)
link_down hostB
ranks_gone=""
while kill -0 $JOB 2>/dev/null; do
  if [ -z "$ranks_gone" ] && [ -z "$(program_pids hostA host_probe; program_pids hostB host_probe)" ]; then
    ranks_gone=$(since "$start")
  fi
  sleep 0.1
done
wait $JOB
RC=$?
[ -n "$ranks_gone" ] || ranks_gone=$(since "$start")
echo "  every rank gone after $ranks_gone s; synkrun: exit $RC after $(since "$start") s"
[ "$RC" != 0 ] && [ "$RC" != 137 ] || fail "a cut link: synkrun exit $RC"
awk -v t="$ranks_gone" 'BEGIN { exit !(t < 16) }' || fail "a cut link: ranks ran $ranks_gone s"
awk -v t="$(since "$start")" 'BEGIN { exit !(t < 30) }' || fail "a cut link: synkrun took $(since "$start") s"
# A Timeout wherever the cut caught them: inside MPI (the watchdog's line), in the comparison
# of the calls, or in hostA's shm step, waiting for hostA's rank that waits inside MPI. (mpirun
# may end the second rank of hostA before it says so.)
expect_in "$WORK/cut.out" "rank on hostA: synk Timeout: |^synk Timeout: rank [01]: " \
  "a rank of hostA says it timed out"
expect_in "$WORK/cut.out" "^synkrun: mpirun has not ended 10 s after it reported the failure" \
  "synkrun stops the mpirun that waits for hostB"
unheard="^synkrun: note: ranks gave up waiting \(synk Timeout\), and no rank on hostB \(ranks 2-3\)"
expect_in "$WORK/cut.out" "$unheard" "synkrun names the host none of whose ranks said why"
expect_hosts_clean host_probe "after the cut link"
echo "  what is left on hostB: $(for p in $(host_pids hostB); do cat /proc/$p/comm; done | tr '\n' ' ')"
bed_down

bed_up hostA hostB
echo "every process of hostB stopped in the middle of all_reduces of 1000 floats"
start_all_reduce frozen 1000
sleep 0.3
start=$(date +%s.%N)
kill -STOP $(host_pids hostB)
wait $JOB
RC=$?
echo "  synkrun: exit $RC after $(since "$start") s"
kill -CONT $(host_pids hostB) 2>/dev/null
[ "$RC" != 0 ] && [ "$RC" != 137 ] || fail "a stopped host: synkrun exit $RC"
awk -v t="$(since "$start")" 'BEGIN { exit !(t < 30) }' ||
  fail "a stopped host: synkrun took $(since "$start") s"
# hostA's leader (rank 0) waits inside MPI for hostB in the call's step between the nodes:
# rank 1, waiting for it, must not say that rank 0 has not reached the call.
expect_not_in "$WORK/frozen.out" "for rank 0, which has not reached this call" \
  "no rank of hostA is blamed for its leader's wait between the nodes"
expect_not_in "$WORK/frozen.out" "rank 0 \(on hostA\) had not reached" \
  "synkrun blames no rank of hostA"
expect_in "$WORK/frozen.out" "$unheard" "synkrun names the stopped host"
# Open MPI's own segments (vader_segment.hostB.*) may stay on hostB, whose daemon was stopped.
for h in hostA hostB; do
  [ -z "$(program_pids "$h" host_probe)" ] || fail "after the stopped host: host_probe on $h"
done
case_end
