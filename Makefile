# The two commands of the README:
#   make run    install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
# and `make build`. Variables: BUILD (build directory), CMAKE_ARGS (extra configure flags).

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
PACKAGES   := g++ make cmake pkg-config openmpi-bin libopenmpi-dev libhwloc-dev \
              libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libeigen3-dev zlib1g-dev \
              dataset-fashion-mnist python3 python3-dev pybind11-dev python3-numpy \
              python3-mpi4py python3-pytest procps iproute2
# (procps: pgrep and pkill in the tests; iproute2: ip, for the multi-host test bed. A container
# image of Debian has neither.)
# Open MPI refuses to start as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps configure build test run clean
# `make -j clean test` would remove the build while it is configured, and `make -j test run`
# would train beside the tests: the goals run one after another.
.NOTPARALLEL:

all: build

deps:
	@scripts/ensure-deps.sh $(PACKAGES)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Multi-rank tests oversubscribe the 2 cores on their own, so ctest runs one test at a time. The
# tests set the SYNK_* variables they need: one exported here (SYNK_BACKEND=mpi, say) would run
# every test on another configuration than it expects, so they go, with CTEST_PARALLEL_LEVEL.
test: build
	@cd $(BUILD) && env $$(env | sed -n 's/^\(SYNK_[A-Za-z0-9_]*\)=.*/-u \1/p') \
	  -u CTEST_PARALLEL_LEVEL ctest --output-on-failure

# 15 epochs (test accuracy passes 0.88 by then) take about 15-25 s on 2 cores.
run: build
	@echo "synk: data-parallel training of an MLP on Fashion-MNIST, 2 ranks, 15 epochs"
	$(BUILD)/bin/synkrun -np 2 $(BUILD)/bin/train_fmnist --epochs 15

clean:
	rm -rf $(BUILD)
