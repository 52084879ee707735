# The two commands of the README:
#   make run    install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
# and `make build`. Variables: BUILD (build directory), CMAKE_ARGS (extra configure flags).

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
PACKAGES   := g++ make cmake pkg-config openmpi-bin libopenmpi-dev libhwloc-dev \
              libgtest-dev libcli11-dev nlohmann-json3-dev libeigen3-dev zlib1g-dev \
              dataset-fashion-mnist
# Open MPI refuses to start as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

.PHONY: all deps configure build test run clean

all: build

deps:
	@scripts/ensure-deps.sh $(PACKAGES)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Multi-rank tests oversubscribe the 2 cores on their own, so ctest runs one test at a time.
test: build
	@cd $(BUILD) && ctest --output-on-failure

run: build
	@echo "synk: collective benchmark, 2 ranks, MPI backend beside the raw MPI call"
	mpirun -np 2 --oversubscribe $(BUILD)/bin/synk-bench all -b 8 -e 16M

clean:
	rm -rf $(BUILD)
