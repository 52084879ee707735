#!/usr/bin/env bash
# Fills a folder (default .gpu-debs) with the Debian packages scripts/gpu-check.sh unpacks on a
# GPU machine that has CUDA but no package registry: Open MPI, hwloc, GoogleTest, CLI11,
# nlohmann-json, Eigen, zlib's headers, pkg-config and the Fashion-MNIST dataset, with the
# runtime libraries they need. Run it on a Debian machine (12 or later) with apt-get.
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")/.." && pwd)/.gpu-debs}
mkdir -p "$dir"
cd "$dir"
apt-get download \
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev \
  libhwloc15 libhwloc-plugins libhwloc-dev hwloc-nox \
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 \
  librdmacm1 libnl-3-200 libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libmunge2 libnuma1 \
  libpciaccess0 libltdl7 libxml2 libicu72 \
  libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev libeigen3-dev zlib1g-dev \
  pkgconf pkgconf-bin libpkgconf3 dataset-fashion-mnist
echo "$(ls "$dir"/*.deb | wc -l) packages, $(du -sh "$dir" | cut -f1), in $dir"
