// SYNK_CONTEXTS, the named device contexts: valid maps, and the exact error of each bad entry.
#include "core/contexts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "device/device_settings.h"
#include "synk/error.h"

namespace synk::detail {
namespace {

// The message of the InvalidArgument error parse_contexts throws, or a failure.
std::string error_of(const std::string& spec) {
  try {
    parse_contexts(spec);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << spec;
    const std::string what = e.what(), prefix = "synk InvalidArgument: ";
    EXPECT_EQ(what.substr(0, prefix.size()), prefix);
    return what.substr(0, prefix.size()) == prefix ? what.substr(prefix.size()) : what;
  }
  ADD_FAILURE() << "'" << spec << "' was accepted";
  return "";
}

TEST(Contexts, EmptyMapHasNoNames) {
  EXPECT_TRUE(parse_contexts("").empty());
  EXPECT_TRUE(parse_contexts("  ").empty());
  EXPECT_FALSE(parse_contexts("").device_of("dev0").has_value());
}

TEST(Contexts, MapsNamesToDevicesInOrder) {
  const ContextMap m = parse_contexts("dev0->cuda0;dev1->cuda1");
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries()[0].name, "dev0");
  EXPECT_EQ(m.entries()[0].device, 0);
  EXPECT_EQ(m.entries()[1].name, "dev1");
  EXPECT_EQ(m.entries()[1].device, 1);
  EXPECT_EQ(m.device_of("dev1"), 1);
  EXPECT_FALSE(m.device_of("dev2").has_value());
}

TEST(Contexts, SeveralNamesMayShareADevice) {
  const ContextMap m = parse_contexts("a->cuda0;b->cuda0;c->cuda1");
  EXPECT_EQ(m.device_of("a"), 0);
  EXPECT_EQ(m.device_of("b"), 0);
  EXPECT_EQ(m.device_of("c"), 1);
}

TEST(Contexts, SpacesAroundNamesAndDevicesAreIgnored) {
  const ContextMap m = parse_contexts(" main -> cuda3 ; aux->cuda12 ");
  EXPECT_EQ(m.device_of("main"), 3);
  EXPECT_EQ(m.device_of("aux"), 12);
}

TEST(Contexts, NamesMayContainOtherPunctuation) {
  EXPECT_EQ(parse_contexts("my-gpu.0->cuda0").device_of("my-gpu.0"), 0);
  EXPECT_EQ(parse_contexts("gpu_cuda->cuda0").device_of("gpu_cuda"),
            0);  // only a prefix is reserved
}

// Theano allows names that are not used, so one map serves ranks that see different devices:
// the device is checked where a name is used (DeviceShared, DeviceBuffer).
TEST(Contexts, NamesMayMapToDevicesThisRankDoesNotSee) {
  EXPECT_EQ(parse_contexts("x->cuda7").device_of("x"), 7);
}

TEST(Contexts, MappingLinesNameEachDeviceAsTheanoDoes) {
  const ContextMap m = parse_contexts("dev0->cuda0;dev1->cuda1;far->cuda5");
  const auto name = [](int d) { return "GPU model " + std::to_string(d); };
  EXPECT_EQ(context_mapping_lines(m, 2, name),
            (std::vector<std::string>{
                "Mapped name dev0 to device cuda0: GPU model 0",
                "Mapped name dev1 to device cuda1: GPU model 1",
                "Name far maps to cuda5, which this rank does not see (allowed while the name is "
                "not used)"}));
  EXPECT_TRUE(context_mapping_lines(parse_contexts(""), 2, name).empty());
}

TEST(Contexts, RejectsEntryWithoutArrow) {
  EXPECT_EQ(error_of("dev0->cuda0;dev1"), "SYNK_CONTEXTS: entry 'dev1' is not NAME->DEVICE");
  EXPECT_EQ(error_of("dev0=cuda0"), "SYNK_CONTEXTS: entry 'dev0=cuda0' is not NAME->DEVICE");
}

TEST(Contexts, RejectsEmptyEntries) {
  EXPECT_EQ(error_of("a->cuda0;;b->cuda1"),
            "SYNK_CONTEXTS: entry 2 is empty (entries are NAME->DEVICE, separated by ';')");
  EXPECT_EQ(error_of("a->cuda0;"),
            "SYNK_CONTEXTS: entry 2 is empty (entries are NAME->DEVICE, separated by ';')");
}

TEST(Contexts, RejectsEmptyName) {
  EXPECT_EQ(error_of("->cuda0"), "SYNK_CONTEXTS: entry '->cuda0' has an empty name");
}

TEST(Contexts, RejectsReservedNames) {
  EXPECT_EQ(error_of("cpu->cuda0"),
            "SYNK_CONTEXTS: entry 'cpu->cuda0' uses the reserved name 'cpu'");
  EXPECT_EQ(error_of("cuda1->cuda0"),
            "SYNK_CONTEXTS: entry 'cuda1->cuda0' has a name that begins with 'cuda' or 'opencl' "
            "(reserved for devices)");
  EXPECT_EQ(error_of("dev->cuda0;opencl0->cuda1"),
            "SYNK_CONTEXTS: entry 'opencl0->cuda1' has a name that begins with 'cuda' or "
            "'opencl' (reserved for devices)");
}

TEST(Contexts, RejectsRepeatedName) {
  EXPECT_EQ(error_of("a->cuda0;b->cuda1;a->cuda1"),
            "SYNK_CONTEXTS: entry 'a->cuda1' repeats the name 'a' (already mapped to cuda0)");
}

TEST(Contexts, RejectsDevicesThatAreNotCudaN) {
  for (const char* device :
       {"gpu0", "cuda", "cuda-1", "cuda+1", "cuda1x", "CUDA0", "cpu", "", "cuda1234567890"}) {
    const std::string entry = std::string("a->") + device;
    EXPECT_EQ(error_of(entry), "SYNK_CONTEXTS: entry '" + entry + "' maps to '" + device +
                                   "', not a device cudaN with N a non-negative integer");
  }
  // A second arrow ends up in the device, which is then not cudaN.
  EXPECT_EQ(error_of("a->b->cuda0"),
            "SYNK_CONTEXTS: entry 'a->b->cuda0' maps to 'b->cuda0', not a device cudaN with N a "
            "non-negative integer");
}

TEST(Contexts, RefusesOpenClDevicesSayingSynkHasNoOpenCl) {
  for (const char* device : {"opencl0:0", "opencl1:2", "opencl0"}) {
    const std::string entry = std::string("dev0->") + device;
    EXPECT_EQ(error_of(entry), "SYNK_CONTEXTS: entry '" + entry + "' maps to the OpenCL device '" +
                                   device + "': synk has no OpenCL; map names to CUDA devices cudaN");
  }
}

// lookup_context, behind synk::device_for: a known name gives its device, anything else an
// InvalidArgument that names what the map has.
std::string lookup_error(const ContextMap& map, const std::string& name) {
  try {
    lookup_context(map, name, "device_for");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << name;
    return e.what();
  }
  ADD_FAILURE() << "'" << name << "' was found";
  return "";
}

TEST(Contexts, LookupGivesTheDeviceOfAName) {
  const ContextMap m = parse_contexts("main->cuda0;aux->cuda1;spare->cuda1");
  EXPECT_EQ(lookup_context(m, "main", "device_for"), 0);
  EXPECT_EQ(lookup_context(m, "aux", "device_for"), 1);
  EXPECT_EQ(lookup_context(m, "spare", "device_for"), 1);
}

TEST(Contexts, LookupOfAnUnknownNameListsTheKnownOnes) {
  const ContextMap m = parse_contexts("main->cuda0;aux->cuda1");
  EXPECT_EQ(lookup_error(m, "dev2"),
            "synk InvalidArgument: device_for: no context named 'dev2' in SYNK_CONTEXTS (it names "
            "main, aux)");
  // Names are exact: no trimming or case folding at lookup.
  EXPECT_EQ(lookup_error(m, "Main"),
            "synk InvalidArgument: device_for: no context named 'Main' in SYNK_CONTEXTS (it names "
            "main, aux)");
}

TEST(Contexts, LookupWithoutAMapSaysTheVariableIsNotSet) {
  EXPECT_EQ(lookup_error(ContextMap{}, "dev0"),
            "synk InvalidArgument: device_for: no context named 'dev0': SYNK_CONTEXTS is not set "
            "(e.g. SYNK_CONTEXTS=\"dev0->cuda0\")");
}

TEST(Contexts, LookupRejectsEmptyAndCpu) {
  const ContextMap m = parse_contexts("main->cuda0");
  EXPECT_EQ(lookup_error(m, ""), "synk InvalidArgument: device_for: the context name is empty");
  EXPECT_EQ(lookup_error(m, "  "), "synk InvalidArgument: device_for: the context name is empty");
  EXPECT_EQ(lookup_error(m, "cpu"),
            "synk InvalidArgument: device_for: 'cpu' names the host, not a device context "
            "(SYNK_CONTEXTS maps names to devices cudaN)");
}

// The variable is read with the device settings (device/device_settings.h), its syntax checked
// there; SYNK_LOCAL_RANK with the core's (core/env.h).
EnvGetter getter(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
DeviceSettings parse(const std::map<std::string, std::string>& vars) {
  return DeviceSettings::parse(getter(vars));
}

TEST(Contexts, SettingsKeepTheMap) {
  EXPECT_EQ(parse({}).contexts, "");
  EXPECT_EQ(parse({{"SYNK_CONTEXTS", "dev0->cuda0;dev1->cuda1"}}).contexts,
            "dev0->cuda0;dev1->cuda1");
}

TEST(Contexts, SettingsRejectABadMap) {
  try {
    parse({{"SYNK_CONTEXTS", "cpu->cuda0"}});
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_STREQ(
        e.what(),
        "synk InvalidArgument: SYNK_CONTEXTS: entry 'cpu->cuda0' uses the reserved name 'cpu'");
  }
}

TEST(Contexts, SettingsReadTheLaunchersGpuAndLocalRank) {
  EXPECT_EQ(parse({}).gpu, "");
  EXPECT_EQ(Settings::parse(getter({})).launcher_local_rank, -1);
  const std::map<std::string, std::string> vars{{"SYNK_GPU", "2,3"}, {"SYNK_LOCAL_RANK", "1"}};
  EXPECT_EQ(parse(vars).gpu, "2,3");
  EXPECT_EQ(Settings::parse(getter(vars)).launcher_local_rank, 1);
  EXPECT_THROW(Settings::parse(getter({{"SYNK_LOCAL_RANK", "x"}})), Error);
}

}  // namespace
}  // namespace synk::detail
