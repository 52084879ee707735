// synk::Error carries its code and says it in the message.
#include <gtest/gtest.h>

#include <string>

#include "synk/error.h"

namespace synk {
namespace {

TEST(Error, CodeAndMessage) {
  const Error e(ErrorCode::Timeout, "all_reduce: rank 1 did not arrive within 5 s");
  EXPECT_EQ(e.code(), ErrorCode::Timeout);
  EXPECT_EQ(std::string(e.what()), "synk Timeout: all_reduce: rank 1 did not arrive within 5 s");
  // message() is what was given, its own ": " kept, for passing the error on.
  EXPECT_EQ(e.message(), "all_reduce: rank 1 did not arrive within 5 s");
  EXPECT_EQ(Error(ErrorCode::InvalidArgument, "").message(), "");
  EXPECT_EQ(Error(ErrorCode::Remote, "synk Backend: x").message(), "synk Backend: x");
  const std::runtime_error& base = e;  // catchable as a standard exception
  EXPECT_NE(std::string(base.what()).find("rank 1"), std::string::npos);
}

TEST(Error, EveryCodeHasAName) {
  for (ErrorCode c : {ErrorCode::InvalidArgument, ErrorCode::InvalidUsage, ErrorCode::NotSupported,
                      ErrorCode::System, ErrorCode::Backend, ErrorCode::Timeout, ErrorCode::Remote}) {
    EXPECT_STRNE(to_string(c), "Unknown");
  }
}

}  // namespace
}  // namespace synk
