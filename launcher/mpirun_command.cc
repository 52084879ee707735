// Builds mpirun's argv. mpirun must not bind (--bind-to none): the rank step binds each rank
// from the node's plan, which mpirun's mapper does not know.
#include "mpirun_command.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <utility>

#include "rank_step.h"

namespace synk::launch {
namespace {

// Whether the SYNK_* variable `name` goes to the ranks as "-x NAME": not where the user's -x
// already names it, nor where the rank step sets it per rank.
bool forwarded(const std::string& name, const Options& o) {
  const auto given = [&](const std::string& x) { return x.substr(0, x.find('=')) == name; };
  const auto owned = [&](const char* v) { return name == v; };
  return std::none_of(o.exports.begin(), o.exports.end(), given) &&
         std::none_of(std::begin(kRankStepVariables), std::end(kRankStepVariables), owned);
}

// The MCA parameters that choose how mpirun reaches other hosts: Open MPI 4's (with their older
// names) and Open MPI 5's (PRRTE's plm_ssh_*).
constexpr const char* kRshSettings[] = {"plm_rsh_agent",  "plm_rsh_args",  "orte_rsh_agent",
                                        "orte_rsh_args",  "pls_rsh_agent", "pls_rsh_args",
                                        "plm_ssh_agent",  "plm_ssh_args"};

bool is_rsh_setting(const std::string& name) {
  return std::any_of(std::begin(kRshSettings), std::end(kRshSettings),
                     [&](const char* s) { return name == s; });
}

// The "name = value" lines of an MCA parameter file, each side trimmed.
std::vector<std::pair<std::string, std::string>> mca_file_settings(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string name, value;
    std::istringstream(line.substr(0, eq)) >> name;
    std::istringstream(line.substr(eq + 1)) >> value;
    if (!name.empty() && name[0] != '#') out.emplace_back(name, value);
  }
  return out;
}

bool file_sets_rsh(const std::string& path) {
  const auto settings = mca_file_settings(path);
  return std::any_of(settings.begin(), settings.end(),
                     [](const auto& s) { return is_rsh_setting(s.first); });
}

}  // namespace

std::string find_on_path(const char* path, const std::string& name) {
  const std::string dirs = path ? path : "";
  std::size_t pos = 0;
  while (pos <= dirs.size()) {
    std::size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(pos, end - pos);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    std::error_code ec;
    if (access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate, ec)) {
      return candidate;
    }
    pos = end + 1;
  }
  return "";
}

bool default_ssh_agent(const std::function<const char*(const char*)>& getenv,
                       const std::vector<std::string>& mca_files) {
  if (find_on_path(getenv("PATH"), "ssh").empty()) return false;
  if (getenv("OMPI_MCA_mca_base_param_files") != nullptr) return false;  // files of their own
  for (const char* setting : kRshSettings) {
    for (const char* prefix : {"OMPI_MCA_", "PRTE_MCA_"}) {
      if (getenv((prefix + std::string(setting)).c_str()) != nullptr) return false;
    }
  }
  return std::none_of(mca_files.begin(), mca_files.end(), file_sets_rsh);
}

std::string isolated_launcher(const std::function<const char*(const char*)>& getenv,
                              const std::vector<std::string>& mca_files) {
  for (const char* name : {"OMPI_MCA_plm", "PRTE_MCA_plm"}) {
    if (const char* v = getenv(name)) {  // the environment's value wins over the files'
      return std::string(v) == "isolated" ? name + std::string("=isolated") : "";
    }
  }
  if (getenv("OMPI_MCA_mca_base_param_files") != nullptr) return "";  // files of the user's own
  for (const std::string& file : mca_files) {  // the first to set plm wins
    for (const auto& [name, value] : mca_file_settings(file)) {
      if (name == "plm") return value == "isolated" ? "plm = isolated in " + file : "";
    }
  }
  return "";
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool false_text(const std::string& value) {
  const std::string v = lower(value);
  return v == "0" || v == "false" || v == "no" || v == "f" || v == "n";
}

// An MCA setting of the user's: where it is made ("OMPI_MCA_NAME=VALUE", or "NAME = VALUE in
// FILE") and its value.
struct McaSetting {
  std::string where;
  std::string value;
};

// The setting of `name` that Open MPI would take: the environment's wins over the files', and
// the first file to set it over the others.
std::optional<McaSetting> mca_setting(const std::function<const char*(const char*)>& getenv,
                                      const std::vector<std::string>& mca_files,
                                      const std::string& wanted) {
  const std::string env = "OMPI_MCA_" + wanted;
  if (const char* v = getenv(env.c_str())) return McaSetting{env + "=" + v, v};
  for (const std::string& file : mca_files) {
    for (const auto& [name, value] : mca_file_settings(file)) {
      if (name == wanted) return McaSetting{name + " = " + value + " in " + file, value};
    }
  }
  return std::nullopt;
}

}  // namespace

std::string abort_turned_off(const std::function<const char*(const char*)>& getenv,
                             const std::vector<std::string>& mca_files) {
  const auto s = mca_setting(getenv, mca_files, "orte_abort_on_non_zero_status");
  return s && false_text(s->value) ? s->where : "";
}

std::string oversubscription_refused(const std::function<const char*(const char*)>& getenv,
                                     const std::vector<std::string>& mca_files) {
  const auto no = mca_setting(getenv, mca_files, "rmaps_base_no_oversubscribe");
  if (no && !no->value.empty() && !false_text(no->value)) return no->where;
  const auto policy = mca_setting(getenv, mca_files, "rmaps_base_mapping_policy");
  return policy && lower(policy->value).find("nooversubscribe") != std::string::npos
             ? policy->where
             : "";
}

bool user_sets_shm_dir(const std::function<const char*(const char*)>& getenv,
                       const std::vector<std::string>& mca_files) {
  // (Open MPI 5 calls the vader BTL sm.)
  for (const char* name : {"OMPI_MCA_btl_vader_backing_directory",
                           "OMPI_MCA_btl_sm_backing_directory", "OMPI_MCA_mca_base_param_files"}) {
    if (getenv(name) != nullptr) return true;
  }
  return std::any_of(mca_files.begin(), mca_files.end(), [](const std::string& file) {
    const auto settings = mca_file_settings(file);
    return std::any_of(settings.begin(), settings.end(), [](const auto& setting) {
      return setting.first == "btl_vader_backing_directory" ||
             setting.first == "btl_sm_backing_directory";
    });
  });
}

std::vector<std::string> mpirun_command(const Options& o, const MpirunContext& c) {
  std::vector<std::string> cmd{c.mpirun};
  if (c.nranks > 0) cmd.insert(cmd.end(), {"-np", std::to_string(c.nranks)});  // 0: a rank per slot
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (c.as_root) cmd.push_back("--allow-run-as-root");
  if (c.oversubscribe) cmd.push_back("--oversubscribe");
  if (!o.hosts.empty()) cmd.insert(cmd.end(), {"-H", o.hosts});
  if (!o.hostfile.empty()) cmd.insert(cmd.end(), {"--hostfile", o.hostfile});
  if (c.ssh_defaults && (!o.hosts.empty() || !o.hostfile.empty())) {
    cmd.insert(cmd.end(), {"--mca", "plm_rsh_args", kSshArgs});
  }
  if (!c.shm_dir.empty()) {
    cmd.insert(cmd.end(), {"--mca", "btl_vader_backing_directory", c.shm_dir});
  }
  if (c.restore_abort) cmd.insert(cmd.end(), {"--mca", "orte_abort_on_non_zero_status", "1"});
  for (const std::string& x : o.exports) cmd.insert(cmd.end(), {"-x", x});
  // One host's ranks inherit synkrun's environment; another host's get only what mpirun
  // forwards, and a job would run with SYNK_TIMEOUT=7 on one host and the default on another.
  if (!o.hosts.empty() || !o.hostfile.empty()) {
    for (const std::string& name : c.synk_env) {
      if (forwarded(name, o)) cmd.insert(cmd.end(), {"-x", name});
    }
  }
  cmd.push_back(c.self);
  const std::vector<std::string> step = rank_step_args(o);
  cmd.insert(cmd.end(), step.begin(), step.end());
  return cmd;
}

std::vector<std::string> synk_variables(const char* const* env) {
  std::vector<std::string> names;
  for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (std::strncmp(*e, "SYNK_", 5) != 0 || eq == nullptr) continue;
    std::string name(*e, static_cast<std::size_t>(eq - *e));
    // mpirun's -x would misread a name of other characters (none a shell can set).
    if (name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                               "0123456789_") == std::string::npos) {
      names.push_back(std::move(name));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
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
