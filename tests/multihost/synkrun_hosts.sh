#!/usr/bin/env bash
# synkrun across the bed's hosts: -H and --hostfile start ranks on every host, each host plans
# its own binding, the layout variables and comm.node() are right (also with the launching host
# named twice), auto picks hier, SYNK_* set where synkrun starts reach every host, a failing
# rank is named with its host; a hostfile without hosts, a mistyped host, a host with fewer
# slots than asked and an unreachable host each end in one clear error.
# Usage: synkrun_hosts.sh BIN_DIR
source "$(dirname "$0")/case_lib.sh"
bed_up hostA hostB hostC
PROBE=$BIN/host_probe

echo "-H hostA:2,hostB:2"
run_job h2x2 60 "$SYNKRUN" -H hostA:2,hostB:2 --report-bindings -x SYNK_LOG=info \
  "$PROBE" layout
expect_rc 0 "-H hostA:2,hostB:2"
for r in 0 1 2 3; do
  host=$([ $r -lt 2 ] && echo hostA || echo hostB)
  node=$((r / 2))
  expect_in "$WORK/h2x2.out" \
    "^layout host=$host rank=$r size=4 SYNK_NODE_RANK=$node node=$node nodes=2 local=$((r % 2))/2 SYNK_LOCAL_RANK=$((r % 2)) backend=hier$" \
    "rank $r's layout"
  expect_in "$WORK/h2x2.out" "^synkrun: host $host rank $r local rank $((r % 2)): gpu -, cpus " \
    "rank $r's binding line (--report-bindings, planned on $host)"
done
expect_in "$WORK/h2x2.out" "\[synk hostB:[0-9]+ r3\] info: backend hier \(auto\) for 4 ranks on 2 nodes" \
  "SYNK_LOG=info on hostB names hier"

echo "--hostfile with uneven slots (hostA 1, hostB 2, hostC 1)"
printf 'hostA slots=1\nhostB slots=2\n# the third host\nhostC slots=1\n' > "$WORK/hostfile"
run_job hostfile 60 "$SYNKRUN" --hostfile "$WORK/hostfile" "$PROBE" layout
expect_rc 0 "--hostfile"
for spec in "0 hostA 0 0/1" "1 hostB 1 0/2" "2 hostB 1 1/2" "3 hostC 2 0/1"; do
  set -- $spec
  expect_in "$WORK/hostfile.out" "^layout host=$2 rank=$1 size=4 SYNK_NODE_RANK=$3 node=$3 nodes=3 local=$4 .*backend=hier$" \
    "rank $1 from the hostfile"
done

echo "-H hostB:2,hostA:1,hostC:1 from hostA (mpirun maps its own host first)"
run_job order 60 "$SYNKRUN" -H hostB:2,hostA:1,hostC:1 "$PROBE" layout
expect_rc 0 "-H with the launching host not first"
for spec in "0 hostA 0 0/1" "1 hostB 1 0/2" "2 hostB 1 1/2" "3 hostC 2 0/1"; do
  set -- $spec
  expect_in "$WORK/order.out" "^layout host=$2 rank=$1 size=4 SYNK_NODE_RANK=$3 node=$3 nodes=3 local=$4 .*backend=hier$" \
    "rank $1 with the launching host listed second"
done

echo "-H hostA:1,$BED_NET.11:1,hostB:2 (hostA named twice: one node, as mpirun counts it)"
run_job alias 60 "$SYNKRUN" -H "hostA:1,$BED_NET.11:1,hostB:2" "$PROBE" layout
expect_rc 0 "-H naming the launching host twice"
for spec in "0 hostA 0 0/2" "1 hostA 0 1/2" "2 hostB 1 0/2" "3 hostB 1 1/2"; do
  set -- $spec
  expect_in "$WORK/alias.out" "^layout host=$2 rank=$1 size=4 SYNK_NODE_RANK=$3 node=$3 nodes=2 local=$4 .*backend=hier$" \
    "rank $1 with hostA also named by its address"
done

echo "SYNK_* set where synkrun starts, and a rank failing on hostB"
run_job synk_env 60 env SYNK_TIMEOUT=7 "$SYNKRUN" -H hostA:1,hostB:1 \
  sh -c 'echo "env host=$(hostname) SYNK_TIMEOUT=${SYNK_TIMEOUT:-unset}"; exit $((SYNK_RANK * 3))'
expect_rc 3 "rank 1 exits 3"
for h in hostA hostB; do
  expect_in "$WORK/synk_env.out" "^env host=$h SYNK_TIMEOUT=7$" "SYNK_TIMEOUT on $h"
done
expect_in "$WORK/synk_env.out" "^synkrun: rank 1 on hostB \(exit code 3\) failed first; exit code 3$" \
  "the failing rank named with its host"

echo "a hostfile that names no host"
printf '# no hosts yet\n\n' > "$WORK/empty_hostfile"
run_job empty_hostfile 30 "$SYNKRUN" --hostfile "$WORK/empty_hostfile" "$PROBE" layout
expect_rc 2 "a hostfile without hosts"
expect_in "$WORK/empty_hostfile.out" "^synkrun: error: hostfile $WORK/empty_hostfile names no host$" \
  "the empty hostfile's error"

echo "a mistyped host"
run_job typo 30 "$SYNKRUN" -H hostA:1,hostX:1 "$PROBE" layout
expect_rc 255 "a mistyped host"
expect_in "$WORK/typo.out" "^synkrun: error: mpirun could not start or lost its daemon on a host; no address here for hostX\." \
  "the mistyped host's error"
[ "${SECONDS_TAKEN%.*}" -lt 20 ] || fail "a mistyped host took $SECONDS_TAKEN s"

echo "a host with fewer slots than asked"
run_job slots 30 "$SYNKRUN" -H hostA:1,hostB:1 -np 3 "$PROBE" layout
expect_rc 2 "fewer slots than ranks"
expect_in "$WORK/slots.out" "^synkrun: error: -np 3 but -H hostA:1,hostB:1 offers 2 slots" \
  "the slots error"
printf 'hostA slots=1\nhostB slots=1\n' > "$WORK/small_hostfile"
run_job slots_file 30 "$SYNKRUN" --hostfile "$WORK/small_hostfile" -np 3 "$PROBE" layout
expect_rc 2 "fewer slots than ranks (hostfile)"
expect_in "$WORK/slots_file.out" "^synkrun: error: .*offers 2 slots" "the hostfile's slots error"

echo "a hostfile that lists a host twice beside slots="
printf 'hostA slots=1\nhostB slots=1\nhostA slots=1\n' > "$WORK/twice_hostfile"
run_job twice 30 "$SYNKRUN" --hostfile "$WORK/twice_hostfile" "$PROBE" layout
expect_rc 2 "a host listed twice (mpirun: an internal error)"
expect_in "$WORK/twice.out" "^synkrun: error: hostfile .*, line 3: hostA is listed again" \
  "the host listed twice"

echo "-np 3 -H hostA:2,hostB:2: each node's notes are of its own ranks"
run_job share 60 "$SYNKRUN" -np 3 -H hostA:2,hostB:2 "$PROBE" layout
expect_rc 0 "-np 3 over 4 slots"
# Before, synkrun planned all 3 ranks on hostA's 2 cores and said they shared them.
if grep -q "share" "$WORK/share.out"; then
  fail "a note of cores shared: $(grep share "$WORK/share.out")"
fi

echo "an unreachable host (hostC's link down)"
link_down hostC
run_job unreachable 60 "$SYNKRUN" -H hostA:1,hostC:1 "$PROBE" layout
[ "$RC" != 0 ] && [ "$RC" -lt 128 ] || fail "an unreachable host: exit $RC"
expect_in "$WORK/unreachable.out" "^synkrun: error: mpirun could not start or lost its daemon on a host" \
  "the unreachable host's error"
[ "${SECONDS_TAKEN%.*}" -lt 30 ] || fail "an unreachable host took $SECONDS_TAKEN s"
expect_hosts_clean host_probe "after the failed starts"
case_end
