// A test fixture with a fresh directory tree under /tmp (a fake /sys/fs/cgroup, say), removed
// after each test.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace synk::testing {

class TempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/synk_tree_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  // Writes `text` to root_ + rel, creating the directories on the way.
  void write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + rel).parent_path());
    std::ofstream(root_ + rel) << text;
  }
  std::string root_;
};

}  // namespace synk::testing
