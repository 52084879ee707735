#!/usr/bin/env bash
# The GPU machine's check (issue 34): on a fresh machine with NVIDIA GPUs, installs what is
# missing, builds with every core, and runs, each step against what is left of one deadline:
#   tests     every NCCL/device test against the real CUDA runtime and NCCL, one rank per GPU,
#             and train.device_cuda (train_fmnist --device cuda against the CPU run)
#   synkrun   the machine's topology (hwloc XML), synkrun --dry-run --json, --report-bindings
#   nccl      synk-bench --backend nccl, all collectives, 8 B to 1 GiB, beside raw NCCL calls
#   train     train_fmnist for 3 epochs: --device cuda (when built) against the CPU run
#   shm       the shm-vs-Open-MPI table on 2, 4, 8 and 16 ranks, every collective of synk-bench
#   kv        issue 33's KeyValue figures on this host: bench_fusion.sh and bench_overlap.sh
#   suite     (only when named) every target built and the whole ctest suite run on this host
# Everything goes to one results folder, at most 8 files (summary.md first).
#
# Usage: scripts/gpu-check.sh [RESULTS_DIR]      (default: $OUT, else gpu-check-results)
# Environment:
#   SYNK_GPU_CHECK_BUDGET  seconds for the whole run (default 450); a step that would pass it
#                          is cut short, and the ones after it are listed as not run
#   SYNK_GPU_CHECK_STEPS   the steps to run (default: "tests synkrun nccl train shm kv")
#   SYNK_GPU_DEBS          a folder of Debian .deb files, unpacked into a prefix when the
#                          machine lacks Open MPI, hwloc, GoogleTest...; without one, the
#                          packages come from apt-get (scripts/ensure-deps.sh).
#                          scripts/fetch-gpu-debs.sh fills it (default: .gpu-debs)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RESULTS=${1:-${OUT:-$ROOT/gpu-check-results}}
BUDGET=${SYNK_GPU_CHECK_BUDGET:-450}
STEPS=${SYNK_GPU_CHECK_STEPS:-"tests synkrun nccl train shm kv"}
DEBS=${SYNK_GPU_DEBS:-$ROOT/.gpu-debs}
BUILD=$ROOT/build-gpu
PREFIX=/opt/synk-gpu-deps
JOBS=$(nproc)
START=$SECONDS
SUMMARY=$RESULTS/summary.md
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI wants an rsh agent even to start ranks on this node alone.
command -v ssh >/dev/null || command -v rsh >/dev/null || export OMPI_MCA_plm_rsh_agent=false
mkdir -p "$RESULTS"
: > "$SUMMARY"

say() { echo "$*" >> "$SUMMARY"; }  # the whole summary is printed once, at the end
left() { echo $((BUDGET - (SECONDS - START))); }
wanted() { [[ " $STEPS " == *" $1 "* ]]; }

# run_step NAME CAP LOG CMD...: CMD with a timeout of CAP seconds or what is left of the
# budget, whichever is less; its output is appended to LOG. One summary line says how it went.
run_step() {
  local name=$1 cap=$2 log=$3 rc t0=$SECONDS
  shift 3
  local limit
  limit=$(left)
  [ "$cap" -lt "$limit" ] && limit=$cap
  if [ "$limit" -lt 5 ]; then
    say "- $name: not run (the budget of ${BUDGET} s is spent)"
    return 99
  fi
  echo "gpu-check: $name (limit ${limit} s)" >&2
  echo "### $name ($(date -u +%T), limit ${limit} s): $*" >> "$log"
  timeout -k 5 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  local verdict="ok"
  [ "$rc" -ne 0 ] && verdict="FAILED (exit $rc)"
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && verdict="CUT at ${limit} s"
  say "- $name: $verdict in $((SECONDS - t0)) s (log: $(basename "$log"))"
  return "$rc"
}

# --- dependencies -------------------------------------------------------------------------
have_deps() {
  command -v mpirun >/dev/null && command -v mpicxx >/dev/null &&
    pkg-config --exists hwloc 2>/dev/null && [ -e /usr/include/gtest/gtest.h ] &&
    [ -e /usr/include/CLI/CLI.hpp ] && [ -e /usr/include/eigen3/Eigen/Core ]
}

# The .deb files' contents under PREFIX. A runtime library the machine already has is left out
# (the carried ones are Debian 12's, maybe older), except Open MPI's stack and hwloc, which must
# match one another.
unpack_debs() {
  local f name so kept=() skipped=()
  for f in "$DEBS"/*.deb; do
    name=$(dpkg-deb -f "$f" Package)
    case $name in
      libopenmpi3 | libhwloc15 | libhwloc-plugins | libpmix2 | libucx0 | libfabric1 | *-dev) ;;
      lib*)
        so=$(dpkg-deb -c "$f" | awk '{print $6}' | grep -E '/lib[^/]*\.so\.[0-9]+$' | head -1)
        if [ -n "$so" ] && ldconfig -p | grep -q "/$(basename "$so")\$"; then
          skipped+=("$name")
          continue
        fi
        ;;
    esac
    dpkg -x "$f" "$PREFIX"
    kept+=("$name")
  done
  say "- unpacked into $PREFIX: ${kept[*]}"
  [ ${#skipped[@]} -gt 0 ] && say "- the machine's own: ${skipped[*]}"
  # What Debian's alternatives would link.
  local t
  for t in mpirun mpiexec mpicc mpicxx mpic++; do
    [ -e "$PREFIX/usr/bin/$t.openmpi" ] && ln -sf "$t.openmpi" "$PREFIX/usr/bin/$t"
  done
  return 0
}

use_prefix() {
  local lib=$PREFIX/usr/lib/x86_64-linux-gnu
  export PATH=$PREFIX/usr/bin:$PATH
  local libs=$lib:$lib/openmpi/lib:$PREFIX/lib/x86_64-linux-gnu
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export OPAL_PREFIX=$PREFIX/usr                     # Open MPI's relocation
  export HWLOC_PLUGINS_PATH=$lib/hwloc
  export PMIX_PREFIX=$lib/pmix2                      # PMIx's relocation, and its plugins
  export PMIX_MCA_mca_base_component_path=$lib/pmix2/lib/pmix
  export OMPI_MCA_mca_base_component_show_load_errors=0  # (no EFA, PSM: not used here)
  export PKG_CONFIG_PATH=$lib/pkgconfig:$PREFIX/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$PREFIX
  export CMAKE_PREFIX_PATH=$PREFIX/usr
  export CPATH=$PREFIX/usr/include/x86_64-linux-gnu   # the multiarch headers (hwloc's config.h)
}

# One package out of the carried ones, into PREFIX, for what the machine lacks alone.
unpack_one() {
  local f
  f=$(compgen -G "$DEBS/$1_*.deb" | head -1)
  [ -n "$f" ] || return 1
  dpkg -x "$f" "$PREFIX" && say "- unpacked into $PREFIX: $1"
}

# The dataset unpacked under PREFIX, also where the tests look for it (/usr/share/datasets, as
# the Debian package puts it) when this runs as root.
link_dataset() {
  local unpacked=$PREFIX/usr/share/datasets/fashion-mnist
  [ -e "$unpacked" ] || return 1
  if [ "$(id -u)" -eq 0 ] && mkdir -p /usr/share/datasets &&
    ln -sfn "$unpacked" /usr/share/datasets/fashion-mnist; then
    say "- linked /usr/share/datasets/fashion-mnist to $unpacked"
  else
    DATA=$unpacked
  fi
}

DATA=/usr/share/datasets/fashion-mnist
install_deps() {
  if have_deps; then
    say "- dependencies: the machine's own"
    mkdir -p "$PREFIX"
    [ -e "$DATA" ] || { unpack_one dataset-fashion-mnist && link_dataset; }
    command -v lstopo-no-graphics >/dev/null || { unpack_one hwloc-nox &&
      export PATH=$PATH:$PREFIX/usr/bin; }
  elif compgen -G "$DEBS/*.deb" >/dev/null; then
    rm -rf "$PREFIX" && mkdir -p "$PREFIX" && unpack_debs && use_prefix
    [ -e "$DATA" ] || link_dataset
  else
    "$ROOT/scripts/ensure-deps.sh" g++ make cmake pkg-config openmpi-bin libopenmpi-dev \
      libhwloc-dev libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libeigen3-dev \
      zlib1g-dev dataset-fashion-mnist hwloc-nox
  fi
}

# NCCL from NCCL_HOME, the CUDA toolkit, /usr, or Python's nvidia-nccl wheel (whose library has
# no unversioned name: a folder with one beside its headers is made for it).
find_nccl() {
  local d wheel
  for d in "${NCCL_HOME:-}" /usr/local/cuda /usr; do
    if [ -n "$d" ] && [ -e "$d/include/nccl.h" ]; then
      echo "$d"
      return
    fi
  done
  for d in $(find / -xdev -name nccl.h -path '*nvidia*' 2>/dev/null); do
    wheel=$(dirname "$(dirname "$d")")
    compgen -G "$wheel/lib/libnccl.so*" >/dev/null || continue
    mkdir -p /tmp/synk-nccl/lib
    ln -sfn "$wheel/include" /tmp/synk-nccl/include
    ln -sf "$(ls "$wheel"/lib/libnccl.so* | head -1)" /tmp/synk-nccl/lib/libnccl.so
    echo /tmp/synk-nccl
    return
  done
}

machine_facts() {
  local commit gpus memory
  commit=${SYNK_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)}
  gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version,pci.bus_id \
    --format=csv,noheader 2>&1 | head -4 | tr '\n' ';')
  memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
  say "# synk GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit ${commit:-unknown}"
  say ""
  say "- machine: $(nproc) cores, $memory, $(uname -r)"
  say "- GPU: $gpus"
  say "- nvcc: $(nvcc --version 2>/dev/null | tail -1); cmake: $(cmake --version | head -1)"
  say "- g++: $(g++ --version | head -1)"
  say "- CUDA_VISIBLE_DEVICES: ${CUDA_VISIBLE_DEVICES:-unset}"
}

# --- the steps ----------------------------------------------------------------------------
build() {
  local nccl_home
  nccl_home=$(find_nccl)
  say "- NCCL: ${nccl_home:-not found}"
  [ -n "$nccl_home" ] && export NCCL_HOME=$nccl_home   # cmake/SynkCuda.cmake looks there
  if [ "$nccl_home" = /tmp/synk-nccl ]; then
    LD_LIBRARY_PATH=$(dirname "$(readlink -f /tmp/synk-nccl/lib/libnccl.so)"):$LD_LIBRARY_PATH
    export LD_LIBRARY_PATH
  fi
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # CMAKE_POLICY_VERSION_MINIMUM: CMake 4 refuses older packages' configs without it.
  run_step configure 120 "$RESULTS/build.log" cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DSYNK_WITH_NCCL=ON -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    "-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-}" || return 1
  run_step build 300 "$RESULTS/build.log" cmake --build "$BUILD" -j "$JOBS" --target \
    synkrun synk-bench train_fmnist bench_fusion nccl_raw_avg_one_rank nccl_group_thread_probe \
    nccl_auto_route_test \
    nccl_collectives_test nccl_device_api_test \
    nccl_no_device_test nccl_contexts_test nccl_device_choice_test
}

tests() {
  say ""
  say "## Tests against the real CUDA runtime and NCCL"
  # -V: every test's own lines, so that the log shows which cases ran and which skipped.
  run_step tests 150 "$RESULTS/tests.log" ctest --test-dir "$BUILD" -V \
    -R '^nccl_|^train.device_cuda$' -E 'fake|one_gpu|no_context' -j 4
  sed 's/\x1b\[[0-9;]*m//g' "$RESULTS/tests.log" |
    grep -E "tests passed|Failed|Not Run|\*\*\*|Test +#|FAILED  \]|SKIPPED \] [A-Z]|PASSED|asked: |libcuda is|: train_loss gpu" |
    grep -v "^###" | sed 's/^[0-9]*: //; s/^/    /' >> "$SUMMARY"
  run_step "NCCL alone: one-rank ncclAvg (exit 1 while its wrong element remains)" 30 "$RESULTS/tests.log" \
    "$BUILD/bin/nccl_raw_avg_one_rank"
  run_step "NCCL alone: a group call, blocking and non-blocking communicator" 60 \
    "$RESULTS/tests.log" "$BUILD/bin/nccl_group_thread_probe"
  grep -E "^NCCL|^raw_avg|^group_thread" "$RESULTS/tests.log" | sed 's/^/    /' >> "$SUMMARY"
}

synkrun_checks() {
  local out=$RESULTS/synkrun.txt gpus=()
  say ""
  say "## synkrun on this machine's topology"
  [ -n "${CUDA_VISIBLE_DEVICES:-}" ] && gpus=(--gpus "$CUDA_VISIBLE_DEVICES")
  if command -v lstopo-no-graphics >/dev/null; then
    lstopo-no-graphics --of xml "$RESULTS/topology.xml" 2>> "$out"
    lstopo-no-graphics --of console --no-caches 2>&1 | head -40 >> "$out"
  fi
  run_step "synkrun --dry-run --json" 30 "$out" "$BUILD/bin/synkrun" "${gpus[@]}" --dry-run \
    --json /bin/true
  run_step "synkrun --report-bindings" 60 "$out" "$BUILD/bin/synkrun" "${gpus[@]}" \
    --report-bindings /bin/true
  run_step "synkrun -np 4 (more ranks than GPUs: on cores, with a note)" 60 "$out" \
    "$BUILD/bin/synkrun" "${gpus[@]}" -np 4 --report-bindings /bin/true
  run_step "synkrun -np 4 --bind core --report-bindings" 60 "$out" \
    "$BUILD/bin/synkrun" "${gpus[@]}" -np 4 --bind core --report-bindings /bin/true
  grep -E '"gpu|cpus|numa|rank [0-9]|GPU|warning|error' "$out" | grep -v '^###' | head -40 |
    sed 's/^/    /' >> "$SUMMARY"
}

nccl_bench() {
  local out=$RESULTS/bench-nccl.txt ngpu
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  [ "$ngpu" -ge 1 ] || ngpu=1
  say ""
  say "## synk-bench --backend nccl beside raw NCCL ($ngpu rank(s), one per GPU)"
  for coll in all gather scatter; do
    run_step "nccl $coll" 150 "$out" "$BUILD/bin/synkrun" -np "$ngpu" "$BUILD/bin/synk-bench" \
      "$coll" -b 8 -e 1G --backend nccl --baseline nccl --json "/tmp/synk-nccl-$coll.json"
  done
  grep -E "^# [a-z_]+ \(nccl\)|#wrong total" "$out" | sed 's/^/    /' >> "$SUMMARY"
  python3 "$ROOT/scripts/gpu_check_verdict.py" nccl /tmp/synk-nccl-{all,gather,scatter}.json \
    >> "$SUMMARY" 2>&1
}

train() {
  local out=$RESULTS/train.txt
  say ""
  say "## train_fmnist, 3 epochs"
  if "$BUILD/bin/train_fmnist" --help | grep -q -- '--device'; then
    run_step "train --device cuda, 1 rank" 120 "$out" "$BUILD/bin/synkrun" -np 1 \
      "$BUILD/bin/train_fmnist" --epochs 3 --device cuda --data "$DATA" --json /tmp/synk-gpu.json
  else
    say "- train --device cuda: not built yet (train_fmnist has no --device option)"
  fi
  run_step "train on the CPU, 1 rank" 120 "$out" "$BUILD/bin/synkrun" -np 1 --bind core \
    "$BUILD/bin/train_fmnist" --epochs 3 --data "$DATA" --json /tmp/synk-cpu1.json
  run_step "train on the CPU, $JOBS ranks" 120 "$out" "$BUILD/bin/synkrun" -np "$JOBS" \
    --bind core "$BUILD/bin/train_fmnist" --epochs 3 --data "$DATA" --json /tmp/synk-cpuN.json
  for j in /tmp/synk-gpu.json /tmp/synk-cpu1.json /tmp/synk-cpuN.json; do
    [ -e "$j" ] && python3 - "$j" >> "$SUMMARY" <<'PY'
import json, sys
recs = json.load(open(sys.argv[1]))
recs = recs.get("epochs", recs) if isinstance(recs, dict) else recs
print(f"    {sys.argv[1]}: " + "; ".join(
    ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items())
    for r in recs))
PY
  done
}

shm_tables() {
  local out=$RESULTS/bench-host.txt n coll jsons=()
  say ""
  say "## shm against Open MPI"
  for n in 2 4 8 16; do
    [ "$n" -gt "$JOBS" ] && continue
    for coll in allreduce broadcast allgather reduce reduce_scatter gather scatter; do
      run_step "shm $coll, $n ranks" 60 "$out" mpirun -np "$n" --bind-to core --map-by core \
        "$BUILD/bin/synk-bench" "$coll" -b 16 -e 16M -f 4 -n 10 -w 3 --backend shm \
        --json "/tmp/synk-shm-$coll-$n.json"
      jsons+=("/tmp/synk-shm-$coll-$n.json")
    done
  done
  grep -E "^# [a-z_]+ \(shm\): avg" "$out" | sed 's/^/    /' >> "$SUMMARY"
  python3 "$ROOT/scripts/gpu_check_verdict.py" shm "${jsons[@]}" >> "$SUMMARY" 2>&1
}

# KeyValue's fusion (1,000 keys of 4 KiB per step against MPI) and train_fmnist --overlap, where
# each rank has cores to spare for the engine thread.
key_value() {
  say ""
  say "## KeyValue: fusion and overlap"
  export SYNKRUN_ARGS="--bind core"  # 2 ranks, whatever the number of GPUs
  run_step "bench_fusion.sh, 2 ranks" 60 "$RESULTS/bench-host.txt" \
    "$ROOT/benchmarks/bench_fusion.sh" "$BUILD/bin" 2
  grep -E "^(kv|all_reduce|MPI_Allreduce|mode) " "$RESULTS/bench-host.txt" | sed 's/^/    /' \
    >> "$SUMMARY"
  run_step "bench_overlap.sh, 3 epochs" 150 "$RESULTS/train.txt" \
    "$ROOT/benchmarks/bench_overlap.sh" "$BUILD/bin" 3 1 --data "$DATA"
  sed -n '/^ranks  mode/,$p' "$RESULTS/train.txt" | grep -v '^###' | sed 's/^/    /' \
    >> "$SUMMARY"
}

# The whole suite on this host's cores (CI runs it on 2): what differs on another distribution,
# Open MPI and core count. Failures are listed in the summary, with the log.
whole_suite() {
  say ""
  say "## The whole ctest suite here"
  run_step "build all" 240 "$RESULTS/suite.log" cmake --build "$BUILD" -j "$JOBS" || return
  run_step "ctest -j $((JOBS / 2))" 600 "$RESULTS/suite.log" ctest --test-dir "$BUILD" \
    -j $((JOBS / 2)) --output-on-failure
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(Not Run\)|Total Test time" \
    "$RESULTS/suite.log" | sed 's/^/    /' >> "$SUMMARY"
}

# --- main ---------------------------------------------------------------------------------
machine_facts
install_deps || { say "- dependencies: FAILED"; cat "$SUMMARY"; exit 1; }
if ! build; then
  say "- stopping: the build failed (build.log)"
  tail -40 "$RESULTS/build.log"
  cat "$SUMMARY"
  exit 1
fi
wanted tests && tests
wanted synkrun && synkrun_checks
wanted nccl && nccl_bench
wanted train && train
wanted shm && shm_tables
wanted kv && key_value
wanted suite && whole_suite
say ""
say "- total: $((SECONDS - START)) s of a ${BUDGET} s budget"
cat "$SUMMARY"
