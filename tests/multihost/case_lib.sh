# What the multihost_* cases share: the bed, a work folder, and checks that say what failed.
# A case script sources this with the build's bin folder as $1 and calls bed_up itself.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/testbed.sh"
bed_require

BIN=$(cd "$1" && pwd)
SYNKRUN=$BIN/synkrun
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d /tmp/synk-multihost.XXXXXX)
FAILED=0
# Also once bed_up has set its own traps (they run BED_CLEANUP).
BED_CLEANUP='rm -rf "$WORK"'
trap 'bed_down; eval "$BED_CLEANUP"' EXIT

fail() {
  echo "FAIL: $*"
  FAILED=1
}

# expect_in FILE TEXT WHAT: FILE has a line with TEXT (grep -E), else a failure showing FILE.
expect_in() {
  if ! grep -Eq -- "$2" "$1"; then
    fail "$3: no line matching '$2' in:"
    sed 's/^/    | /' "$1" | tail -40
  fi
}

expect_not_in() {
  if grep -Eq -- "$2" "$1"; then
    fail "$3: a line matches '$2':"
    grep -E -- "$2" "$1" | sed 's/^/    | /' | head -10
  fi
}

# Seconds since $1 (a date +%s.%N), to a tenth.
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# run_job NAME LIMIT CMD...: CMD on the first host, its output in $WORK/NAME.out, its exit
# code in $RC and its seconds in $SECONDS_TAKEN; LIMIT seconds at most (then it is killed).
run_job() {
  local name=$1 limit=$2 start
  shift 2
  LAST_NAME=$name
  start=$(date +%s.%N)
  on_host "${BED_HOSTS[0]}" timeout -s KILL "$limit" "$@" > "$WORK/$name.out" 2>&1
  RC=$?
  SECONDS_TAKEN=$(since "$start")
  echo "  $name: exit $RC in $SECONDS_TAKEN s"
}

# expect_rc WANT WHAT: the last run_job's exit code.
expect_rc() {
  if [ "$RC" != "$1" ]; then
    fail "$2: exit $RC, expected $1; output:"
    sed 's/^/    | /' "$WORK/$LAST_NAME.out" 2>/dev/null | tail -40
  fi
}

# wait_for FILE TEXT SECONDS: until FILE has TEXT, or a failure.
wait_for() {
  local tries=$(( $3 * 10 ))
  while ! grep -q -- "$2" "$1" 2>/dev/null; do
    tries=$((tries - 1))
    if [ $tries -le 0 ]; then
      fail "no '$2' in $1 after $3 s"
      return 1
    fi
    sleep 0.1
  done
}

# The pids of PROGRAM's processes on HOST.
program_pids() {
  local p
  for p in $(host_pids "$1"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && echo "$p"
  done
}

# Nothing of the job on any host: no process of PROGRAM, and an empty /dev/shm.
expect_hosts_clean() {
  local h left
  for h in "${BED_HOSTS[@]}"; do
    left=$(program_pids "$h" "$1" | tr '\n' ' ')
    [ -z "$left" ] || fail "$2: $1 still running on $h (pids $left)"
    left=$(host_shm "$h" | tr '\n' ' ')
    [ -z "$left" ] || fail "$2: $h's /dev/shm still has $left"
  done
}

# PASSED, or the end of every job's output, for whoever reads the failure.
# The work folder goes here too: a case's last bed_down has taken the traps away.
case_end() {
  if [ "$FAILED" = 0 ]; then
    echo "PASSED"
    rm -rf "$WORK"
    exit 0
  fi
  local f
  for f in "$WORK"/*.out; do
    [ -e "$f" ] || continue
    echo "--- the end of $(basename "$f")"
    tail -n 30 "$f" | sed 's/^/    | /'
  done
  rm -rf "$WORK"
  exit 1
}
