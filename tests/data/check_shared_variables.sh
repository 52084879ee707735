#!/usr/bin/env bash
# Usage: check_shared_variables.sh SYNKRUN SHARED_VARIABLES
set -euo pipefail
out=$("$1" -np 2 "$2")
echo "$out"
expected='[1 1]
[10 10]
[3 3]
[[3 3] [7 7]]
[10 10]
[[10 10] [7 7]]
[[10 10] [10 10]]
[3.5]
[10 10]
[5 5]
[[2 3] [4 5]]
[8 8]'
got=$(echo "$out" | sed 's/^[^[]*//')
if [ "$got" != "$expected" ]; then
  echo "unexpected values:"; echo "$got"; exit 1
fi
echo "walkthrough output as expected"
