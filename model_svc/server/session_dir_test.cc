// session_dir.h's file names: confined to the directory, the id recoverable.
// (Saving and restoring through a real server: tests/session_snapshot_test.)
#include "model_svc/server/session_dir.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llm {
namespace {

TEST(SessionDirTest, AFileNameIsTheIdAndTheSuffix) {
  absl::StatusOr<std::string> name = SessionFileName("pod-1.19a2b.0123456789abcdef");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "pod-1.19a2b.0123456789abcdef.kvsnap");
  absl::StatusOr<std::string> id = SessionIdOfFile(*name);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "pod-1.19a2b.0123456789abcdef");
}

TEST(SessionDirTest, IdsThatWouldLeaveTheDirectoryOrHideAreRefused) {
  for (const std::string& bad :
       std::vector<std::string>{"", "../etc/passwd", "a/b", "..", ".hidden", "a b", "a\\b",
                                std::string(201, 'a'), std::string("a\0b", 3)}) {
    EXPECT_EQ(SessionFileName(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(SessionFileName(std::string(200, 'a')).ok());
}

TEST(SessionDirTest, OnlyNamesSessionFileNameMakesHoldAnId) {
  for (const char* bad :
       {".kvsnap", "x.snap", ".x.kvsnap", "..kvsnap", "a b.kvsnap", ".x.kvsnap.tmp"}) {
    EXPECT_EQ(SessionIdOfFile(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace llm
