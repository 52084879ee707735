// Argument parsing shared by the small benchmark tools: CLI11, with the exit codes of synkrun
// and synk-bench (0 after --help, 2 for a bad argument).
#pragma once

#include <CLI/CLI.hpp>

namespace synk::bench {

// -1 when the arguments parsed and the tool should run; otherwise the code to exit with, the
// help or the error already printed.
inline int parse_arguments(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return -1;
}

}  // namespace synk::bench
