// synkrun's reading of host lists and hostfiles: slots, names an rsh agent would take for its
// options, and the ranks mpirun's by-slot mapping puts on this host.
#include "hosts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace synk::launch {
namespace {

std::vector<HostSlots> list(const std::string& text) {
  std::vector<HostSlots> out;
  const std::string err = parse_host_list(text, out);
  EXPECT_EQ(err, "") << text;
  return out;
}

std::string list_error(const std::string& text) {
  std::vector<HostSlots> out;
  return parse_host_list(text, out);
}

TEST(Hosts, ListGivesNamesAndSlots) {
  const auto h = list("a:2,b,user@c:16");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "a");
  EXPECT_EQ(h[0].slots, 2);
  EXPECT_EQ(h[1].name, "b");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(h[2].name, "user@c");
  EXPECT_EQ(h[2].slots, 16);
}

TEST(Hosts, ListRefusesBadSlotsAndOptionLikeNames) {
  EXPECT_NE(list_error("a:0"), "");
  EXPECT_NE(list_error("a:x"), "");
  EXPECT_NE(list_error("a,,b"), "");
  EXPECT_NE(list_error(":2"), "");
  EXPECT_EQ(list_error("-oProxyCommand=touch /tmp/x"),
            "-H: host \"-oProxyCommand=touch /tmp/x\" starts with \"-\", which ssh would read "
            "as an option");
  EXPECT_EQ(list_error("node 1"), "-H: host \"node 1\" contains a blank or a control character");
  EXPECT_EQ(list_error("-oProxyCommand=x"),
            "-H: host \"-oProxyCommand=x\" starts with \"-\", which ssh would read as an option");
  EXPECT_NE(list_error("user@-oProxyCommand=x"), "");
  EXPECT_NE(list_error("user@:2"), "");
  EXPECT_NE(list_error("a\tb"), "");
}

TEST(Hosts, HostfileLinesSlotsAndComments) {
  std::vector<HostSlots> h;
  ASSERT_EQ(parse_hostfile("# the nodes\n"
                           "n1 slots=4 max_slots=8\n"
                           "\n"
                           "  n2   # no slots: the default\n"
                           "n3 slots = 2\n"
                           "n4 count=3\n",
                           7, h),
            "");
  ASSERT_EQ(h.size(), 4u);
  EXPECT_EQ(h[0].name, "n1");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].name, "n2");
  EXPECT_EQ(h[1].slots, 7);
  EXPECT_EQ(h[2].slots, 2);
  EXPECT_EQ(h[3].slots, 3);
}

TEST(Hosts, HostfileErrorsNameTheLine) {
  std::vector<HostSlots> h;
  EXPECT_EQ(parse_hostfile("n1\n-oProxyCommand=x slots=1\n", 1, h),
            "line 2: host \"-oProxyCommand=x\" starts with \"-\", which ssh would read as an "
            "option");
  EXPECT_EQ(parse_hostfile("n1 slots=0\n", 1, h),
            "line 1: \"slots=0\" is not slots=N (N a whole number from 1 to 1048576)");
  EXPECT_NE(parse_hostfile("n1 slots=\n", 1, h), "");
  // mpirun answered a host listed twice beside slots= with an "internal error".
  EXPECT_EQ(parse_hostfile("a slots=1\nb slots=1\na slots=1\n", 1, h),
            "line 3: a is listed again (first on line 1); with slots= list each host once, with "
            "all its slots (a slots=N)");
  EXPECT_NE(parse_hostfile("a\nb\na slots=2\n", 1, h), "");
  EXPECT_EQ(parse_hostfile("a\nb\na\n", 1, h), "");  // a line per slot, as Open MPI allows
}

// Lines synkrun read and mpirun did not: a Windows line end, slots given twice, -H's form. Each
// passed synkrun's checks and --dry-run, then mpirun's "parse error" or ssh to "a:2" ended the
// job, which synkrun blamed on the network.
TEST(Hosts, HostfileLinesMpirunCannotRead) {
  std::vector<HostSlots> h;
  EXPECT_EQ(parse_hostfile("a slots=2\r\n", 1, h),
            "line 1: a carriage return (a file written on Windows): mpirun cannot read it; "
            "convert the file (dos2unix)");
  EXPECT_EQ(parse_hostfile("a slots=2 slots=3\n", 1, h),
            "line 1: slots are given twice (\"slots=3\"); give them once");
  EXPECT_EQ(parse_hostfile("n1\nnode:4\n", 1, h),
            "line 2: \"node:4\" is -H's form; a hostfile line says \"node slots=4\"");
  EXPECT_EQ(parse_hostfile("::1 slots=2\nfe80::1\n", 1, h), "");  // IPv6 addresses
  EXPECT_EQ(parse_hostfile("a slots=2 max_slots=4\n", 1, h), "");
  // mpirun's "internal error" for a misspelt setting, and its refusal of max_slots < slots.
  EXPECT_EQ(parse_hostfile("a slot=2\n", 1, h),
            "line 1: \"slot=2\" is not a hostfile setting (slots=2 gives the slots)");
  EXPECT_EQ(parse_hostfile("a slots=2 slotz=3\n", 1, h),
            "line 1: \"slotz=3\" is not a hostfile setting mpirun takes (slots=N, max_slots=N, "
            "...)");
  EXPECT_EQ(parse_hostfile("a slots=2 max_slots=1\n", 1, h),
            "line 1: \"max_slots=1\" is below slots=2 (mpirun refuses the line)");
  EXPECT_EQ(parse_hostfile("a slots = 2 max-slots = 2 username=me cpu_set=0-3\n", 1, h), "");
  // Given before slots, max_slots is raised to them (mpirun reads the line in order); and a
  // comment after // is mpirun's too.
  EXPECT_EQ(parse_hostfile("a max_slots=2 slots=4 // x=y\n// b=c\n", 1, h), "");
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].slots, 4);
}

// This host under two names, each with slots=: mpirun's "multiple definitions" internal error.
TEST(Hosts, ThisHostTwiceWithSlots) {
  const auto local = [](const std::string& n) { return n == "vm" || n == "127.0.0.1"; };
  EXPECT_EQ(local_names_error({{"vm", 1}, {"b", 1}, {"127.0.0.1", 1}}, local),
            "vm and 127.0.0.1 are both this host, each with slots=: mpirun refuses a host "
            "defined twice; list it once, with all its slots");
  EXPECT_EQ(local_names_error({{"vm", 1}, {"127.0.0.1", 0}}, local), "");  // no slots=: a line each
  EXPECT_EQ(local_names_error({{"vm", 2}, {"b", 1}}, local), "");
}

TEST(Hosts, ThisHostByItsNames) {
  EXPECT_TRUE(is_this_host("localhost"));
  EXPECT_TRUE(is_this_host("LOCALHOST"));
  EXPECT_TRUE(is_this_host("127.0.0.1"));
  EXPECT_TRUE(is_this_host("me@localhost"));
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(is_this_host(name));
  EXPECT_FALSE(is_this_host("no-such-host.invalid"));
}

// Open MPI fills its own node first (-H hostB:2,hostA:1,hostC:1 run on hostA put rank 0 on
// hostA, in the multi-host test bed), then the others as listed; a host listed twice is one.
TEST(Hosts, MappingOrderPutsMpirunsHostFirst) {
  const auto local = [](const std::string& n) { return n == "me"; };
  EXPECT_EQ(host_list_text(mapping_order(list("a:2,me:3,b:4,me:1,a:1"), local)),
            "me:4,a:3,b:4");
}

// mpirun counts every name of its own host as one node: -H hostA:1,10.213.7.11:1,hostB:2 run on
// hostA (10.213.7.11 in the test bed) is 2 nodes of 2 ranks, and hostB's ranks are node 1.
TEST(Hosts, MappingOrderFoldsEveryNameOfThisHostIntoOneNode) {
  const auto local = [](const std::string& n) { return n == "hostA" || n == "10.213.7.11"; };
  const auto ordered = mapping_order(list("hostA:1,10.213.7.11:1,hostB:2"), local);
  EXPECT_EQ(host_list_text(ordered), "hostA:2,hostB:2");
  EXPECT_EQ(node_of_rank(ordered, 2, 4, 2), 1);
  EXPECT_EQ(host_list_text(mapping_order(list("b:1,10.213.7.11:2,b:1,hostA:1"), local)),
            "10.213.7.11:3,b:2");
  EXPECT_EQ(ranks_on_this_host(list("hostA:1,b:3,10.213.7.11:2"), 4, local), 3);
}

TEST(Hosts, RanksOnThisHostFollowBySlotMapping) {
  const auto local = [](const std::string& n) { return n == "me"; };
  const auto h = list("a:2,me:3,b:4,me:1");
  EXPECT_EQ(ranks_on_this_host(h, std::nullopt, local), 4);  // every slot
  EXPECT_EQ(ranks_on_this_host(h, 2, local), 2);             // this host's slots come first
  EXPECT_EQ(ranks_on_this_host(h, 9, local), 4);
  const auto elsewhere = [](const std::string&) { return false; };
  EXPECT_EQ(ranks_on_this_host(h, 9, elsewhere), 0);  // mpirun on a host without ranks
}

TEST(Hosts, NodeOfRankNumbersTheNodesThatGetRanks) {
  const auto ordered = list("me:4,a:2,b:4,c:1");
  // 7 ranks: me 0-3, a 4-5, b 6; c gets none.
  EXPECT_EQ(node_of_rank(ordered, 0, 7, 4), 0);
  EXPECT_EQ(node_of_rank(ordered, 5, 7, 2), 1);
  EXPECT_EQ(node_of_rank(ordered, 6, 7, 1), 2);
  EXPECT_EQ(node_of_rank(ordered, 6, 7, 4), std::nullopt);  // not mapped so
  EXPECT_EQ(node_of_rank(ordered, 7, 7, 1), std::nullopt);
  // Uneven hosts of the test bed's hostfile: 1, 2 and 1 slots.
  const auto bed = list("hostA:1,hostB:2,hostC:1");
  EXPECT_EQ(node_of_rank(bed, 2, 4, 2), 1);
  EXPECT_EQ(node_of_rank(bed, 3, 4, 1), 2);
}

// The host synkrun names for a failing rank where mpirun named none.
TEST(Hosts, HostOfRankFollowsBySlotMapping) {
  const auto ordered = list("hostA:1,hostB:2,hostC:1");
  EXPECT_EQ(host_of_rank(ordered, 0, 4), "hostA");
  EXPECT_EQ(host_of_rank(ordered, 2, 4), "hostB");
  EXPECT_EQ(host_of_rank(ordered, 3, 4), "hostC");
  EXPECT_EQ(host_of_rank(ordered, 3, 3), "");  // -np 3: hostC gets no rank
  EXPECT_EQ(host_of_rank(ordered, -1, 4), "");
}

// The dry run's note of where mpirun puts the ranks: each host's slots filled in order.
TEST(Hosts, RanksByHostFillsTheSlotsInOrder) {
  const auto ordered = list("hostA:1,hostB:2,hostC:1");
  EXPECT_EQ(ranks_by_host(ordered, 4), "hostA rank 0, hostB ranks 1-2, hostC rank 3");
  EXPECT_EQ(ranks_by_host(ordered, 2), "hostA rank 0, hostB rank 1");
  EXPECT_EQ(ranks_by_host(list("hostA:2,hostB:2"), 4), "hostA ranks 0-1, hostB ranks 2-3");
}

// The hosts none of whose ranks gave up waiting (a host cut off, whose ranks' lines never came).
TEST(Hosts, UnheardHostsAreThoseWithoutARankThatSpoke) {
  const std::vector<HostSlots> ordered = list("hostA:2,hostB:2,hostC:1");
  EXPECT_EQ(unheard_hosts(ordered, 5, {1}), "hostB (ranks 2-3), hostC (rank 4)");
  EXPECT_EQ(unheard_hosts(ordered, 5, {0, 3}), "hostC (rank 4)");
  EXPECT_EQ(unheard_hosts(ordered, 5, {1, 2, 4}), "");
  EXPECT_EQ(unheard_hosts(ordered, 3, {0}), "hostB (rank 2)");  // hostC gets no rank
}

}  // namespace
}  // namespace synk::launch
