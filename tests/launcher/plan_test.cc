// synkrun's plan on the fixture topologies (real machines' hwloc XML), on synthetic
// topologies and on this machine: GPU discovery and numbering, localities, disjoint cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "topology.h"
#include "topology_export.h"
#include "topology_plan.h"

namespace synk::launch {
namespace {

std::string fixture(const std::string& name) { return std::string(SYNK_FIXTURES) + "/" + name; }

NodeTopology xml(const std::string& name) {
  return load_topology({TopologySource::Kind::xml_file, fixture(name)});
}

NodeTopology synthetic(const std::string& description) {
  return load_topology({TopologySource::Kind::synthetic, description});
}

std::vector<unsigned> range(unsigned lo, unsigned hi) {  // [lo, hi]
  std::vector<unsigned> v;
  for (unsigned i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

std::vector<unsigned> cat(std::vector<unsigned> a, const std::vector<unsigned>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  return a;
}

// Invariants of every plan that binds: each rank's cpus are whole cores; when no rank is
// marked shared, no PU is in two ranks.
void expect_whole_cores_and_disjoint(const NodeTopology& topo, const Plan& plan) {
  std::map<unsigned, const Core*> core_of;
  for (const Core& c : topo.cores) {
    for (unsigned pu : c.pus) core_of[pu] = &c;
  }
  std::map<unsigned, int> owner;
  bool any_shared = false;
  for (const RankPlan& r : plan.ranks) {
    any_shared = any_shared || r.shared;
    ASSERT_FALSE(r.cpus.empty()) << "local rank " << r.local_rank;
    EXPECT_TRUE(std::is_sorted(r.cpus.begin(), r.cpus.end()));
    for (unsigned pu : r.cpus) {
      ASSERT_TRUE(core_of.count(pu)) << "PU " << pu << " is in no core";
      for (unsigned sibling : core_of[pu]->pus) {
        EXPECT_TRUE(std::binary_search(r.cpus.begin(), r.cpus.end(), sibling))
            << "local rank " << r.local_rank << " has PU " << pu << " but not its sibling "
            << sibling;
      }
    }
  }
  if (any_shared) return;
  for (const RankPlan& r : plan.ranks) {
    for (unsigned pu : r.cpus) {
      auto [it, fresh] = owner.emplace(pu, r.local_rank);
      EXPECT_TRUE(fresh) << "PU " << pu << " is in local ranks " << it->second << " and "
                         << r.local_rank;
    }
  }
}

// ---- dgx2-16gpu: 16 V100s behind PCIe switches, 12 NVSwitches, 2 PUs per package ----

TEST(PlanDgx2, SixteenGpusInBusIdOrderWithoutNvswitches) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const std::vector<std::string> expected = {
      "0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0",
      "0000:57:00.0", "0000:59:00.0", "0000:5c:00.0", "0000:5e:00.0",
      "0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",
      "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0"};
  ASSERT_EQ(t.gpus.size(), 16u);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(t.gpus[i].index, static_cast<int>(i));
    EXPECT_EQ(t.gpus[i].pci, expected[i]) << "GPU " << i;
    if (i < 8) {
      EXPECT_EQ(t.gpus[i].cpus, (std::vector<unsigned>{0, 1})) << "GPU " << i;
      EXPECT_EQ(t.gpus[i].numa, 0u);
    } else {
      EXPECT_EQ(t.gpus[i].cpus, (std::vector<unsigned>{24, 25})) << "GPU " << i;
      EXPECT_EQ(t.gpus[i].numa, 1u);
    }
  }
  EXPECT_EQ(t.cores.size(), 4u);
  EXPECT_EQ(t.numas.size(), 2u);
  EXPECT_EQ(default_rank_count(t, {}), 16);
  EXPECT_EQ(default_rank_count(t, {std::nullopt, std::nullopt, 4}), 4);
}

TEST(PlanDgx2, SixteenRanksShareTheirPackagesCores) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const Plan p = make_plan(t, 16, {});
  EXPECT_EQ(p.mode, BindMode::gpu);
  ASSERT_EQ(p.ranks.size(), 16u);
  for (int r = 0; r < 16; ++r) {
    const RankPlan& rp = p.ranks[static_cast<std::size_t>(r)];
    EXPECT_EQ(rp.gpus, std::vector<int>{r});
    const unsigned pu =
        r < 8 ? static_cast<unsigned>(r / 4) : 24u + static_cast<unsigned>((r - 8) / 4);
    EXPECT_EQ(rp.cpus, std::vector<unsigned>{pu}) << "local rank " << r;
    EXPECT_EQ(rp.numa, r < 8 ? 0u : 1u);
    EXPECT_TRUE(rp.shared);
  }
  ASSERT_EQ(p.notes.size(), 2u);
  EXPECT_NE(p.notes[0].find("fewer cores than ranks"), std::string::npos) << p.notes[0];
  expect_whole_cores_and_disjoint(t, p);
}

TEST(PlanDgx2, FourRanksOfFourGpusGetOneCoreEach) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const Plan p = make_plan(t, 4, {std::nullopt, std::nullopt, 4});
  ASSERT_EQ(p.ranks.size(), 4u);
  const std::vector<unsigned> pus = {0, 1, 24, 25};
  for (int r = 0; r < 4; ++r) {
    const RankPlan& rp = p.ranks[static_cast<std::size_t>(r)];
    EXPECT_EQ(rp.gpus, (std::vector<int>{4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3}));
    EXPECT_EQ(rp.cpus, std::vector<unsigned>{pus[static_cast<std::size_t>(r)]});
    EXPECT_FALSE(rp.shared);
  }
  EXPECT_TRUE(p.notes.empty());
  expect_whole_cores_and_disjoint(t, p);
}

TEST(PlanDgx2, FourRanksTakeTheFirstFourGpus) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const Plan p = make_plan(t, 4, {});
  // GPUs 0-3 all hang under package 0, whose 2 cores the 4 ranks must share.
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(p.ranks[static_cast<std::size_t>(r)].gpus, std::vector<int>{r});
    EXPECT_EQ(p.ranks[static_cast<std::size_t>(r)].cpus,
              std::vector<unsigned>{static_cast<unsigned>(r / 2)});
  }
  const Plan two = make_plan(t, 2, {});
  EXPECT_EQ(two.ranks[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ(two.ranks[1].cpus, std::vector<unsigned>{1});
  EXPECT_FALSE(two.ranks[0].shared);
}

TEST(PlanDgx2, GpusListRestrictsAndOrders) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  PlanOptions o;
  o.gpus = std::vector<int>{12, 8};
  const Plan p = make_plan(t, 2, o);
  EXPECT_EQ(p.ranks[0].gpus, std::vector<int>{12});
  EXPECT_EQ(p.ranks[1].gpus, std::vector<int>{8});
  EXPECT_EQ(p.ranks[0].cpus, std::vector<unsigned>{24});
  EXPECT_EQ(p.ranks[1].cpus, std::vector<unsigned>{25});
  EXPECT_EQ(default_rank_count(t, o), 2);

  o.gpus = std::vector<int>{3, 16};
  try {
    make_plan(t, 1, o);
    FAIL() << "GPU 16 accepted";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU 16"), std::string::npos) << e.what();
  }
  o.gpus = std::vector<int>{3, 3};
  EXPECT_THROW(make_plan(t, 1, o), PlanError);
}

TEST(PlanDgx2, MoreRanksThanGpusWithBindGpuIsAnErrorNamingBoth) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  try {
    make_plan(t, 17, {BindMode::gpu, std::nullopt, 1});
    FAIL() << "17 ranks on 16 GPUs accepted";
  } catch (const PlanError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("17 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("16 GPUs"), std::string::npos) << m;
  }
  EXPECT_THROW(make_plan(t, 5, {BindMode::gpu, std::nullopt, 4}), PlanError);
}

// Without --bind, more ranks than GPUs run bound to cores, with no GPU, and a note says so.
TEST(PlanDgx2, MoreRanksThanGpusByDefaultAreBoundToCores) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  for (const PlanOptions& o : {PlanOptions{}, PlanOptions{std::nullopt, std::nullopt, 4}}) {
    const Plan p = make_plan(t, o.gpus_per_rank == 4 ? 5 : 17, o);
    EXPECT_EQ(p.mode, BindMode::core);
    for (const RankPlan& r : p.ranks) {
      EXPECT_TRUE(r.gpus.empty());
      EXPECT_FALSE(r.cpus.empty());
    }
    ASSERT_FALSE(p.notes.empty());  // (then the cores shared by 17 ranks, ...)
    EXPECT_NE(p.notes[0].find("GPUs, the node offers 16: ranks get no GPU and are bound to cores "
                              "(--bind gpu makes this an error)"),
              std::string::npos)
        << p.notes[0];
  }
  const Plan fits = make_plan(t, 16, {});
  EXPECT_EQ(fits.mode, BindMode::gpu);
  for (const std::string& n : fits.notes) EXPECT_EQ(n.find("no GPU"), std::string::npos) << n;
}

TEST(PlanDgx2, OtherBindModes) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const Plan none = make_plan(t, 4, {BindMode::none, std::nullopt, 1});
  for (const RankPlan& r : none.ranks) {
    EXPECT_TRUE(r.cpus.empty());
    EXPECT_EQ(r.gpus.size(), 1u);
  }
  // GPUs 0-3 hang under NUMA node 0: --bind numa gives each rank that node, shared, and says so
  // (it spread them over both nodes, ranks 2 and 3 away from their GPUs, marked unshared).
  const Plan numa = make_plan(t, 4, {BindMode::numa, std::nullopt, 1});
  for (const RankPlan& r : numa.ranks) {
    EXPECT_EQ(r.cpus, (std::vector<unsigned>{0, 1})) << "local rank " << r.local_rank;
    EXPECT_EQ(r.numa, 0u);
    EXPECT_TRUE(r.shared);
  }
  ASSERT_EQ(numa.notes.size(), 1u);
  EXPECT_EQ(numa.notes[0],
            "local ranks 0-3 share the cores of NUMA node 0 (cpus 0-1, --bind numa)");
  // 16 GPUs in ranks of 3: GPU 15 stays idle, and a note says so.
  const Plan k3 = make_plan(t, 5, {std::nullopt, std::nullopt, 3});
  EXPECT_EQ(k3.ranks[4].gpus, (std::vector<int>{12, 13, 14}));
  ASSERT_FALSE(k3.notes.empty());
  EXPECT_EQ(k3.notes[0], "GPU 15 left unused: 16 GPUs do not divide by --gpus-per-rank 3");
  // GPUs 8-11 hang under NUMA node 1: --bind core keeps their ranks there.
  const Plan far = make_plan(t, 2, {BindMode::core, std::vector<int>{8, 9}, 1});
  EXPECT_EQ(far.ranks[0].cpus, std::vector<unsigned>{24});
  EXPECT_EQ(far.ranks[1].cpus, std::vector<unsigned>{25});
  EXPECT_EQ(far.ranks[1].numa, 1u);
  // --bind core allows more ranks than GPUs; they get none, and a note says so.
  const Plan core = make_plan(t, 20, {BindMode::core, std::nullopt, 1});
  for (const RankPlan& r : core.ranks) EXPECT_TRUE(r.gpus.empty());
  ASSERT_FALSE(core.notes.empty());
  EXPECT_NE(core.notes[0].find("no GPU"), std::string::npos) << core.notes[0];
}

// The same file with its OS devices renamed so that neither CUDA nor NVML devices are seen:
// discovery falls back to NVIDIA PCI devices of class 0x0300/0x0302.
NodeTopology without_cuda_nvml(const std::string& name) {
  std::ifstream in(fixture(name));
  std::stringstream text;
  text << in.rdbuf();
  std::string xml_text = text.str();
  for (const char* from : {"name=\"nvml", "name=\"cuda"}) {
    for (std::size_t at = xml_text.find(from); at != std::string::npos;
         at = xml_text.find(from, at + 1)) {
      xml_text.replace(at, 6, "name=\"x");  // nvml3 -> xvml3, cuda0 -> xuda0
    }
  }
  const std::string path = ::testing::TempDir() + "synkrun_fallback_" + name;
  std::ofstream(path) << xml_text;
  NodeTopology t = load_topology({TopologySource::Kind::xml_file, path});
  std::remove(path.c_str());
  return t;
}

TEST(PlanDgx2, PciFallbackFindsTheSameGpusAndNoNvswitch) {
  const NodeTopology with = xml("dgx2-16gpu.xml");
  const NodeTopology without = without_cuda_nvml("dgx2-16gpu.xml");
  ASSERT_EQ(without.gpus.size(), 16u);
  for (std::size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(without.gpus[i].pci, with.gpus[i].pci);
    EXPECT_EQ(without.gpus[i].cpus, with.gpus[i].cpus);
  }
}

// ---- 2numa-32pu-1gpu: three NVIDIA 3D controllers, of which CUDA saw one (cuda0) ----

TEST(Plan2Numa, OnlyTheCudaDeviceIsAGpu) {
  const NodeTopology t = xml("2numa-32pu-1gpu.xml");
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].pci, "0000:84:00.0");
  EXPECT_EQ(t.gpus[0].numa, 1u);
  const std::vector<unsigned> package1 = cat(range(8, 15), range(24, 31));
  EXPECT_EQ(t.gpus[0].cpus, package1);
  EXPECT_EQ(t.cores.size(), 16u);
  for (const Core& c : t.cores) EXPECT_EQ(c.pus.size(), 2u);

  const Plan one = make_plan(t, 1, {});
  EXPECT_EQ(one.ranks[0].gpus, std::vector<int>{0});
  EXPECT_EQ(one.ranks[0].cpus, package1);
  EXPECT_EQ(one.ranks[0].numa, 1u);
  EXPECT_EQ(plan_to_json(one, t),
            "[\n  {\"local_rank\":0,\"gpu\":0,\"pci\":\"0000:84:00.0\",\"gpus\":[0],"
            "\"cpus\":[8,9,10,11,12,13,14,15,24,25,26,27,28,29,30,31],\"numa\":1,"
            "\"shared\":false,\"bind\":\"gpu\"}\n]");
}

// A cpuset on the other socket from the GPU (hwloc then gives the GPU no CPUs, or CPUs the job
// may not use): the rank runs on the cores it has, and a note says it is far from its GPU.
TEST(Plan2Numa, NoAllowedCoreNearTheGpuIsNoted) {
  const NodeTopology full = xml("2numa-32pu-1gpu.xml");
  NodeTopology t = full;
  t.cores.clear();
  for (const Core& c : full.cores) {
    if (c.pus.front() < 8) t.cores.push_back(c);
  }
  const std::vector<unsigned> package0 = cat(range(0, 7), range(16, 23));
  for (const std::vector<unsigned>& gpu_cpus : {full.gpus[0].cpus, std::vector<unsigned>{}}) {
    t.gpus[0].cpus = gpu_cpus;
    const Plan p = make_plan(t, 1, {});
    EXPECT_EQ(p.ranks[0].cpus, package0);
    ASSERT_EQ(p.notes.size(), 1u);
    EXPECT_NE(p.notes[0].find("local rank 0: none of the cores this job may use is near its GPU "
                              "0 (0000:84:00.0)"),
              std::string::npos)
        << p.notes[0];
  }
  EXPECT_TRUE(make_plan(full, 1, {}).notes.empty());
}

TEST(Plan2Numa, TwoRanksOnOneGpu) {
  const NodeTopology t = xml("2numa-32pu-1gpu.xml");
  try {
    make_plan(t, 2, {BindMode::gpu, std::nullopt, 1});
    FAIL() << "2 ranks on 1 GPU accepted with --bind gpu";
  } catch (const PlanError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 ranks"), std::string::npos) << m;
    EXPECT_NE(m.find("1 GPU"), std::string::npos) << m;
  }
  // --bind core (and no --bind): one rank per package, whole cores with both hyperthreads, no GPU.
  EXPECT_EQ(make_plan(t, 2, {}).ranks[1].cpus, cat(range(8, 15), range(24, 31)));
  const Plan p = make_plan(t, 2, {BindMode::core, std::nullopt, 1});
  EXPECT_EQ(p.ranks[0].cpus, cat(range(0, 7), range(16, 23)));
  EXPECT_EQ(p.ranks[0].numa, 0u);
  EXPECT_EQ(p.ranks[1].cpus, cat(range(8, 15), range(24, 31)));
  EXPECT_EQ(p.ranks[1].numa, 1u);
  expect_whole_cores_and_disjoint(t, p);
  const Plan four = make_plan(t, 4, {BindMode::core, std::nullopt, 1});
  for (const RankPlan& r : four.ranks) EXPECT_EQ(r.cpus.size(), 8u);  // 4 cores x 2 PUs
  expect_whole_cores_and_disjoint(t, four);
}

// One rank with the GPU, bound by core or NUMA node: the GPU's package (NUMA node 1), not the
// first NUMA node, which --bind core and --bind numa gave it.
TEST(Plan2Numa, CoreAndNumaModesKeepTheRankOnItsGpusNode) {
  const NodeTopology t = xml("2numa-32pu-1gpu.xml");
  const std::vector<unsigned> package1 = cat(range(8, 15), range(24, 31));
  for (BindMode mode : {BindMode::core, BindMode::numa}) {
    const Plan p = make_plan(t, 1, {mode, std::nullopt, 1});
    EXPECT_EQ(p.ranks[0].gpus, std::vector<int>{0});
    EXPECT_EQ(p.ranks[0].cpus, package1);
    EXPECT_EQ(p.ranks[0].numa, 1u);
    EXPECT_FALSE(p.ranks[0].shared);
    EXPECT_TRUE(p.notes.empty()) << p.notes.front();
  }
}

TEST(Plan2Numa, PciFallbackSeesAllThreeNvidiaControllers) {
  const NodeTopology t = without_cuda_nvml("2numa-32pu-1gpu.xml");
  ASSERT_EQ(t.gpus.size(), 3u);  // the ATI VGA device at 84:00.1 is not NVIDIA
  EXPECT_EQ(t.gpus[0].pci, "0000:03:00.0");
  EXPECT_EQ(t.gpus[0].numa, 0u);
  EXPECT_EQ(t.gpus[1].pci, "0000:83:00.0");
  EXPECT_EQ(t.gpus[2].pci, "0000:84:00.0");
  EXPECT_EQ(t.gpus[2].numa, 1u);
}

// ---- 4numa-96pu-nogpu: CPU only, an ATI display device, packages interleaved by PU ----

TEST(Plan4Numa, NoGpuAndNoDefaultRankCount) {
  const NodeTopology t = xml("4numa-96pu-nogpu.xml");
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_EQ(t.numas.size(), 4u);
  EXPECT_EQ(t.cores.size(), 96u);
  try {
    default_rank_count(t, {});
    FAIL() << "a rank count without GPUs";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("-np"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_plan(t, 1, {BindMode::gpu, std::nullopt, 1}), PlanError);
  // GPU options on a node without GPUs are said to do nothing, not taken silently.
  const Plan k2 = make_plan(t, 2, {BindMode::core, std::nullopt, 2});
  ASSERT_EQ(k2.notes.size(), 1u);
  EXPECT_EQ(k2.notes[0], "the node has no GPU: --gpus-per-rank has no effect");
  EXPECT_TRUE(make_plan(t, 2, {BindMode::core, std::nullopt, 1}).notes.empty());
}

TEST(Plan4Numa, RanksSpreadOverNumaNodesWithDisjointCores) {
  const NodeTopology t = xml("4numa-96pu-nogpu.xml");
  const Plan p4 = make_plan(t, 4, {});
  EXPECT_EQ(p4.mode, BindMode::core);
  for (unsigned r = 0; r < 4; ++r) {
    EXPECT_EQ(p4.ranks[r].numa, r);
    EXPECT_EQ(p4.ranks[r].cpus, range(24 * r, 24 * r + 23)) << "local rank " << r;
  }
  for (int n : {2, 3, 5, 8, 13, 96}) {
    const Plan p = make_plan(t, n, {});
    expect_whole_cores_and_disjoint(t, p);
    std::map<unsigned, int> per_numa;
    for (const RankPlan& r : p.ranks) {
      ASSERT_TRUE(r.numa);
      ++per_numa[*r.numa];
      const auto& node = t.numas[*r.numa].pus;
      for (unsigned pu : r.cpus) {
        EXPECT_TRUE(std::binary_search(node.begin(), node.end(), pu))
            << n << " ranks: PU " << pu << " outside NUMA node " << *r.numa;
      }
    }
    for (const auto& [numa, count] : per_numa) {
      EXPECT_LE(count, (n + 3) / 4) << n << " ranks: NUMA node " << numa;
      EXPECT_GE(count, n / 4) << n << " ranks: NUMA node " << numa;
    }
    EXPECT_TRUE(p.notes.empty()) << p.notes.front();
  }
  // --bind numa: 6 ranks on 4 NUMA nodes; two nodes take two ranks each, which share them.
  const Plan n6 = make_plan(t, 6, {BindMode::numa, std::nullopt, 1});
  std::map<unsigned, int> on_numa;
  for (const RankPlan& r : n6.ranks) ++on_numa[r.numa.value()];
  for (const RankPlan& r : n6.ranks) {
    EXPECT_EQ(r.cpus, t.numas[*r.numa].pus);
    EXPECT_EQ(r.shared, on_numa[*r.numa] > 1) << "local rank " << r.local_rank;
  }
  EXPECT_EQ(n6.notes.size(), 2u);
  const Plan p100 = make_plan(t, 100, {});
  for (const RankPlan& r : p100.ranks) EXPECT_EQ(r.cpus.size(), 1u);
  EXPECT_TRUE(std::any_of(p100.ranks.begin(), p100.ranks.end(),
                          [](const RankPlan& r) { return r.shared; }));
  EXPECT_FALSE(p100.notes.empty());
}

// ---- synthetic topologies ----

TEST(PlanSynthetic, TwoPackagesFourCoresTwoThreads) {
  const NodeTopology t = synthetic("pack:2 core:4 pu:2");
  EXPECT_TRUE(t.gpus.empty());
  ASSERT_EQ(t.cores.size(), 8u);
  const Plan p2 = make_plan(t, 2, {});
  EXPECT_EQ(p2.ranks[0].cpus, range(0, 7));
  EXPECT_EQ(p2.ranks[1].cpus, range(8, 15));
  expect_whole_cores_and_disjoint(t, p2);
  const Plan p3 = make_plan(t, 3, {});  // 8 cores: 3, 3, 2
  EXPECT_EQ(p3.ranks[0].cpus.size(), 6u);
  EXPECT_EQ(p3.ranks[1].cpus.size(), 6u);
  EXPECT_EQ(p3.ranks[2].cpus.size(), 4u);
  expect_whole_cores_and_disjoint(t, p3);
  const Plan p16 = make_plan(t, 16, {});
  for (const RankPlan& r : p16.ranks) {
    EXPECT_TRUE(r.shared);
    EXPECT_EQ(r.cpus.size(), 2u);
  }
}

TEST(PlanSynthetic, MoreThanSixtyFourRanksPerCoreAreRefused) {
  // The rank step's guard on every node, whatever host list brought the ranks there.
  const NodeTopology t = synthetic("pack:1 core:2 pu:2");
  EXPECT_EQ(make_plan(t, 128, {}).ranks.size(), 128u);
  try {
    make_plan(t, 129, {});
    ADD_FAILURE() << "129 ranks on 2 cores were planned";
  } catch (const PlanError& e) {
    EXPECT_STREQ(e.what(), "129 ranks on a node of 2 cores: more than 64 ranks per core; "
                           "spread them over more hosts");
  }
}

// hwloc 2 gives a NUMA node with memory only the PUs of what it hangs off: a CXL expander under
// the machine (every PU), HBM in flat mode beside each package's DRAM (the package's). Such a
// node was a group of its own: ranks counted its cores twice and overlapped, with no note.
TEST(PlanSynthetic, MemoryOnlyNumaNodesGetNoRanks) {
  const NodeTopology cxl = synthetic("[numa] pack:2 [numa] core:4 pu:2");
  ASSERT_EQ(cxl.numas.size(), 3u);
  const Plan p = make_plan(cxl, 4, {});
  expect_whole_cores_and_disjoint(cxl, p);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(p.ranks[i].shared) << i;
    EXPECT_EQ(p.ranks[i].numa, std::optional<unsigned>(i < 2 ? 0 : 1)) << i;
  }
  const NodeTopology hbm = synthetic("pack:2 [numa] [numa] core:4 pu:2");
  ASSERT_EQ(hbm.numas.size(), 4u);
  const Plan two = make_plan(hbm, 2, {});
  EXPECT_EQ(two.ranks[0].cpus, range(0, 7));
  EXPECT_EQ(two.ranks[1].cpus, range(8, 15));
  EXPECT_EQ(two.ranks[0].numa, std::optional<unsigned>(0));  // each package's DRAM, first
  EXPECT_EQ(two.ranks[1].numa, std::optional<unsigned>(2));
}

// A GPU's NUMA node where a memory-only node is local to its package too (the 2numa fixture
// with a CXL node under the machine, re-exported by hwloc 2.9): it had none, so no memory
// binding.
TEST(Plan2Numa, TheGpusNumaNodeBesideAMemoryOnlyNode) {
  const NodeTopology t = xml("2numa-32pu-1gpu-cxl.xml");
  ASSERT_EQ(t.gpus.size(), 1u);
  EXPECT_EQ(t.gpus[0].numa, std::optional<unsigned>(1));
  const Plan p = make_plan(t, 1, {});
  EXPECT_EQ(p.ranks[0].numa, std::optional<unsigned>(1));
  EXPECT_EQ(p.ranks[0].cpus, xml("2numa-32pu-1gpu.xml").gpus[0].cpus);
}

// Three ranks on two cores: the first two share one, the third has its own (it was marked
// shared too).
TEST(PlanSynthetic, OnlyRanksOnACommonCoreAreShared) {
  const Plan p = make_plan(synthetic("pack:1 core:2 pu:1"), 3, {});
  EXPECT_TRUE(p.ranks[0].shared);
  EXPECT_TRUE(p.ranks[1].shared);
  EXPECT_FALSE(p.ranks[2].shared);
  EXPECT_EQ(p.ranks[0].cpus, p.ranks[1].cpus);
}

TEST(PlanSynthetic, NumaNodesFromSyntheticDescription) {
  const NodeTopology t = synthetic("pack:2 [numa] core:3 pu:1");
  ASSERT_EQ(t.numas.size(), 2u);
  const Plan p = make_plan(t, 2, {BindMode::core, std::nullopt, 1});
  EXPECT_EQ(p.ranks[0].numa, t.numas[0].os_index);
  EXPECT_EQ(p.ranks[1].numa, t.numas[1].os_index);
  EXPECT_EQ(p.ranks[0].cpus, t.numas[0].pus);
  EXPECT_EQ(p.ranks[1].cpus, t.numas[1].pus);
  const Plan n4 = make_plan(t, 4, {BindMode::numa, std::nullopt, 1});
  EXPECT_EQ(n4.ranks[1].cpus, t.numas[0].pus);
  EXPECT_EQ(n4.ranks[2].cpus, t.numas[1].pus);
}

// NUMA nodes with different numbers of usable cores (a container allowed 1 core of one and 3
// of the other): --bind core gives the ranks cores in proportion, one each for 4 ranks. The
// even split put 2 ranks on the one core and left one of the 3 idle, noting "fewer cores
// than ranks".
TEST(PlanSynthetic, UnevenNumaNodesGetRanksInProportionToTheirCores) {
  NodeTopology t;
  for (unsigned pu = 0; pu < 4; ++pu) t.cores.push_back(Core{{pu}});
  t.numas = {NumaNode{0, {0}}, NumaNode{1, {1, 2, 3}}};
  const Plan p = make_plan(t, 4, {BindMode::core, std::nullopt, 1});
  for (unsigned r = 0; r < 4; ++r) {
    EXPECT_EQ(p.ranks[r].cpus, (std::vector<unsigned>{r})) << "local rank " << r;
    EXPECT_FALSE(p.ranks[r].shared);
  }
  EXPECT_EQ(p.ranks[0].numa, 0u);
  EXPECT_EQ(p.ranks[3].numa, 1u);
  EXPECT_TRUE(p.notes.empty()) << p.notes.front();
  expect_whole_cores_and_disjoint(t, p);
  const Plan two = make_plan(t, 2, {BindMode::core, std::nullopt, 1});  // 0.5 and 1.5: a tie
  EXPECT_EQ(two.ranks[0].numa, 0u);
  EXPECT_EQ(two.ranks[1].numa, 1u);
  expect_whole_cores_and_disjoint(t, two);
}

// ---- this machine ----

TEST(PlanThisMachine, OneRankPerCoreIsDisjointAndCoversEveryCore) {
  const NodeTopology t = load_topology({});
  ASSERT_FALSE(t.cores.empty());
  const int n = static_cast<int>(t.cores.size());
  const PlanOptions o{BindMode::core, std::nullopt, 1};
  const Plan p = make_plan(t, n, o);
  expect_whole_cores_and_disjoint(t, p);
  std::set<unsigned> all;
  for (const RankPlan& r : p.ranks) all.insert(r.cpus.begin(), r.cpus.end());
  std::set<unsigned> pus;
  for (const Core& c : t.cores) pus.insert(c.pus.begin(), c.pus.end());
  EXPECT_EQ(all, pus);
  const Plan over = make_plan(t, 2 * n + 1, o);
  EXPECT_TRUE(over.ranks.back().shared);
}

TEST(PlanThisMachine, ExportedXmlGivesTheSameTopologyAndCanBind) {
  // The launcher hands its export to the ranks on its host; they must see the same machine.
  const Hwloc live(TopologySource{});
  // Through the same in-memory file, read back by path as a rank on this host reads it.
  const TopologyExport exported = TopologyExport::create(live.xml());
  const NodeTopology a = live.extract();
  const Hwloc loaded(TopologySource{TopologySource::Kind::xml_file, exported.path(), true});
  const NodeTopology b = loaded.extract();
  ASSERT_EQ(a.cores.size(), b.cores.size());
  for (std::size_t i = 0; i < a.cores.size(); ++i) EXPECT_EQ(a.cores[i].pus, b.cores[i].pus);
  ASSERT_EQ(a.numas.size(), b.numas.size());
  ASSERT_EQ(a.gpus.size(), b.gpus.size());
  for (std::size_t i = 0; i < a.gpus.size(); ++i) EXPECT_EQ(a.gpus[i].pci, b.gpus[i].pci);
  // Binding to every PU we may use is allowed and changes nothing.
  std::vector<unsigned> all;
  for (const Core& c : b.cores) all.insert(all.end(), c.pus.begin(), c.pus.end());
  EXPECT_NO_THROW(loaded.bind_process(all, std::nullopt));
  // A fixture is not this machine: binding with it is refused.
  const Hwloc fixture_topo(
      TopologySource{TopologySource::Kind::xml_file, fixture("dgx2-16gpu.xml")});
  EXPECT_THROW(fixture_topo.bind_process({0}, std::nullopt), std::runtime_error);
}

// The ranks take the export only from their own machine, and only the export itself: on a host
// of the same name, synkrun's /proc/PID/fd/N may be any other process's file.
TEST(PlanThisMachine, AnExportIsKnownByItsMachineAndItsFile) {
  const TopologyExport exported = TopologyExport::create("<topology/>");
  EXPECT_TRUE(TopologyExport::is_export(exported.path()));
  EXPECT_FALSE(TopologyExport::is_export("/proc/self/exe"));
  EXPECT_FALSE(TopologyExport::is_export("/no/such/file"));
  const std::string machine = TopologyExport::machine();
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  ASSERT_FALSE(boot_id.empty());
  EXPECT_EQ(machine.substr(machine.size() - boot_id.size() - 1), "/" + boot_id);
}

// ---- lists and modes ----

TEST(PlanLists, FormatAndParse) {
  EXPECT_EQ(format_list({}), "");
  EXPECT_EQ(format_list({3}), "3");
  EXPECT_EQ(format_list({8, 0, 1, 2, 3, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(parse_list("0-3,8"), (std::vector<unsigned>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_list("5,1"), (std::vector<unsigned>{5, 1}));
  for (const char* bad : {"", ",", "1,", "a", "3-1", "-1", "1-", "1--2", "2 "}) {
    EXPECT_THROW(parse_list(bad), PlanError) << "\"" << bad << "\"";
  }
  EXPECT_EQ(parse_bind_mode("numa"), BindMode::numa);
  EXPECT_FALSE(parse_bind_mode("socket"));
  EXPECT_THROW(make_plan(synthetic("core:2 pu:1"), 0, {}), PlanError);
}

}  // namespace
// A rank whose GPUs span both sockets (3 GPUs each on a 16-GPU node: rank 2 has GPUs 6-8)
// made a group of its own over both sockets' cores, and got cores the ranks of each socket
// also got, with no rank marked shared. Now it joins its first GPU's socket.
TEST(PlanDgx2, RanksWhoseGpusSpanSocketsGetCoresOfTheirOwn) {
  const NodeTopology t = xml("dgx2-16gpu.xml");
  const Plan p = make_plan(t, 5, {std::nullopt, std::nullopt, 3});
  expect_whole_cores_and_disjoint(t, p);
  // This fixture has 2 PUs a package: a PU in two ranks is allowed only where both say so.
  std::map<unsigned, const RankPlan*> owner;
  for (const RankPlan& r : p.ranks) {
    for (unsigned pu : r.cpus) {
      auto [it, fresh] = owner.emplace(pu, &r);
      if (!fresh) {
        EXPECT_TRUE(r.shared && it->second->shared)
            << "PU " << pu << " in local ranks " << it->second->local_rank << " and "
            << r.local_rank << " without both marked shared";
      }
    }
  }
  EXPECT_FALSE(p.ranks[3].shared);  // the second socket's two ranks: a core each
  EXPECT_FALSE(p.ranks[4].shared);
  const std::vector<unsigned>& near6 = t.gpus[6].cpus;
  for (unsigned pu : p.ranks[2].cpus) {
    EXPECT_TRUE(std::binary_search(near6.begin(), near6.end(), pu)) << "PU " << pu;
  }
}

// A CUDA_VISIBLE_DEVICES already set where synkrun starts: refused on a node with GPUs unless
// --gpus says which (synkrun replaced it per rank, and ranks used GPUs outside it).
TEST(PlanLists, AnInheritedCudaVisibleDevicesNeedsGpus) {
  const NodeTopology gpus = xml("dgx2-16gpu.xml");
  const NodeTopology none = xml("4numa-96pu-nogpu.xml");
  PlanOptions o;
  const std::string err = inherited_visible_devices_error("4,5", gpus, o);
  EXPECT_NE(err.find("CUDA_VISIBLE_DEVICES=4,5 is set"), std::string::npos) << err;
  EXPECT_NE(err.find("--gpus LIST"), std::string::npos) << err;
  EXPECT_EQ(inherited_visible_devices_error(nullptr, gpus, o), "");
  EXPECT_EQ(inherited_visible_devices_error("", gpus, o), "");
  EXPECT_EQ(inherited_visible_devices_error("4,5", none, o), "");  // no GPU here: left alone
  o.gpus = std::vector<int>{4, 5};
  EXPECT_EQ(inherited_visible_devices_error("4,5", gpus, o), "");
}

}  // namespace synk::launch
