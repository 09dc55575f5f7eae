#include "gateway/conversations.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

TEST(ConversationsTest, SessionComesBackAndASecondRequestIsRefused) {
  Conversations c(8, absl::Minutes(10));
  {
    absl::StatusOr<Conversations::Lease> a = c.Take("chat-1");
    ASSERT_TRUE(a.ok());
    EXPECT_FALSE(a->known());
    a->session().id = "m.1";
    a->session().tokens = {1, 2, 3};
    EXPECT_EQ(c.Take("chat-1").status().code(), absl::StatusCode::kAborted);
    EXPECT_TRUE(c.Take("chat-2").ok());
  }
  absl::StatusOr<Conversations::Lease> again = c.Take("chat-1");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->known());
  EXPECT_EQ(again->session().id, "m.1");
  EXPECT_EQ(again->session().tokens, (std::vector<int32_t>{1, 2, 3}));
}

TEST(ConversationsTest, LeastRecentlyUsedIdleOneIsDroppedForRelease) {
  Conversations c(2, absl::Minutes(10));
  for (const char* id : {"a", "b"}) {
    auto l = c.Take(id);
    ASSERT_TRUE(l.ok());
    l->session().id = std::string("m.") + id;
  }
  { ASSERT_TRUE(c.Take("a").ok()); }  // "a" is now the most recent
  auto busy = c.Take("c");            // a third: "b" goes
  ASSERT_TRUE(busy.ok());
  EXPECT_EQ(c.size(), 2);
  const std::vector<client::Session> dropped = c.TakeDropped();
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].id, "m.b");
  EXPECT_TRUE(c.TakeDropped().empty());
}

TEST(ConversationsTest, IdleOnesExpire) {
  Conversations c(8, absl::ZeroDuration());
  {
    auto l = c.Take("a");
    l->session().id = "m.a";
  }
  absl::SleepFor(absl::Milliseconds(2));
  auto l = c.Take("a");
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->known());
  EXPECT_TRUE(l->session().id.empty());
  ASSERT_EQ(c.TakeDropped().size(), 1u);
}

TEST(ConversationsTest, IdsAreBoundedAndPlain) {
  EXPECT_TRUE(CheckConversationId("user-42:chat_7.a").ok());
  EXPECT_FALSE(CheckConversationId("").ok());
  EXPECT_FALSE(CheckConversationId(std::string(129, 'a')).ok());
  EXPECT_FALSE(CheckConversationId("a b").ok());
  EXPECT_FALSE(CheckConversationId("a\nb").ok());
}

}  // namespace
}  // namespace llm::gateway
