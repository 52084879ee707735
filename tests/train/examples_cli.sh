#!/usr/bin/env bash
# The small examples' command line, on one process (no launcher): --help prints a usage and
# exits 0; any argument is a one-line error with exit 2. Before, they ignored every argument and
# ran (--help included).
# Usage: examples_cli.sh EXAMPLE...
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for example in "$@"; do
  name=$(basename "$example")
  "$example" --help > "$work/out" 2> "$work/err" || { echo "$name --help: exit $?"; exit 1; }
  grep -q "^Usage: $name" "$work/out" || { echo "$name --help: no usage"; cat "$work/out"; exit 1; }
  set +e
  "$example" --bogus > "$work/out" 2> "$work/err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "$name --bogus: exit $rc, expected 2"; cat "$work/err"; exit 1; }
  want="$name: The following argument was not expected: --bogus (see --help)"
  [ "$(cat "$work/err")" = "$want" ] ||
    { echo "$name --bogus:"; cat "$work/out" "$work/err"; exit 1; }
  echo "ok: $name"
done
