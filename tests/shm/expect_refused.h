// For the in-process shm tests: a call that must fail with a synk::Error of a given code (if
// one is given) whose message holds a given text; a call that returns is a failure, named.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "synk/error.h"

namespace synk::shm {

template <class Fn>
void expect_refused(Fn&& fn, std::optional<ErrorCode> code, const std::string& text,
                    const std::string& if_not) {
  try {
    fn();
    ADD_FAILURE() << if_not;
  } catch (const Error& e) {
    if (code) {
      EXPECT_EQ(e.code(), *code) << e.what();
    }
    EXPECT_THAT(e.what(), ::testing::HasSubstr(text));
  }
}

}  // namespace synk::shm
