// Loading a topology with hwloc (this machine, XML, synthetic), extracting GPUs, cores and NUMA
// nodes into plain structs, and binding the calling process.
#include "topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

namespace synk::launch {
namespace {

std::string describe(const TopologySource& s) {
  switch (s.kind) {
    case TopologySource::Kind::this_machine:
      return "this machine";
    case TopologySource::Kind::xml_file:
      return "topology file " + s.text;
    case TopologySource::Kind::synthetic:
      return "synthetic topology \"" + s.text + "\"";
  }
  return "topology";
}

std::vector<unsigned> bits(hwloc_const_bitmap_t set) {
  std::vector<unsigned> out;
  if (set == nullptr) return out;
  for (int i = hwloc_bitmap_first(set); i >= 0; i = hwloc_bitmap_next(set, i)) {
    out.push_back(static_cast<unsigned>(i));
  }
  return out;
}

// RAII for an hwloc bitmap.
struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  Bitmap() = default;
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  ~Bitmap() { hwloc_bitmap_free(b); }
};

// "cudaN" or "nvmlN": the OS devices through which CUDA or NVML saw a GPU.
bool is_cuda_or_nvml(const char* name) {
  if (name == nullptr) return false;
  if (std::strncmp(name, "cuda", 4) != 0 && std::strncmp(name, "nvml", 4) != 0) return false;
  const char* digits = name + 4;
  if (*digits == '\0') return false;
  for (const char* c = digits; *c; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  return true;
}

bool is_nvidia_gpu_class(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return a.vendor_id == 0x10de && (a.class_id == 0x0300 || a.class_id == 0x0302);
}

auto bus_key(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  return std::make_tuple(static_cast<unsigned>(a.domain), a.bus, a.dev, a.func);
}

std::string bus_id(hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%01x", static_cast<unsigned>(a.domain),
                static_cast<unsigned>(a.bus), static_cast<unsigned>(a.dev),
                static_cast<unsigned>(a.func));
  return buf;
}

std::vector<hwloc_obj_t> find_gpu_pci_devices(hwloc_topology_t topo) {
  std::vector<hwloc_obj_t> found;
  auto add = [&](hwloc_obj_t pci) {
    if (std::find(found.begin(), found.end(), pci) == found.end()) found.push_back(pci);
  };
  // CUDA or NVML devices decide when present: they are the GPUs the driver can use.
  for (hwloc_obj_t os = hwloc_get_next_osdev(topo, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topo, os)) {
    if (!is_cuda_or_nvml(os->name)) continue;
    hwloc_obj_t p = os->parent;
    while (p != nullptr && p->type != HWLOC_OBJ_PCI_DEVICE) p = p->parent;
    if (p != nullptr) add(p);
  }
  if (found.empty()) {
    for (hwloc_obj_t pci = hwloc_get_next_pcidev(topo, nullptr); pci != nullptr;
         pci = hwloc_get_next_pcidev(topo, pci)) {
      if (is_nvidia_gpu_class(pci)) add(pci);
    }
  }
  std::sort(found.begin(), found.end(),
            [](hwloc_obj_t a, hwloc_obj_t b) { return bus_key(a) < bus_key(b); });
  return found;
}

// Whether this machine has an NVIDIA PCI device, from the vendor files the kernel keeps in sysfs:
// without one there is no GPU to find, and hwloc's I/O discovery, which reads every device's PCI
// config space (2.6 ms a device in this VM), is skipped (docs/measurements.md#synkruns-start).
bool has_nvidia_pci_device() {
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/bus/pci/devices", ec)) {
    std::ifstream vendor(dev.path() / "vendor");
    std::string id;
    if (vendor >> id && id == "0x10de") return true;
  }
  return false;
}

// hwloc plugins synkrun never uses are not loaded: dlopening them and their libraries took 5-8 ms
// of every synkrun and rank step here. hwloc reads HWLOC_PLUGINS_BLACKLIST when it first loads
// its plugins (the first topology of the process); the variable is restored right after, so
// mpirun and the ranks' programs never see it. libxml2's XML reader stays for a user's XML file.
class UnusedPluginsSkipped {
 public:
  explicit UnusedPluginsSkipped(bool keep_libxml) {
    if (const char* v = std::getenv(kVar)) old_ = v;
    std::string list = keep_libxml ? "hwloc_gl,hwloc_opencl" : "hwloc_gl,hwloc_opencl,hwloc_xml_libxml";
    if (old_ && !old_->empty()) list += "," + *old_;
    setenv(kVar, list.c_str(), 1);
  }
  ~UnusedPluginsSkipped() {
    if (old_) {
      setenv(kVar, old_->c_str(), 1);
    } else {
      unsetenv(kVar);
    }
  }
  UnusedPluginsSkipped(const UnusedPluginsSkipped&) = delete;
  UnusedPluginsSkipped& operator=(const UnusedPluginsSkipped&) = delete;

 private:
  static constexpr const char* kVar = "HWLOC_PLUGINS_BLACKLIST";
  std::optional<std::string> old_;
};

}  // namespace

Hwloc::Hwloc(const TopologySource& source) {
  hwloc_topology_t t = nullptr;
  const bool users_xml = source.kind == TopologySource::Kind::xml_file && !source.xml_of_this_machine;
  {
    const UnusedPluginsSkipped skipped(users_xml);
    if (hwloc_topology_init(&t) != 0) {
      throw std::runtime_error("hwloc_topology_init failed: " + std::string(std::strerror(errno)));
    }
  }
  topo_ = t;
  const bool io = source.kind != TopologySource::Kind::this_machine || has_nvidia_pci_device();
  hwloc_topology_set_io_types_filter(t, io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT
                                           : HWLOC_TYPE_FILTER_KEEP_NONE);
  // GPUs come from PCI, CUDA and NVML. OpenCL's discovery initializes every ICD (tens of ms
  // per rank) and GL's probes X displays; neither can tell us more.
  for (const char* skip : {"opencl", "gl"}) {
    hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip);
  }
  int rc = 0;
  if (source.kind == TopologySource::Kind::xml_file) {
    rc = hwloc_topology_set_xml(t, source.text.c_str());
    if (rc == 0 && source.xml_of_this_machine) {
      rc = hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM);
    }
  } else if (source.kind == TopologySource::Kind::synthetic) {
    rc = hwloc_topology_set_synthetic(t, source.text.c_str());
  } else if (source.within_binding) {
    rc = hwloc_topology_set_flags(
        t, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM | HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING);
  }
  if (rc == 0) rc = hwloc_topology_load(t);
  if (rc != 0) {
    const int err = errno;
    hwloc_topology_destroy(t);
    topo_ = nullptr;
    throw std::runtime_error("cannot load " + describe(source) + ": " +
                             (err ? std::strerror(err) : "hwloc failed"));
  }
  this_system_ = source.kind == TopologySource::Kind::this_machine || source.xml_of_this_machine;
}

std::string Hwloc::xml() const {
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(topo_, &buffer, &length, 0) != 0) {
    throw std::runtime_error("cannot export the topology as XML: " +
                             std::string(std::strerror(errno)));
  }
  // length counts the terminating NUL.
  std::string text(buffer, length > 0 ? static_cast<std::size_t>(length) - 1 : 0);
  hwloc_free_xmlbuffer(topo_, buffer);
  return text;
}

Hwloc::~Hwloc() {
  if (topo_ != nullptr) hwloc_topology_destroy(topo_);
}

std::vector<int> numa_of_cores(const NodeTopology& topo) {
  std::vector<int> owner(topo.cores.size(), -1);
  for (std::size_t i = 0; i < topo.cores.size(); ++i) {
    if (topo.cores[i].pus.empty()) continue;
    const unsigned pu = topo.cores[i].pus.front();
    for (std::size_t j = 0; j < topo.numas.size(); ++j) {
      const std::vector<unsigned>& pus = topo.numas[j].pus;
      if (!std::binary_search(pus.begin(), pus.end(), pu)) continue;
      if (owner[i] < 0 || pus.size() < topo.numas[static_cast<std::size_t>(owner[i])].pus.size()) {
        owner[i] = static_cast<int>(j);
      }
    }
  }
  return owner;
}

namespace {

// The NUMA node of a GPU's locality (`cpus`): the one nearest all its cores, where one is.
std::optional<unsigned> numa_of_locality(const NodeTopology& topo, const std::vector<int>& owner,
                                         const std::vector<unsigned>& cpus) {
  std::optional<int> only;
  for (std::size_t i = 0; i < topo.cores.size(); ++i) {
    const std::vector<unsigned>& pus = topo.cores[i].pus;
    if (pus.empty() || !std::binary_search(cpus.begin(), cpus.end(), pus.front())) continue;
    if (owner[i] < 0 || (only && *only != owner[i])) return std::nullopt;
    only = owner[i];
  }
  if (!only) return std::nullopt;
  return topo.numas[static_cast<std::size_t>(*only)].os_index;
}

}  // namespace

NodeTopology Hwloc::extract() const {
  hwloc_topology_t t = topo_;
  NodeTopology node;

  const int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  if (ncores > 0) {
    for (int i = 0; i < ncores; ++i) {
      hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
      Core c{bits(core->cpuset)};
      if (!c.pus.empty()) node.cores.push_back(std::move(c));
    }
  } else {
    // No core level (some synthetic or virtual topologies): every PU is a core.
    const int npus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    for (int i = 0; i < npus; ++i) {
      hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, static_cast<unsigned>(i));
      node.cores.push_back(Core{{pu->os_index}});
    }
  }

  const int nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t n = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    node.numas.push_back(NumaNode{n->os_index, bits(n->cpuset)});
  }

  int index = 0;
  for (hwloc_obj_t pci : find_gpu_pci_devices(t)) {
    Gpu g;
    g.index = index++;
    g.pci = bus_id(pci);
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, pci);
    if (anc == nullptr) anc = hwloc_get_root_obj(t);
    g.cpus = bits(anc->cpuset);
    node.gpus.push_back(std::move(g));
  }
  // A memory-only node counts in an ancestor's nodeset too: the cores decide.
  const std::vector<int> owner = numa_of_cores(node);
  for (Gpu& g : node.gpus) g.numa = numa_of_locality(node, owner, g.cpus);
  return node;
}

std::string Hwloc::bind_process(const std::vector<unsigned>& cpus,
                                const std::optional<unsigned>& numa) const {
  if (!this_system_) {
    throw std::runtime_error("cannot bind with a topology that does not describe this machine");
  }
  Bitmap set;
  for (unsigned c : cpus) hwloc_bitmap_set(set.b, c);
  if (hwloc_set_cpubind(topo_, set.b, HWLOC_CPUBIND_PROCESS) != 0) {
    throw std::runtime_error("hwloc_set_cpubind failed: " + std::string(std::strerror(errno)));
  }
  if (!numa) return "";
  Bitmap nodes;
  hwloc_bitmap_set(nodes.b, *numa);
  // Linux memory policy is per thread (hwloc cannot set it for a whole process), and it
  // survives exec: the rank step is single-threaded, so binding this thread binds PROGRAM.
  // Failing (containers without the permission, kernels without NUMA) costs locality only.
  // Without HWLOC_MEMBIND_STRICT, hwloc asks Linux for MPOL_PREFERRED: once that node is full,
  // allocations come from the others instead of failing.
  if (hwloc_set_membind(topo_, nodes.b, HWLOC_MEMBIND_BIND,
                        HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET) != 0) {
    return "memory binding to NUMA node " + std::to_string(*numa) +
           " not set: " + std::strerror(errno);
  }
  return "";
}

NodeTopology load_topology(const TopologySource& source) { return Hwloc(source).extract(); }

}  // namespace synk::launch
