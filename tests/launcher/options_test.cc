// synkrun's command line, mpirun command line, rank-step environment and failure parsing:
// the pure parts of the launcher, without starting anything.
#include "options.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "job.h"
#include "mpirun_command.h"
#include "rank_step.h"

namespace synk::launch {
namespace {

ParseResult parse(std::vector<std::string> args) { return parse_options(args); }

Options ok(std::vector<std::string> args) {
  ParseResult r = parse(args);
  EXPECT_EQ(r.status, ParseResult::Status::ok) << r.text;
  return r.options;
}

std::string error(std::vector<std::string> args) {
  ParseResult r = parse(args);
  EXPECT_EQ(r.status, ParseResult::Status::error);
  EXPECT_EQ(r.text.find('\n'), std::string::npos) << "not one line: " << r.text;
  return r.text;
}

TEST(Options, NpAndProgramFlagsPassThrough) {
  Options o = ok({"-np", "4", "./train", "-np", "3", "--bind", "x", "--", "y"});
  EXPECT_EQ(o.np, 4);
  EXPECT_EQ(o.program, (std::vector<std::string>{"./train", "-np", "3", "--bind", "x", "--", "y"}));
  EXPECT_EQ(ok({"-n", "2", "prog"}).np, 2);
  EXPECT_EQ(ok({"-n3", "prog"}).np, 3);
  EXPECT_EQ(ok({"--np=5", "prog"}).np, 5);
  EXPECT_FALSE(ok({"prog"}).np);
  // "--" ends the options: what follows is PROGRAM even when it looks like an option.
  Options d = ok({"--report-bindings", "--", "--weird-name", "-x"});
  EXPECT_TRUE(d.report_bindings);
  EXPECT_EQ(d.program, (std::vector<std::string>{"--weird-name", "-x"}));
}

TEST(Options, AllOptions) {
  Options o = ok({"-H",
                  "a:2,b:2",
                  "--hostfile",
                  "hf",
                  "--bind",
                  "numa",
                  "--gpus",
                  "3,1",
                  "--gpus-per-rank",
                  "2",
                  "--report-bindings",
                  "--dry-run",
                  "--json",
                  "--topology",
                  "t.xml",
                  "-x",
                  "A",
                  "-x",
                  "B=1",
                  "--timeout",
                  "2.5",
                  "prog"});
  EXPECT_EQ(o.hosts, "a:2,b:2");
  EXPECT_EQ(o.hostfile, "hf");
  EXPECT_EQ(o.plan.bind, BindMode::numa);
  EXPECT_EQ(o.plan.gpus, (std::vector<int>{3, 1}));
  EXPECT_EQ(o.plan.gpus_per_rank, 2);
  EXPECT_TRUE(o.report_bindings && o.dry_run && o.json);
  EXPECT_EQ(o.topology, "t.xml");
  EXPECT_EQ(o.exports, (std::vector<std::string>{"A", "B=1"}));
  EXPECT_DOUBLE_EQ(o.timeout_s, 2.5);
  EXPECT_EQ(o.program, std::vector<std::string>{"prog"});
  EXPECT_EQ(ok({"--bind=core", "prog"}).plan.bind, BindMode::core);
  EXPECT_TRUE(ok({"--dry-run"}).program.empty());  // a dry run needs no PROGRAM
}

TEST(Options, ErrorsAreOneLine) {
  EXPECT_NE(error({}).find("missing PROGRAM"), std::string::npos);
  EXPECT_NE(error({"-np", "2"}).find("missing PROGRAM"), std::string::npos);
  for (const char* n : {"0", "-1", "abc", "2x", ""}) {
    EXPECT_NE(error({"-np", n, "prog"}).find("-np"), std::string::npos) << n;
  }
  EXPECT_NE(error({"-np"}).find("needs a value"), std::string::npos);
  EXPECT_NE(error({"--bogus", "prog"}).find("unknown option --bogus"), std::string::npos);
  EXPECT_NE(error({"-q", "prog"}).find("unknown option -q"), std::string::npos);
  // mpirun's own options say where their settings go (a bare "unknown option --mca" did not).
  EXPECT_NE(error({"--mca", "btl", "self", "prog"})
                .find("unknown option --mca: synkrun passes no mpirun options on; MCA parameters "
                      "go in the environment (OMPI_MCA_name=value)"),
            std::string::npos);
  EXPECT_NE(error({"--map-by=node", "prog"}).find("synkrun maps and binds the ranks itself"),
            std::string::npos);
  EXPECT_NE(error({"--bind", "socket", "prog"}).find("--bind"), std::string::npos);
  EXPECT_NE(error({"--gpus", "1-", "prog"}).find("--gpus"), std::string::npos);
  // An index past INT_MAX was reported as GPU -1.
  EXPECT_EQ(error({"--gpus", "4294967295", "prog"}), "--gpus: GPU 4294967295 does not exist");
  EXPECT_EQ(error({"--gpus", "0,2-3,2", "prog"}), "--gpus: GPU 2 is listed twice");
  EXPECT_NE(error({"--gpus-per-rank", "0", "prog"}).find("--gpus-per-rank"), std::string::npos);
  EXPECT_NE(error({"-x", "1A=2", "prog"}).find("-x"), std::string::npos);
  EXPECT_NE(error({"--timeout", "soon", "prog"}).find("--timeout"), std::string::npos);
  EXPECT_NE(error({"--timeout", "-3", "prog"}).find("--timeout"), std::string::npos);
  EXPECT_NE(error({"--json", "prog"}).find("--dry-run"), std::string::npos);
  EXPECT_NE(error({"--dry-run=1", "prog"}).find("takes no value"), std::string::npos);
  // Typos that used to reach mpirun or the clock: a count past any machine, a timeout whose
  // nanoseconds overflow, hosts that are not host:slots, an option taken as a value.
  EXPECT_NE(error({"-np", "2147483647", "prog"}).find("from 1 to 1048576"), std::string::npos);
  EXPECT_NE(error({"-np", "99999999999", "prog"}).find("-np"), std::string::npos);
  EXPECT_EQ(ok({"-np=3", "prog"}).np, 3);
  EXPECT_EQ(ok({"-np2", "prog"}).np, 2);  // was '"p2" is not a number of ranks'
  EXPECT_NE(error({"--timeout", "1e10", "prog"}).find("more than 1e+09 s"), std::string::npos);
  EXPECT_NE(error({"--timeout", "abc", "prog"}).find("\"abc\" is not a number of seconds"),
            std::string::npos);
  EXPECT_NE(error({"--timeout", "inf", "prog"}).find("--timeout"), std::string::npos);
  EXPECT_DOUBLE_EQ(ok({"--timeout", "1e9", "prog"}).timeout_s, 1e9);
  EXPECT_DOUBLE_EQ(ok({"prog"}).timeout_s, 0);
  for (const char* h : {"localhost:abc", "a:0", ":2", "a,,b", "a:2:3"}) {
    EXPECT_NE(error({"-H", h, "prog"}).find("is not HOST or HOST:SLOTS"), std::string::npos) << h;
  }
  EXPECT_EQ(ok({"-H", "a,b:2", "prog"}).hosts, "a,b:2");
  EXPECT_EQ(ok({"-H", "a,b:2", "-np", "3", "prog"}).np, 3);
  EXPECT_NE(error({"-H", "a,b:2", "-np", "4", "prog"}).find("offers 3 slots"), std::string::npos);
  EXPECT_NE(error({"-H", "-np", "2", "prog"}).find("needs a value (got the option -np)"),
            std::string::npos);
  EXPECT_NE(error({"--topology", "t.xml", "prog"}).find("goes with --dry-run"),
            std::string::npos);
}

TEST(Options, HelpListsEveryOption) {
  ParseResult r = parse({"--help"});
  ASSERT_EQ(r.status, ParseResult::Status::help);
  for (const char* opt :
       {"--np", "-H", "--hostfile", "--bind", "--gpus", "--gpus-per-rank", "--report-bindings",
        "--dry-run", "--json", "--topology", "-x", "--timeout", "--version", "--rank-step",
        "PROGRAM"}) {
    EXPECT_NE(r.text.find(opt), std::string::npos) << opt;
  }
  EXPECT_EQ(r.text.find("--node-topology"), std::string::npos);  // internal
  EXPECT_NE(r.text.find("every SYNK_* variable set here reaches every host"), std::string::npos);
  EXPECT_EQ(parse({"-np", "2", "-h"}).status, ParseResult::Status::help);
  const ParseResult v = parse({"--version"});
  EXPECT_EQ(v.status, ParseResult::Status::help);  // printed, exit 0
  EXPECT_EQ(v.text.rfind("synkrun (synk ", 0), 0u) << v.text;
}

// A hostfile that names no host: mpirun's "No nodes are available" would not say why.
TEST(Options, HostfileThatNamesNoHost) {
  const Options o = ok({"--hostfile", "hf", "prog"});
  EXPECT_EQ(hostfile_error(o, {}), "hostfile hf names no host");
  EXPECT_EQ(hostfile_error(ok({"--hostfile", "hf", "-np", "2", "prog"}), {}),
            "hostfile hf names no host");
  EXPECT_EQ(hostfile_error(o, {{"a", 0}}), "");
  EXPECT_EQ(hostfile_error(ok({"--hostfile", "hf", "-np", "3", "prog"}), {{"a", 2}}),
            "-np 3 but hostfile hf offers 2 slots; for more ranks than a host's cores, give it "
            "more slots");
  EXPECT_EQ(hostfile_error(ok({"--hostfile", "hf", "-H", "a", "prog"}), {{"a", 1}}), "");
  EXPECT_EQ(hostfile_error(ok({"-np", "2", "prog"}), {}), "");
}

// Options of synkrun's own launch are refused with --rank-step, which would ignore them.
TEST(Options, LaunchOnlyOptionsWithRankStep) {
  const std::string tail =
      " has no meaning with --rank-step: the launcher that started this rank (srun, mpirun) "
      "sets the ranks, their hosts, environment and time limit";
  EXPECT_EQ(error({"--rank-step", "-np", "4", "prog"}), "-np" + tail);
  EXPECT_EQ(error({"--rank-step", "-H", "a:2", "prog"}), "-H" + tail);
  EXPECT_EQ(error({"--rank-step", "--hostfile", "hf", "prog"}), "--hostfile" + tail);
  EXPECT_EQ(error({"--rank-step", "-x", "FOO=1", "prog"}), "-x" + tail);
  EXPECT_EQ(error({"--rank-step", "--timeout", "5", "prog"}), "--timeout" + tail);
  EXPECT_EQ(error({"--rank-step", "--dry-run", "prog"}),
            "--dry-run has no meaning with --rank-step, which runs PROGRAM (synkrun --dry-run "
            "without --rank-step shows the plan)");
  // What synkrun's own launch hands its rank steps is taken.
  Options o = ok({"--rank-step", "--bind", "core", "--gpus", "0", "--report-bindings",
                  "--node-slots", "a:2", "--plan-shown", "prog"});
  EXPECT_TRUE(o.plan_shown);
}

TEST(MpirunCommand, FlagsAndRankStep) {
  Options o = ok({"-np", "3", "-H", "a:2,b:1", "-x", "FOO=1", "--gpus", "2,0", "--bind", "core",
                  "--report-bindings", "--dry-run", "--topology", "/t.xml", "prog", "--flag"});
  MpirunContext c{"/usr/bin/mpirun", "/opt/synkrun", 3, true, false, {}, false, ""};
  EXPECT_EQ(mpirun_command(o, c), (std::vector<std::string>{"/usr/bin/mpirun",
                                                            "-np",
                                                            "3",
                                                            "--bind-to",
                                                            "none",
                                                            "--allow-run-as-root",
                                                            "-H",
                                                            "a:2,b:1",
                                                            "-x",
                                                            "FOO=1",
                                                            "/opt/synkrun",
                                                            "--rank-step",
                                                            "--bind",
                                                            "core",
                                                            "--gpus",
                                                            "2,0",
                                                            "--topology",
                                                            "/t.xml",
                                                            "--report-bindings",
                                                            "--",
                                                            "prog",
                                                            "--flag"}));
  // 0 ranks: no -np, mpirun starts a rank per slot of the hosts.
  MpirunContext per_slot{"/usr/bin/mpirun", "/opt/synkrun", 0, false, false, {}, false, ""};
  const auto slots = mpirun_command(ok({"-H", "a:2,b:2", "prog"}), per_slot);
  EXPECT_EQ(std::count(slots.begin(), slots.end(), "-np"), 0);
  EXPECT_EQ(slots[1], "--bind-to");
  c.as_root = false;
  c.oversubscribe = true;
  const auto cmd = mpirun_command(ok({"prog"}), c);
  EXPECT_EQ(std::count(cmd.begin(), cmd.end(), "--allow-run-as-root"), 0);
  EXPECT_EQ(std::count(cmd.begin(), cmd.end(), "--oversubscribe"), 1);
  // The rank step parses its own arguments back into the same plan options.
  const std::vector<std::string> step = rank_step_args(o);
  Options back = ok(step);
  EXPECT_TRUE(back.rank_step);
  EXPECT_EQ(back.plan.bind, o.plan.bind);
  EXPECT_EQ(back.plan.gpus, o.plan.gpus);
  EXPECT_EQ(back.topology, o.topology);
  EXPECT_EQ(back.program, o.program);
  // With hosts each node's rank step shows its plan's notes; without, synkrun did.
  EXPECT_FALSE(back.plan_shown);
  EXPECT_TRUE(ok(rank_step_args(ok({"prog"}))).plan_shown);
  EXPECT_EQ(shell_join({"a b", "it's", "x=1"}), "'a b' 'it'\\''s' x=1");
}

// mpirun forwards only -x variables to other hosts: with hosts, synkrun adds "-x NAME" for each
// SYNK_* variable set where it starts, but not one -x names already nor one the rank step sets.
TEST(MpirunCommand, ForwardsSynkVariablesToOtherHosts) {
  const char* env[] = {"PATH=/bin", "SYNK_LOG=info", "SYNK_TIMEOUT=7", "SYNK_NODE_RANK=1",
                       "SYNK_RANK=0", "NOT_SYNK_X=1", "SYNK_CPUS=0-3", nullptr};
  MpirunContext c{"/usr/bin/mpirun", "/opt/synkrun", 0, false, false, {}, false, ""};
  c.synk_env = synk_variables(env);
  EXPECT_EQ(c.synk_env, (std::vector<std::string>{"SYNK_CPUS", "SYNK_LOG", "SYNK_NODE_RANK",
                                                  "SYNK_RANK", "SYNK_TIMEOUT"}));
  const auto cmd = mpirun_command(ok({"-H", "a:1,b:1", "-x", "SYNK_LOG=debug", "prog"}), c);
  const auto self = std::find(cmd.begin(), cmd.end(), "/opt/synkrun");
  EXPECT_EQ(std::vector<std::string>(self - 4, self),
            (std::vector<std::string>{"-x", "SYNK_LOG=debug", "-x", "SYNK_TIMEOUT"}));
  EXPECT_EQ(std::count(cmd.begin(), cmd.end(), "-x"), 2);
  const auto file = mpirun_command(ok({"--hostfile", "hf", "-x", "SYNK_TIMEOUT", "prog"}), c);
  EXPECT_EQ(std::count(file.begin(), file.end(), "SYNK_LOG"), 1);
  EXPECT_EQ(std::count(file.begin(), file.end(), "SYNK_TIMEOUT"), 1);
  // One host: the ranks inherit synkrun's environment.
  const auto here = mpirun_command(ok({"prog"}), c);
  EXPECT_EQ(std::count(here.begin(), here.end(), "-x"), 0);
  EXPECT_EQ(synk_variables(nullptr), std::vector<std::string>{});
}

// With hosts reached through a plain ssh, mpirun gets ssh options that bound a host that does
// not answer (10 s) and one that asks for a password (at once): else synkrun waited silently.
TEST(MpirunCommand, BoundsSshToOtherHosts) {
  MpirunContext c{"/usr/bin/mpirun", "/opt/synkrun", 0, false, false, {}, true, ""};
  const auto cmd = mpirun_command(ok({"-H", "a:1,b:1", "prog"}), c);
  const auto mca = std::find(cmd.begin(), cmd.end(), "--mca");
  ASSERT_NE(mca, cmd.end());
  EXPECT_EQ(std::vector<std::string>(mca, mca + 3),
            (std::vector<std::string>{"--mca", "plm_rsh_args",
                                      "-o BatchMode=yes -o ConnectTimeout=10"}));
  const auto here = mpirun_command(ok({"prog"}), c);  // one host: no ssh
  EXPECT_EQ(std::count(here.begin(), here.end(), "--mca"), 0);
  c.ssh_defaults = false;
  const auto own = mpirun_command(ok({"-H", "a:1,b:1", "prog"}), c);
  EXPECT_EQ(std::count(own.begin(), own.end(), "--mca"), 0);
}

// A getenv that reads `env`, which the test changes as it goes.
std::function<const char*(const char*)> getenv_of(const std::map<std::string, std::string>& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// The user's own agent or ssh options, in the environment or an MCA parameter file, or no ssh
// on PATH (Open MPI then uses rsh): synkrun adds nothing of its own.
TEST(MpirunCommand, DefaultSshAgentOnlyWithoutTheUsersSettings) {
  const std::string dir = ::testing::TempDir() + "synk_ssh_agent";
  std::filesystem::create_directories(dir + "/bin");
  const std::string ssh = dir + "/bin/ssh";
  std::ofstream(ssh) << "#!/bin/sh\n";
  std::filesystem::permissions(ssh, std::filesystem::perms::owner_all);
  std::ofstream(dir + "/plain.conf") << "# comment\nbtl = ^openib\n";
  std::ofstream(dir + "/agent.conf") << "btl = ^openib\n  plm_rsh_agent = /opt/my_ssh\n";
  std::map<std::string, std::string> env{{"PATH", "/nonexistent:" + dir + "/bin"}};
  const auto getenv = getenv_of(env);
  EXPECT_TRUE(default_ssh_agent(getenv, {dir + "/plain.conf", dir + "/missing.conf"}));
  EXPECT_FALSE(default_ssh_agent(getenv, {dir + "/plain.conf", dir + "/agent.conf"}));
  env["OMPI_MCA_plm_rsh_args"] = "-p 2222";
  EXPECT_FALSE(default_ssh_agent(getenv, {}));
  env.erase("OMPI_MCA_plm_rsh_args");
  env["OMPI_MCA_orte_rsh_agent"] = "rsh";
  EXPECT_FALSE(default_ssh_agent(getenv, {}));
  env.erase("OMPI_MCA_orte_rsh_agent");
  env["PRTE_MCA_plm_ssh_agent"] = "/opt/my_ssh";  // Open MPI 5's
  EXPECT_FALSE(default_ssh_agent(getenv, {}));
  env.erase("PRTE_MCA_plm_ssh_agent");
  env["PATH"] = "/nonexistent";
  EXPECT_FALSE(default_ssh_agent(getenv, {}));
  std::filesystem::remove_all(dir);
}

// synkrun puts a job's Open MPI shared memory in a directory of its own unless the user chose
// where it goes; and mpirun gets the directory.
TEST(MpirunCommand, JobShmDirectoryUnlessTheUserChoseOne) {
  const std::string dir = ::testing::TempDir() + "synk_shm_dir";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plain.conf") << "btl = ^openib\n";
  std::ofstream(dir + "/chosen.conf") << "btl_vader_backing_directory = /tmp\n";
  std::map<std::string, std::string> env;
  const auto getenv = getenv_of(env);
  EXPECT_FALSE(user_sets_shm_dir(getenv, {dir + "/plain.conf", dir + "/missing.conf"}));
  EXPECT_TRUE(user_sets_shm_dir(getenv, {dir + "/plain.conf", dir + "/chosen.conf"}));
  env["OMPI_MCA_btl_vader_backing_directory"] = "/tmp";
  EXPECT_TRUE(user_sets_shm_dir(getenv, {}));
  env.clear();
  env["OMPI_MCA_btl_sm_backing_directory"] = "/tmp";  // Open MPI 5's name
  EXPECT_TRUE(user_sets_shm_dir(getenv, {}));
  std::filesystem::remove_all(dir);

  MpirunContext c{"/usr/bin/mpirun", "/opt/synkrun", 2, false, false, {}, false, ""};
  c.shm_dir = "/dev/shm/synkrun-job.abc";
  const auto cmd = mpirun_command(ok({"prog"}), c);
  const auto at = std::find(cmd.begin(), cmd.end(), "btl_vader_backing_directory");
  ASSERT_NE(at, cmd.end());
  EXPECT_EQ(*(at - 1), "--mca");
  EXPECT_EQ(*(at + 1), "/dev/shm/synkrun-job.abc");
}

// A setting that forbids more ranks than slots (mpirun then refuses synkrun's --oversubscribe):
// synkrun says so before it starts the job.
TEST(MpirunCommand, ASettingThatRefusesOversubscriptionIsFound) {
  const std::string dir = ::testing::TempDir() + "synk_oversubscribe";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/no.conf") << "rmaps_base_no_oversubscribe = true\n";
  std::ofstream(dir + "/policy.conf") << "rmaps_base_mapping_policy = slot:NoOversubscribe\n";
  std::ofstream(dir + "/allowed.conf") << "rmaps_base_no_oversubscribe = 0\n"
                                          "rmaps_base_mapping_policy = core:OVERSUBSCRIBE\n";
  std::map<std::string, std::string> env;
  const auto getenv = getenv_of(env);
  EXPECT_EQ(oversubscription_refused(getenv, {}), "");
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/allowed.conf"}), "");
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/no.conf"}),
            "rmaps_base_no_oversubscribe = true in " + dir + "/no.conf");
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/policy.conf"}),
            "rmaps_base_mapping_policy = slot:NoOversubscribe in " + dir + "/policy.conf");
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/allowed.conf", dir + "/no.conf"}), "");
  env["OMPI_MCA_rmaps_base_no_oversubscribe"] = "1";
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/allowed.conf"}),
            "OMPI_MCA_rmaps_base_no_oversubscribe=1");
  env["OMPI_MCA_rmaps_base_no_oversubscribe"] = "false";  // the environment wins over files
  EXPECT_EQ(oversubscription_refused(getenv, {dir + "/no.conf"}), "");
  std::filesystem::remove_all(dir);
}

// A site's orte_abort_on_non_zero_status = 0 (environment, then the first file that sets it):
// mpirun would exit 0 for a failed job. synkrun turns it back on, on mpirun's command line.
TEST(MpirunCommand, AbortOnAFailingRankIsRestored) {
  const std::string dir = ::testing::TempDir() + "synk_abort";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/off.conf") << "# orte_abort_on_non_zero_status = 1\n"
                                      "orte_abort_on_non_zero_status = false\n";
  std::ofstream(dir + "/on.conf") << "orte_abort_on_non_zero_status = 1\n";
  std::map<std::string, std::string> env;
  const auto getenv = getenv_of(env);
  EXPECT_EQ(abort_turned_off(getenv, {dir + "/missing.conf"}), "");
  EXPECT_EQ(abort_turned_off(getenv, {dir + "/off.conf"}),
            "orte_abort_on_non_zero_status = false in " + dir + "/off.conf");
  EXPECT_EQ(abort_turned_off(getenv, {dir + "/on.conf", dir + "/off.conf"}), "");
  env["OMPI_MCA_orte_abort_on_non_zero_status"] = "0";
  EXPECT_EQ(abort_turned_off(getenv, {dir + "/on.conf"}),
            "OMPI_MCA_orte_abort_on_non_zero_status=0");
  env["OMPI_MCA_orte_abort_on_non_zero_status"] = "1";
  EXPECT_EQ(abort_turned_off(getenv, {dir + "/off.conf"}), "");
  std::filesystem::remove_all(dir);

  MpirunContext c{"/usr/bin/mpirun", "/opt/synkrun", 2, false, false, {}, false, ""};
  const auto plain = mpirun_command(ok({"prog"}), c);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "orte_abort_on_non_zero_status"), 0);
  c.restore_abort = true;
  const auto cmd = mpirun_command(ok({"prog"}), c);
  const auto at = std::find(cmd.begin(), cmd.end(), "orte_abort_on_non_zero_status");
  ASSERT_NE(at, cmd.end());
  EXPECT_EQ(*(at - 1), "--mca");
  EXPECT_EQ(*(at + 1), "1");
  EXPECT_LT(at - cmd.begin(), std::find(cmd.begin(), cmd.end(), "/opt/synkrun") - cmd.begin());
}

// plm = isolated, from the environment (Open MPI 4's or 5's name) or a parameter file, where the
// environment's value wins, then the first file's; a comment or another component is not it.
TEST(MpirunCommand, IsolatedLauncherFromTheEnvironmentOrAFile) {
  const std::string dir = ::testing::TempDir() + "synk_isolated";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/plain.conf") << "# plm = isolated\nbtl = ^openib\nplm_rsh_agent = x\n";
  std::ofstream(dir + "/isolated.conf") << "btl = ^openib\n  plm  =  isolated \n";
  std::map<std::string, std::string> env;
  const auto getenv = getenv_of(env);
  EXPECT_EQ(isolated_launcher(getenv, {dir + "/plain.conf", dir + "/missing.conf"}), "");
  EXPECT_EQ(isolated_launcher(getenv, {dir + "/plain.conf", dir + "/isolated.conf"}),
            "plm = isolated in " + dir + "/isolated.conf");
  env["OMPI_MCA_plm"] = "isolated";
  EXPECT_EQ(isolated_launcher(getenv, {}), "OMPI_MCA_plm=isolated");
  env["OMPI_MCA_plm"] = "rsh";
  EXPECT_EQ(isolated_launcher(getenv, {dir + "/isolated.conf"}), "");
  env.erase("OMPI_MCA_plm");
  std::ofstream(dir + "/user.conf") << "plm = rsh\n";  // the user's file wins over the system's
  EXPECT_EQ(isolated_launcher(getenv, {dir + "/user.conf", dir + "/isolated.conf"}), "");
  env["OMPI_MCA_mca_base_param_files"] = dir + "/isolated.conf";  // files of the user's own
  EXPECT_EQ(isolated_launcher(getenv, {dir + "/isolated.conf"}), "");
  env.erase("OMPI_MCA_mca_base_param_files");
  env["PRTE_MCA_plm"] = "isolated";
  EXPECT_EQ(isolated_launcher(getenv, {}), "PRTE_MCA_plm=isolated");
  std::filesystem::remove_all(dir);
}

RankEnv env_of(const std::map<std::string, std::string>& vars) {
  return read_rank_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RankEnv, EachLauncher) {
  RankEnv o = env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                      {"OMPI_COMM_WORLD_RANK", "5"},
                      {"OMPI_COMM_WORLD_SIZE", "6"},
                      {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(o.source, "openmpi");
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.world_size, 6);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 2);
  EXPECT_EQ(o.node_rank, 2);

  RankEnv h = env_of(
      {{"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "1"}, {"PMI_RANK", "3"}, {"PMI_SIZE", "4"}});
  EXPECT_EQ(h.source, "hydra");
  EXPECT_EQ(h.rank, 3);
  EXPECT_EQ(h.node_rank, 3);

  RankEnv s = env_of({{"SLURM_LOCALID", "1"},
                      {"SLURM_PROCID", "8"},
                      {"SLURM_NTASKS", "9"},
                      {"SLURM_NODEID", "3"},
                      {"SLURM_STEP_TASKS_PER_NODE", "2(x3),3"}});
  EXPECT_EQ(s.source, "slurm");
  EXPECT_EQ(s.local_size, 3);
  EXPECT_EQ(s.node_rank, 3);

  RankEnv p = env_of(
      {{"PMI_LOCAL_RANK", "0"}, {"PMI_LOCAL_SIZE", "2"}, {"PMI_RANK", "0"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(p.source, "pmi");
  EXPECT_EQ(p.local_size, 2);

  RankEnv none = env_of({});
  EXPECT_EQ(none.source, "none");
  EXPECT_EQ(none.world_size, 1);

  EXPECT_THROW(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                       {"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "2"}}),
               std::runtime_error);
  EXPECT_THROW(env_of({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}}), std::runtime_error);
}

std::string rank_env_error(const std::map<std::string, std::string>& vars) {
  try {
    env_of(vars);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

// Each bad or missing variable is named with its value. Before, every case said "the slurm
// launcher set a local rank but not the rank, size and local size", and a launcher the rank
// step cannot read made each process rank 0 of 1 on the first GPU.
TEST(RankEnv, ErrorsNameTheVariable) {
  const std::map<std::string, std::string> slurm{{"SLURM_LOCALID", "1"},
                                                 {"SLURM_PROCID", "3"},
                                                 {"SLURM_NTASKS", "4"},
                                                 {"SLURM_NODEID", "1"},
                                                 {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}};
  EXPECT_EQ(env_of(slurm).local_size, 2);
  auto with = [&](const std::string& name, const char* value) {
    auto vars = slurm;
    if (value == nullptr) {
      vars.erase(name);
    } else {
      vars[name] = value;
    }
    return rank_env_error(vars);
  };
  EXPECT_EQ(with("SLURM_LOCALID", "x"), "SLURM_LOCALID=\"x\" is not a whole number");
  EXPECT_EQ(with("SLURM_NODEID", nullptr),
            "the slurm launcher set a local rank but not SLURM_NODEID");
  EXPECT_EQ(with("SLURM_STEP_TASKS_PER_NODE", "2(x3"),
            "SLURM_STEP_TASKS_PER_NODE=\"2(x3\" gives no task count for node 1 (SLURM_NODEID)");
  EXPECT_EQ(with("SLURM_STEP_TASKS_PER_NODE", "4"),
            "SLURM_STEP_TASKS_PER_NODE=\"4\" gives no task count for node 1 (SLURM_NODEID)");
  // A count that does not cover the node: the variables and their values (it named neither).
  EXPECT_EQ(with("SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
            "inconsistent layout from slurm: rank 3 of 4 (SLURM_PROCID=3, SLURM_NTASKS=4), "
            "local rank 1 of 1 (SLURM_LOCALID=1, SLURM_STEP_TASKS_PER_NODE=1(x2) on node 1)");
  // An empty step count falls back to the job's.
  auto fallback = slurm;
  fallback["SLURM_STEP_TASKS_PER_NODE"] = "";
  fallback["SLURM_TASKS_PER_NODE"] = "2(x2)";
  EXPECT_EQ(env_of(fallback).local_size, 2);
  for (const char* name : {"PMIX_RANK", "FLUX_TASK_RANK", "LOCAL_RANK", "PMI_RANK"}) {
    EXPECT_EQ(rank_env_error({{name, "1"}}).rfind(std::string(name) + " is set, but not the "
                                                  "local rank of a launcher synkrun reads", 0),
              0u)
        << name;
  }
}

TEST(RankEnv, SlurmTasksPerNode) {
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 2), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_FALSE(slurm_tasks_on_node("2(x3),1", 4));
  EXPECT_FALSE(slurm_tasks_on_node("2(x", 0));
}

const char* const kRule =
    "--------------------------------------------------------------------------";

TEST(FailureParser, OpenMpiMessages) {
  FailureParser exit_code;
  for (const char* l : {kRule, "Primary job  terminated normally, but 1 process returned",
                        "  Process name: [[30945,1],1]", "  Exit code:    3",
                        "  Process name: [[30945,1],0]", "  Exit code:    7"}) {
    exit_code.feed_line(l);
  }
  EXPECT_EQ(exit_code.rank(), 1);
  EXPECT_EQ(exit_code.exit_code(), 3);
  EXPECT_EQ(exit_code.describe(), "rank 1 (exit code 3)");
  // With hosts, synkrun knows each rank's host from its mapping (--node-slots).
  EXPECT_EQ(exit_code.describe("hostB"), "rank 1 on hostB (exit code 3)");

  // Fewer slots than ranks: mpirun's page (which names synkrun, and offers an --oversubscribe
  // synkrun does not take) was followed by "the job failed with exit code 1" only.
  FailureParser slots;
  slots.feed_line(kRule);
  slots.feed_line("There are not enough slots available in the system to satisfy the 3");
  slots.feed_line("slots that were requested by the application:");
  EXPECT_TRUE(slots.slots_short());
  EXPECT_TRUE(slots.job_failing());
  EXPECT_FALSE(slots.rank().has_value());
  EXPECT_FALSE(exit_code.slots_short());

  FailureParser sig;
  sig.feed_line(kRule);
  sig.feed_line(
      "mpirun noticed that process rank 12 with PID 0 on node vm exited on signal 11 "
      "(Segmentation fault).");
  EXPECT_EQ(sig.rank(), 12);
  EXPECT_EQ(sig.signal(), 11);
  EXPECT_EQ(sig.describe(), "rank 12 on vm (signal 11, Segmentation fault)");
  EXPECT_EQ(sig.describe("other"), "rank 12 on vm (signal 11, Segmentation fault)");
  EXPECT_TRUE(sig.job_failing());

  FailureParser aborted;
  for (const char* l : {kRule, "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD",
                        "with errorcode 7.", "", "  Process name: [[30945,1],0]",
                        "  Exit code:    1"}) {
    aborted.feed_line(l);
  }
  EXPECT_EQ(aborted.rank(), 1);
  EXPECT_EQ(aborted.exit_code(), 7);
  EXPECT_EQ(aborted.describe(), "rank 1 (MPI_Abort, error code 7)");

  FailureParser improper;  // a rank that exited without MPI_Finalize, as after a Timeout
  for (const char* l : {kRule, "mpirun has exited due to process rank 3 with PID 0 on",
                        "node vm exiting improperly. There are three reasons this could occur:",
                        ""}) {
    improper.feed_line(l);
  }
  EXPECT_EQ(improper.rank(), 3);
  EXPECT_EQ(improper.describe(), "rank 3 on vm (ended without MPI_Finalize)");
  EXPECT_TRUE(improper.job_failing());

  FailureParser nothing;
  nothing.feed_line("Exit code: 3");  // without a process name first
  nothing.feed_line("hello from rank 1");
  EXPECT_FALSE(nothing.rank());
  EXPECT_EQ(nothing.describe(), "");
  EXPECT_FALSE(nothing.job_failing());
}

// A host mpirun could not reach (multi-host test bed): no rank is named, the daemons failed,
// and Open MPI's TCP message says who could not connect to whom.
TEST(FailureParser, DaemonsThatFailed) {
  FailureParser unreachable;
  for (const char* l : {kRule, "A process or daemon was unable to complete a TCP connection",
                        "to another process:", "  Local host:    hostB", "  Remote host:   hostA",
                        "ORTE was unable to reliably start one or more daemons."}) {
    unreachable.feed_line(l);
  }
  EXPECT_FALSE(unreachable.rank());
  EXPECT_TRUE(unreachable.daemons_failed());
  EXPECT_TRUE(unreachable.job_failing());
  EXPECT_EQ(unreachable.connection_failure(), "hostB could not connect to hostA");
  EXPECT_EQ(unreachable.lost_daemon_host(), "");

  // A daemon killed, or its host frozen: the message names the host, which synkrun's did not.
  FailureParser lost;
  for (const char* l : {kRule, "ORTE has lost communication with a remote daemon.", "",
                        "  HNP daemon   : [[9633,0],0] on node hostA",
                        "  Remote daemon: [[9633,0],1] on node hostB"}) {
    lost.feed_line(l);
  }
  EXPECT_TRUE(lost.daemons_failed());
  EXPECT_EQ(lost.lost_daemon_host(), "hostB");

  FailureParser aborted;
  aborted.feed_line(kRule);
  aborted.feed_line("Primary job  terminated normally, but 1 process returned");
  aborted.feed_line("a non-zero exit code. Per user-direction, the job has been aborted.");
  EXPECT_TRUE(aborted.job_failing());
  EXPECT_FALSE(aborted.daemons_failed());

  // hostB's daemon killed, as a busy CI machine's mpirun reported it: a rank of hostA's SIGPIPE
  // first, and no word of the daemon (synkrun then adds its broken-pipe note).
  FailureParser piped;
  for (const char* l : {kRule, "Primary job  terminated normally, but 1 process returned",
                        "a non-zero exit code. Per user-direction, the job has been aborted.",
                        kRule, "Killed", kRule,
                        "mpirun noticed that process rank 0 with PID 0 on node hostA exited on "
                        "signal 13 (Broken pipe).",
                        kRule}) {
    piped.feed_line(l);
  }
  EXPECT_EQ(piped.describe(), "rank 0 on hostA (signal 13, Broken pipe)");
  EXPECT_EQ(piped.signal(), 13);
  EXPECT_FALSE(piped.daemons_failed());
}

// A rank's synk Timeout names the rank it waited for: synkrun's line names it beside the rank
// that failed first (the first to give up waiting), which alone misled.
TEST(FailureParser, TheRankATimeoutWaitedFor) {
  FailureParser p;
  p.feed_line("rank 0: synk Timeout: all_reduce: rank 0 waited 2 s (SYNK_TIMEOUT) for rank 3 "
              "(node 1), which has not reached this call (the calls are compared first)");
  p.feed_line("synk.Timeout: synk Timeout: broadcast: rank 1 waited 2 s (SYNK_TIMEOUT) for rank "
              "2, which has not reached this call");
  EXPECT_EQ(p.waited_for(), 3);  // the first one said
  FailureParser q;
  q.feed_line("synk Timeout: all_reduce: rank 0 waited 2 s (SYNK_TIMEOUT) for ranks 1 and 2, "
              "which have not reached this call");
  EXPECT_EQ(q.waited_for(), 1);
  FailureParser huge;  // a rank's own text: ignored, not thrown out of synkrun
  huge.feed_line("synk Timeout: x (SYNK_TIMEOUT) for rank 99999999999");
  EXPECT_FALSE(huge.waited_for());
  FailureParser none;
  none.feed_line("synk Timeout: rank 0: all_reduce(count 1, float32, sum) on the mpi backend has "
                 "waited 3 s inside MPI without progress");
  EXPECT_FALSE(none.waited_for());
  EXPECT_TRUE(none.watchdog_ended());  // synkrun says the rank only waited
  EXPECT_FALSE(p.watchdog_ended());
  // A rank of hier waiting for its node's leader, stuck between the nodes: no rank to blame.
  FailureParser between;
  between.feed_line("synk Timeout: all_reduce: rank 1 waited 10 s (SYNK_TIMEOUT) for this "
                    "call's step between the nodes, where rank 0 has made no progress inside MPI");
  EXPECT_FALSE(between.waited_for());
  EXPECT_EQ(between.timed_out_ranks(), (std::set<int>{1}));
}

// The ranks that gave up waiting, from each kind of synk Timeout line: synkrun names the hosts
// none of whose ranks spoke.
TEST(FailureParser, TheRanksThatTimedOut) {
  FailureParser p;
  p.feed_line("synk Timeout: rank 0: all_reduce(count 1, float32, sum) on the hier backend has "
              "waited 12 s inside MPI without progress");
  p.feed_line("rank 1: synk Timeout: a KeyValue cycle (its all_reduce(count 5, int64, max)): "
              "rank 3 waited 10 s (SYNK_TIMEOUT) for rank 2 (node 1), which has not reached");
  p.feed_line("synk.Timeout: synk Timeout: broadcast: rank 5 waited 2 s (SYNK_TIMEOUT) for rank 2");
  p.feed_line("synk Timeout: this process: starting MPI (MPI_Init_thread) has waited 12 s");
  p.feed_line("synk Timeout: rank 99999999999: x");  // a rank's own text: ignored
  p.feed_line("rank 7 waited 2 s (SYNK_TIMEOUT), but no synk Timeout");
  EXPECT_EQ(p.timed_out_ranks(), (std::set<int>{0, 3, 5}));
}

// A split communicator's ranks are not the job's: its Timeout names both, and synkrun takes the
// job's (the rank mpirun and the host list number).
TEST(FailureParser, ASplitCommunicatorsRanksCountByTheirJobRank) {
  FailureParser p;
  p.feed_line("synk Timeout: all_reduce(count 4, float32, sum): rank 0 (job rank 1) waited 2 s "
              "(SYNK_TIMEOUT) for rank 1 (job rank 3, node 1 on hostB), which has not reached");
  p.feed_line("synk Timeout: rank 1 (job rank 2): all_reduce(count 4, float32, sum) on the mpi "
              "backend has waited 12 s inside MPI without progress");
  p.feed_line("synk Timeout: broadcast: rank 0 waited 2 s (SYNK_TIMEOUT) for rank 1 (node 1)");
  EXPECT_EQ(p.waited_for(), 3);
  EXPECT_EQ(p.timed_out_ranks(), (std::set<int>{0, 1, 2}));
  FailureParser own;  // a communicator's rank that is the job's too: no job rank written
  own.feed_line("synk Timeout: barrier: rank 2 waited 2 s (SYNK_TIMEOUT) for ranks 0 (job rank "
                "4) and 1 (job rank 5), which have not reached this call");
  EXPECT_EQ(own.waited_for(), 4);
  EXPECT_EQ(own.timed_out_ranks(), (std::set<int>{2}));
}

// A rank's stderr comes through mpirun's: mpirun's words outside its frame of dashes (a rank
// that copies an old log) neither fail the job nor name a rank.
TEST(FailureParser, MpirunsWordsOutsideItsFrameAreARanksOutput) {
  FailureParser p;
  for (const char* l : {"log: Per user-direction, the job has been aborted.",
                        "ORTE has lost communication with a remote daemon.",
                        "  Process name: [[30945,1],1]", "  Exit code:    3",
                        "mpirun noticed that process rank 1 with PID 9 on node vm exited on "
                        "signal 11 (Segmentation fault)."}) {
    p.feed_line(l);
  }
  EXPECT_FALSE(p.job_failing());
  EXPECT_FALSE(p.rank());
  // Long after a rule (a rank's separator line, then its log), still the rank's.
  p.feed_line(kRule);
  for (int i = 0; i < 20; ++i) p.feed_line("step " + std::to_string(i));
  p.feed_line("a non-zero exit code. Per user-direction, the job has been aborted.");
  EXPECT_FALSE(p.job_failing());
}

}  // namespace
}  // namespace synk::launch
