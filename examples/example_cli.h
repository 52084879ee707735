// The examples' command line. The small ones take no options: --help says what the program
// shows and how to run it, anything else is a usage error (exit 2). Only the first rank speaks,
// so that `synkrun -np 4 build/bin/hello --help` says it once.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

namespace synk_example {

// This process's rank as the launcher numbered it, before any MPI call; 0 when not launched.
inline int launcher_rank() {
  for (const char* name : {"SYNK_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return 0;
}

// Parses with app: returns -1 when the program should run, else its exit code (0 after
// --help, 2 for a bad command line, said in one line).
inline int parse_command_line(CLI::App& app, int argc, char** argv, const char* name) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      if (launcher_rank() == 0) app.exit(e);
      return 0;
    }
    if (launcher_rank() == 0) std::fprintf(stderr, "%s: %s (see --help)\n", name, e.what());
    return 2;
  }
  return -1;
}

// For an example without options.
inline int parse_no_options(int argc, char** argv, const char* name, const char* about) {
  CLI::App app{about, name};
  return parse_command_line(app, argc, argv, name);
}

}  // namespace synk_example
