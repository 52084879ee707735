// A node's hardware as synkrun's plan needs it: GPUs (with PCI bus id and CPU locality),
// cores with their PUs and NUMA nodes, extracted from hwloc into plain structs.
#pragma once

#include <optional>
#include <string>
#include <vector>

struct hwloc_topology;  // hwloc.h stays out of this header

namespace synk::launch {

struct Gpu {
  int index = 0;                 // position in PCI bus-id order (CUDA_DEVICE_ORDER=PCI_BUS_ID)
  std::string pci;               // "0000:84:00.0"
  std::vector<unsigned> cpus;    // OS PU indexes of the nearest non-I/O ancestor, sorted
  std::optional<unsigned> numa;  // OS index of that ancestor's NUMA node, when it has exactly one
};

struct Core {
  std::vector<unsigned> pus;  // OS PU indexes, sorted
};

struct NumaNode {
  unsigned os_index = 0;
  // OS PU indexes, sorted. hwloc 2 gives a node with memory only (CXL, HBM in flat mode beside
  // DRAM) the PUs of the object it hangs off: the whole machine, or a package shared with DRAM.
  std::vector<unsigned> pus;
};

struct NodeTopology {
  std::vector<Gpu> gpus;        // in PCI bus-id order
  std::vector<Core> cores;      // in hwloc's logical order
  std::vector<NumaNode> numas;  // in hwloc's logical order
};

// Per core (topo.cores' order), the index into topo.numas of the NUMA node nearest it: of the
// nodes whose PUs hold the core, the one with the fewest PUs, the first of equals (Linux
// numbers DRAM before HBM and CXL); -1 for none. A node nearest no core has memory only.
std::vector<int> numa_of_cores(const NodeTopology& topo);

// Where a topology comes from: this machine, an hwloc XML file, or an hwloc synthetic
// description such as "pack:2 core:4 pu:2".
struct TopologySource {
  enum class Kind { this_machine, xml_file, synthetic };
  Kind kind = Kind::this_machine;
  std::string text;  // the file name or the synthetic description
  // An XML file that synkrun exported from this very machine moments ago: hwloc may bind with
  // it (HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM), and loading it skips the slow PCI discovery.
  bool xml_of_this_machine = false;
  // This machine as far as the process's CPU binding reaches (taskset, numactl): the CPUs
  // outside it are not the job's.
  bool within_binding = false;
};

// An hwloc topology, loaded with its important I/O devices (PCI GPUs, CUDA/NVML devices).
class Hwloc {
 public:
  // Throws std::runtime_error naming the source when it cannot be read.
  explicit Hwloc(const TopologySource& source);
  ~Hwloc();
  Hwloc(const Hwloc&) = delete;
  Hwloc& operator=(const Hwloc&) = delete;

  NodeTopology extract() const;

  // The topology as hwloc XML. Throws std::runtime_error on failure.
  std::string xml() const;

  // Binds the calling process (all its threads) to the PUs, and its memory to the NUMA node
  // where the system allows it. Throws std::runtime_error when the CPU binding fails; returns
  // a warning (or "") when only the memory binding failed.
  std::string bind_process(const std::vector<unsigned>& cpus,
                           const std::optional<unsigned>& numa) const;

 private:
  ::hwloc_topology* topo_ = nullptr;
  bool this_system_ = false;
};

// Loads a topology and extracts it (Hwloc(source).extract()).
NodeTopology load_topology(const TopologySource& source);

}  // namespace synk::launch
