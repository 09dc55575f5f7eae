#include "gateway/conversations.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

TEST(ConversationsTest, IdsAreBoundedAndPlain) {
  EXPECT_TRUE(CheckConversationId("user-42:chat_7.a").ok());
  EXPECT_FALSE(CheckConversationId("").ok());
  EXPECT_FALSE(CheckConversationId(std::string(129, 'a')).ok());
  EXPECT_FALSE(CheckConversationId("a b").ok());
  EXPECT_FALSE(CheckConversationId("a\nb").ok());
}

bool InSessionIdAlphabet(const std::string& name) {
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Names are fixed (golden values: every gateway process and version must
// agree), distinct for distinct ids, in the model server's alphabet and
// within its 200 bytes.
TEST(ConversationsTest, SessionNamesAreFixedDistinctAndValid) {
  EXPECT_EQ(ConversationSessionName("chat_7.a"), "conv-chat_7.a");
  EXPECT_EQ(ConversationSessionName("user-42:chat"), "convh-b36a217976682c1d80d42adae179cfa1");
  std::set<std::string> names;
  for (const std::string id : {"a", "a:", "a.b", "a_b", "a:b", "b:a", "conv-a", "h"}) {
    const std::string name = ConversationSessionName(id);
    EXPECT_TRUE(InSessionIdAlphabet(name)) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 8u);
  const std::string longest = ConversationSessionName(std::string(128, 'x'));
  EXPECT_LE(longest.size(), 200u);
  EXPECT_LE(ConversationSessionName(std::string(128, ':')).size(), 200u);
}

TEST(ConversationsTest, ASecondRequestWhileOneRunsIsRefused) {
  RunningConversations running;
  {
    absl::StatusOr<RunningConversations::Claim> a = running.Start("chat-1");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(running.Start("chat-1").status().code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(running.Start("chat-2").ok());
  }
  EXPECT_TRUE(running.Start("chat-1").ok());
}

}  // namespace
}  // namespace llm::gateway
