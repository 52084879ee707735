# Sourced by the benchmark scripts. require_tools BIN TOOL...: each TOOL is a program in BIN, or
# one line says which is missing and the script ends with exit 2 (before any run starts).
require_tools() {
  local bin=$1 tool
  shift
  for tool in "$@"; do
    [ -x "$bin/$tool" ] && continue
    echo "$(basename "$0"): no $bin/$tool (run make build first)" >&2
    exit 2
  done
}
