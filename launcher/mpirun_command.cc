// Builds mpirun's argv. mpirun must not bind (--bind-to none): the rank step binds each rank
// from the node's plan, which mpirun's mapper does not know.
#include "mpirun_command.h"

namespace synk::launch {

std::vector<std::string> mpirun_command(const Options& o, const MpirunContext& c) {
  std::vector<std::string> cmd{c.mpirun};
  if (c.nranks > 0) cmd.insert(cmd.end(), {"-np", std::to_string(c.nranks)});  // 0: a rank per slot
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (c.as_root) cmd.push_back("--allow-run-as-root");
  if (c.oversubscribe) cmd.push_back("--oversubscribe");
  if (!o.hosts.empty()) cmd.insert(cmd.end(), {"-H", o.hosts});
  if (!o.hostfile.empty()) cmd.insert(cmd.end(), {"--hostfile", o.hostfile});
  for (const std::string& x : o.exports) cmd.insert(cmd.end(), {"-x", x});
  cmd.push_back(c.self);
  const std::vector<std::string> step = rank_step_args(o);
  cmd.insert(cmd.end(), step.begin(), step.end());
  return cmd;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                         "0123456789_-+=/.,:@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char ch : a) {
      if (ch == '\'') {
        out += "'\\''";
      } else {
        out += ch;
      }
    }
    out += '\'';
  }
  return out;
}

}  // namespace synk::launch
