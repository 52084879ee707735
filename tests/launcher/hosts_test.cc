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

TEST(Hosts, RanksOnThisHostFollowBySlotMapping) {
  const auto local = [](const std::string& n) { return n == "me"; };
  const auto h = list("a:2,me:3,b:4,me:1");
  EXPECT_EQ(ranks_on_this_host(h, std::nullopt, local), 4);  // every slot
  EXPECT_EQ(ranks_on_this_host(h, 2, local), 0);             // a takes both
  EXPECT_EQ(ranks_on_this_host(h, 4, local), 2);
  EXPECT_EQ(ranks_on_this_host(h, 9, local), 3);
  EXPECT_EQ(ranks_on_this_host(h, 10, local), 4);
}

}  // namespace
}  // namespace synk::launch
