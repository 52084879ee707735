# The multi-host test bed: N hosts on this machine, each a network namespace with its own
# hostname (UTS namespace), its own /dev/shm and /etc/hosts (mount namespace) and an address on a
# private network that no other interface reaches. Source it, then:
#
#   bed_up hostA hostB ...     make the hosts (the first is where jobs start)
#   on_host HOST CMD...        run CMD on HOST (its namespaces, this environment)
#   host_shm HOST              list HOST's /dev/shm
#   host_pids HOST             the processes running on HOST, the host itself left out
#   link_down HOST             cut HOST off the network
#   bed_down                   remove everything (also run by the trap bed_up sets)
#
# BED_CLEANUP, if set, is run (eval) after bed_down by the traps bed_up sets, which replace the
# caller's own: a case's work folder, say.
# Open MPI reaches the hosts through agent.sh, its rsh agent, which enters a host's namespaces
# where ssh would log in. Every name the bed makes starts with "synkmh-"; everything of a run
# killed before it could clean up is removed by the next bed_up, and a lock keeps two beds apart.

BED_PREFIX=synkmh
BED_DIR=${SYNK_TESTBED_DIR:-/run/synk-multihost}
BED_NET=10.213.7                       # the /24 the bed owns; hosts get .11, .12, ...
BED_SWITCH=$BED_PREFIX-switch          # the namespace holding the bridge, the "switch"
BED_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BED_HOSTS=()

# Exit 77 (ctest's skip) with the reason when this machine cannot host the bed.
bed_require() {
  local why=""
  if [ "$(id -u)" != 0 ]; then why="needs root (network namespaces)"
  elif ! command -v ip >/dev/null; then why="needs iproute2's ip"
  elif ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null; then
    why="needs util-linux's unshare and nsenter"
  elif ! command -v flock >/dev/null; then why="needs util-linux's flock"
  elif ! ip netns add "$BED_PREFIX-probe$$" 2>/dev/null; then why="cannot make a network namespace"
  fi
  ip netns del "$BED_PREFIX-probe$$" 2>/dev/null
  if [ -n "$why" ]; then
    echo "SKIP: multi-host test bed $why" >&2
    exit 77
  fi
}

bed_log() { echo "testbed: $*" >&2; }

# Removes whatever a bed made, this one's or a killed run's.
bed_clean() {
  local f pid ns
  for f in "$BED_DIR"/*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    rm -f "$f"
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^$BED_PREFIX-"); do
    # Processes left on a host (a rank that outlived its job) go with it.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -f "$BED_DIR"/hosts "$BED_DIR"/*.ip
}

bed_down() {
  trap - EXIT INT TERM HUP
  bed_clean
  [ -n "${BED_LOCKER:-}" ] && kill "$BED_LOCKER" 2>/dev/null
  BED_LOCKER=""
}

# Starts HOST: a namespace holder process whose namespaces the host's processes join.
bed_start_host() {
  local host=$1 index=$2 ns="$BED_PREFIX-$1" ip="$BED_NET.$((10 + $2))"
  ip netns add "$ns" || return 1
  ip -n "$BED_SWITCH" link add "h$index" type veth peer name eth0 netns "$ns" || return 1
  ip -n "$BED_SWITCH" link set "h$index" master br0 up || return 1
  ip -n "$ns" addr add "$ip/24" dev eth0 && ip -n "$ns" link set eth0 up &&
    ip -n "$ns" link set lo up || return 1
  echo "$ip" > "$BED_DIR/$host.ip"
  rm -f "$BED_DIR/$host.ready"
  ip netns exec "$ns" unshare --uts --mount --propagation private sh -c '
      hostname "$1" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm &&
        mount --bind "$2" /etc/hosts && touch "$3" && exec sleep infinity' \
    holder "$host" "$BED_DIR/hosts" "$BED_DIR/$host.ready" </dev/null >/dev/null 2>&1 &
  echo $! > "$BED_DIR/$host.pid"
  disown $!    # its end at bed_down is no news
  local tries=0
  while [ ! -e "$BED_DIR/$host.ready" ]; do
    tries=$((tries + 1))
    if [ $tries -gt 100 ] || ! kill -0 "$(cat "$BED_DIR/$host.pid")" 2>/dev/null; then
      bed_log "host $host did not start"
      return 1
    fi
    sleep 0.05
  done
  rm -f "$BED_DIR/$host.ready"
}

# Takes the bed's lock, held by a process of its own (flock -o) for as long as this shell lives:
# a file descriptor in this shell would be inherited by every process it starts, and one left
# running would keep the next bed waiting.
bed_lock() {
  local shell=$BASHPID tries=0 news  # (in the command started with & it would be the child's)
  news=$(mktemp)
  flock -o "$BED_DIR.lock" sh -c 'echo locked; while kill -0 "$1" 2>/dev/null; do sleep 0.2; done' \
    locker "$shell" > "$news" 2>&1 &
  BED_LOCKER=$!
  while ! grep -q locked "$news"; do
    if ! kill -0 "$BED_LOCKER" 2>/dev/null; then
      bed_log "cannot lock $BED_DIR.lock: $(cat "$news")"
      rm -f "$news"
      return 1
    fi
    tries=$((tries + 1))
    [ $tries != 20 ] || bed_log "waiting for another bed to end (lock $BED_DIR.lock)"
    sleep 0.1
  done
  rm -f "$news"
  disown "$BED_LOCKER"
}

bed_up() {
  mkdir -p "$BED_DIR"
  bed_lock || return 1
  trap 'bed_down; eval "${BED_CLEANUP:-}"' EXIT
  trap 'bed_down; eval "${BED_CLEANUP:-}"; exit 130' INT
  trap 'bed_down; eval "${BED_CLEANUP:-}"; exit 143' TERM
  trap 'bed_down; eval "${BED_CLEANUP:-}"; exit 129' HUP
  bed_clean
  BED_HOSTS=("$@")
  {
    echo "127.0.0.1 localhost"
    local i=0 h
    for h in "$@"; do
      i=$((i + 1))
      echo "$BED_NET.$((10 + i)) $h"
    done
  } > "$BED_DIR/hosts"
  ip netns add "$BED_SWITCH" && ip -n "$BED_SWITCH" link add br0 type bridge &&
    ip -n "$BED_SWITCH" link set br0 up || { bed_log "cannot make the switch"; return 1; }
  local i=0 h
  for h in "$@"; do
    i=$((i + 1))
    bed_start_host "$h" "$i" || { bed_log "cannot make host $h"; return 1; }
  done
  # Open MPI finds the hosts through the agent and talks only on the bed's network.
  export OMPI_MCA_plm_rsh_agent="$BED_HERE/agent.sh"
  export OMPI_MCA_oob_tcp_if_include="$BED_NET.0/24"
  export OMPI_MCA_btl_tcp_if_include="$BED_NET.0/24"
  export SYNK_TESTBED_DIR="$BED_DIR"
  # The hosts share this machine's cores, more ranks in all than cores, which neither Open MPI
  # nor synk can see from one host: a rank that waits yields its core at once, as both do on a
  # machine they know to be oversubscribed (else a wait spins a time slice away: 8 B all_reduce
  # on 2 hosts x 2 ranks took 5.8 ms instead of 62 us). Each host's processes inherit these.
  export OMPI_MCA_mpi_yield_when_idle=1 SYNK_SHM_SPIN_US=0
  bed_log "hosts ${BED_HOSTS[*]} up on $BED_NET.0/24"
}

bed_holder() {
  local f="$BED_DIR/$1.pid"
  [ -e "$f" ] || { bed_log "no host $1"; return 1; }
  cat "$f"
}

on_host() {
  local host=$1 pid
  shift
  pid=$(bed_holder "$host") || return 255
  nsenter --target "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

host_shm() { on_host "$1" ls -A /dev/shm; }

host_pids() {
  local holder
  holder=$(bed_holder "$1") || return 1
  ip netns pids "$BED_PREFIX-$1" | grep -vx "$holder"
}

link_down() {
  local i=0 h
  for h in "${BED_HOSTS[@]}"; do
    i=$((i + 1))
    [ "$h" = "$1" ] && ip -n "$BED_SWITCH" link set "h$i" down
  done
}
