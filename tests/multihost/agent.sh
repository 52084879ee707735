#!/usr/bin/env bash
# Open MPI's rsh agent for the test bed (plm_rsh_agent): called as "agent.sh [options] HOST
# COMMAND...", like ssh, it runs COMMAND through a shell on HOST by entering HOST's namespaces.
# A host the bed does not have fails as ssh does for an unknown host: a message and exit 255.
# COMMAND starts from a clean environment, as sshd starts it, so that what reaches another
# host's ranks is only what mpirun forwards (the bed's own directory kept, for a daemon that
# starts the next host's; and a sanitizer build's options, which a login shell would set).
dir=${SYNK_TESTBED_DIR:-/run/synk-multihost}
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done   # ssh options: none apply here
host=${1:-}
shift
holder=$(cat "$dir/$host.pid" 2>/dev/null)
if [ -z "$holder" ] || ! kill -0 "$holder" 2>/dev/null; then
  echo "ssh: Could not resolve hostname $host: Name or service not known (test bed)" >&2
  exit 255
fi
exec nsenter --target "$holder" --net --uts --mount -- env -i PATH="$PATH" HOME="${HOME:-/}" \
  ${LD_LIBRARY_PATH+LD_LIBRARY_PATH="$LD_LIBRARY_PATH"} SYNK_TESTBED_DIR="$dir" \
  ${ASAN_OPTIONS+ASAN_OPTIONS="$ASAN_OPTIONS"} ${UBSAN_OPTIONS+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
  ${LSAN_OPTIONS+LSAN_OPTIONS="$LSAN_OPTIONS"} /bin/sh -c "$*"
