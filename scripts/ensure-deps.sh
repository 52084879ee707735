#!/usr/bin/env bash
# Installs the Debian packages synk needs, when some are missing: with apt-get when running as
# root, otherwise prints the exact apt-get line to run and fails.
# Usage: scripts/ensure-deps.sh PACKAGE...
set -euo pipefail
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "synk: missing packages (${missing[*]}) and no apt-get on this machine; install their equivalents." >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "synk: missing packages: ${missing[*]}" >&2
  echo "synk: run this as root (or with sudo before each apt-get), then try again:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "synk: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
