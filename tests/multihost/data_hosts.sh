#!/usr/bin/env bash
# Data across hosts: one segment per host, mapped by every rank of that host and by no other,
# the same rows on every rank; checked from outside through each rank's /proc/PID/maps while
# the ranks hold it (a segment's name leaves /dev/shm once every rank of its node has mapped
# it). With SYNK_SHM_SEGMENTS=named the segment must be a file of that host's own /dev/shm
# (its tmpfs's device). Then Shared and master-driven Distributed across hosts: the Synkhronos
# walkthrough (examples/shared_variables) on 2 hosts x 1 rank prints what it prints on one.
# Usage: data_hosts.sh BIN_DIR SOURCE_DIR
source "$(dirname "$0")/case_lib.sh"
SOURCE=$2
bed_up hostA hostB
PROBE=$BIN/host_probe

# segments_of HOST: "pid inode device path bytes" of every synk segment a host_probe rank on
# HOST maps (bytes: the mapping's size).
segments_of() {
  local p range inode dev path
  for p in $(program_pids "$1" host_probe); do
    awk '/synk-/ { print $1, $5, $4, $6 }' "/proc/$p/maps" | sort -u -k2,2 |
      while read -r range inode dev path; do
        echo "$p $inode $dev $path $(( 0x${range#*-} - 0x${range%-*} ))"
      done
  done
}

# One Data run in segment mode $1 (auto or named).
data_run() {
  local mode=$1 go="$WORK/go-$1" h dev
  echo "Data held across hostA:2,hostB:2 (SYNK_SHM_SEGMENTS=$mode)"
  on_host hostA timeout -s KILL 60 "$SYNKRUN" -H hostA:2,hostB:2 -x SYNK_SHM_SEGMENTS="$mode" \
    "$PROBE" data "$go" > "$WORK/data-$mode.out" 2>&1 &
  local job=$!
  wait_for "$WORK/data-$mode.out" "data held" 30 || { kill -9 $job; return; }
  for h in hostA hostB; do
    dev=$(on_host "$h" stat -c '%d' /dev/shm)
    echo "  $h: /dev/shm (tmpfs, device $dev) holds:"
    on_host "$h" ls -l /dev/shm | sed 's/^/    /'
    echo "  $h: synk segments its ranks map (pid, inode, device major:minor, path, bytes):"
    segments_of "$h" | sed 's/^/    /' | tee "$WORK/maps-$mode-$h"
  done
  touch "$go"
  wait $job
  RC=$?
  LAST_NAME=data-$mode
  expect_rc 0 "Data ($mode)"
  local name_a name_b
  name_a=$(data_segment "$mode" hostA "[01]")
  name_b=$(data_segment "$mode" hostB "[23]")
  [ "$(wc -w <<< "$name_a")" = 1 ] && [ "$(wc -w <<< "$name_b")" = 1 ] ||
    fail "Data ($mode): one segment per host with every row right, got hostA '$name_a', hostB '$name_b'"
  [ "$name_a" != "$name_b" ] || fail "Data ($mode): hostA and hostB share segment $name_a"
  check_host_maps "$mode" hostA "$name_a" "$name_b"
  check_host_maps "$mode" hostB "$name_b" "$name_a"
}

# data_segment MODE HOST RANKS: the segment the ranks RANKS (a bracket) on HOST report, each
# with every row right.
data_segment() {
  sed -n "s/^data rank=$3 host=$2 segment=\(\S*\) wrong=0\$/\1/p" "$WORK/data-$1.out" | sort -u
}

# check_host_maps MODE HOST NAME OTHER: both of HOST's ranks map its segment NAME (one file),
# none maps the other host's (OTHER); with named segments, NAME is in HOST's own /dev/shm.
check_host_maps() {
  local mode=$1 h=$2 maps="$WORK/maps-$1-$2" base=${3#*:} other=${4#*:} dev mm
  base=${base#/}
  other=${other#/}
  [ "$(grep -- "$base" "$maps" | awk '{print $1}' | sort -u | wc -l)" = 2 ] ||
    fail "Data ($mode): $h's ranks do not both map $3"
  [ "$(grep -- "$base" "$maps" | awk '{print $2}' | sort -u | wc -l)" = 1 ] ||
    fail "Data ($mode): $h's ranks map different files named $3"
  ! grep -q -- "$other" "$maps" || fail "Data ($mode): $h maps the other host's segment $4"
  [ "$mode" = named ] || return 0
  dev=$(on_host "$h" stat -c '%d' /dev/shm)
  # maps gives the device as hex major:minor; stat's %d is major*256+minor here.
  for mm in $(grep -- "/dev/shm/$base" "$maps" | awk '{print $3}' | sort -u); do
    [ $(( 0x${mm%:*} * 256 + 0x${mm#*:} )) = "$dev" ] ||
      fail "Data (named): $h's segment is on device $mm, not its /dev/shm ($dev)"
  done
}

data_run auto
data_run named
expect_hosts_clean host_probe "after the Data runs"

echo "the Synkhronos walkthrough (Shared, Function, master-driven Distributed) on 2 hosts"
printf '#!/bin/sh\nexec %s -H hostA:1,hostB:1 "$@"\n' "$SYNKRUN" > "$WORK/synkrun_2hosts"
chmod +x "$WORK/synkrun_2hosts"
run_job walkthrough 60 "$SOURCE/tests/data/check_shared_variables.sh" "$WORK/synkrun_2hosts" \
  "$BIN/shared_variables"
expect_rc 0 "the walkthrough across hosts"
expect_in "$WORK/walkthrough.out" "^walkthrough output as expected$" "the walkthrough's values"
expect_hosts_clean shared_variables "after the walkthrough"
case_end
