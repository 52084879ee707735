#!/bin/sh
# PROGRAM for the launcher tests: prints what the rank step gave this rank, on one line, then
# fails, dies of a signal or sleeps as PROBE_* variables ask.
allowed=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/$$/status)
echo "probe rank=${SYNK_RANK-unset} world=${SYNK_WORLD_SIZE-unset} local=${SYNK_LOCAL_RANK-unset}" \
     "lsize=${SYNK_LOCAL_SIZE-unset} node=${SYNK_NODE_RANK-unset} gpu=[${SYNK_GPU-unset}]" \
     "cpus=${SYNK_CPUS-unset} allowed=$allowed order=${CUDA_DEVICE_ORDER-unset}" \
     "ompi_rank=${OMPI_COMM_WORLD_RANK-unset} ompi_local=${OMPI_COMM_WORLD_LOCAL_RANK-unset}" \
     "foo=${FOO-unset} exported=${PROBE_EXPORTED-unset} args=$*"
if [ -n "$PROBE_PIDDIR" ]; then echo $$ > "$PROBE_PIDDIR/rank$SYNK_RANK"; fi
if [ "${PROBE_FAIL_RANK-}" = "$SYNK_RANK" ]; then
  sleep 0.2
  if [ -n "${PROBE_FAIL_SIGNAL-}" ]; then kill -"$PROBE_FAIL_SIGNAL" $$; fi
  exit "${PROBE_FAIL_CODE:-1}"
fi
if [ -n "${PROBE_SLEEP-}" ]; then exec sleep "$PROBE_SLEEP"; fi
exit 0
