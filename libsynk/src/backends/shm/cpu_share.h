// Whether the ranks of a node each have a CPU of their own, which decides how a waiting rank
// waits (shm::StepChannel::wait_until): where they do, it polls, as MPI does, since yielding hands
// its core to any other runnable process for a whole time slice (docs/shm-backend.md, "Why 2
// ms"); where ranks share CPUs it yields almost at once, since the rank it waits for may need
// that very core.
#pragma once

#include <sched.h>

#include <functional>
#include <span>
#include <string>
#include <vector>

namespace synk::shm {

// True when each rank can run on a CPU no other rank is given: a matching of ranks to CPUs of
// their affinity masks exists (grown by augmenting paths). Two ranks bound to the same single
// core share it, however many cores the machine has.
bool each_rank_has_a_cpu(std::span<const cpu_set_t> masks);

// The CPUs a cgroup v2 cpu.max text allows ("150000 100000": 1.5), or 0 for no limit ("max
// 100000", or text that is not a limit).
double cpu_max_limit(const std::string& text);

// The tightest CPU limit of a process's cgroup and its ancestors, or 0 for none, with
// `self_cgroup` the text of /proc/<pid>/cgroup and `root` where the cgroup file systems are
// mounted: cgroup v2's cpu.max from the process's group up to root; where a cgroup v1 hierarchy
// has the cpu controller (alone, or beside v2 on hybrid systems), cpu.cfs_quota_us over
// cpu.cfs_period_us from the group up to root/cpu (or root/cpu,cpuacct), whose top is, in a
// container, the container's own group. A container started with --cpus=1 has all the host's
// CPUs in its affinity mask, but only one CPU's time.
double cgroup_cpu_limit(const std::string& self_cgroup, const std::string& root);
double cgroup_cpu_limit();  // this process's, from /proc/self/cgroup and /sys/fs/cgroup

// A whole file's text (of /proc, /sys), or "" where it cannot be read.
std::string read_file_text(const std::string& path);

// One line of /proc/<pid>/cgroup: the v2 group ("0::/path"), or a v1 hierarchy's.
struct CgroupLine {
  bool v2 = false;
  std::string controllers;  // v1's, as ",cpu,cpuacct,": find ",cpu," among them
  std::string path;
};
std::vector<CgroupLine> cgroup_lines(const std::string& self_cgroup);
// visit(dir) for a group's directory, base + path, and every ancestor's up to the hierarchy's
// top, base: a parent's limit binds its children too.
void for_each_cgroup_up(const std::string& base, std::string path,
                        const std::function<void(const std::string& dir)>& visit);

}  // namespace synk::shm
