#include "client/generate/conversation.h"

#include <string>
#include <vector>

#include "client/generate/fake_ports.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using testing::FakeModel;

// Letters 'a'..'n' are ids 0..13, and "ab" is id 14: Encode merges every
// "ab", so the ids [0, 1] are text "ab" not as the tokenizer encodes it.
class LettersTokenizer : public testing::FakeTokenizer {
 public:
  LettersTokenizer() : FakeTokenizer(&log_) {
    for (int i = 0; i < 14; ++i) bytes[i] = std::string(1, static_cast<char>('a' + i));
    bytes[14] = "ab";
  }
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions&) override {
    ++encodes;
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.substr(i, 2) == "ab") {
        ids.push_back(14);
        ++i;
      } else {
        ids.push_back(text[i] - 'a');
      }
    }
    return ids;
  }
  int encodes = 0;

 private:
  std::vector<std::string> log_;
};

class ConversationTest : public ::testing::Test {
 protected:
  // A session on the fake model holding `tokens`.
  Session Holding(std::vector<int32_t> tokens) {
    Session s;
    const std::atomic<bool> never{false};
    int32_t rebuilds = 0;
    EXPECT_TRUE(model_.Prefill(s, tokens, StepOptions(), never, &rebuilds).ok());
    return s;
  }
  Turn Reuse(std::string_view rendered, Session& s) {
    absl::StatusOr<Turn> turn = ReuseSession(tokenizer_, model_, rendered, {}, s);
    EXPECT_TRUE(turn.ok()) << turn.status();
    return turn.ok() ? *turn : Turn();
  }

  std::vector<std::string> log_;
  LettersTokenizer tokenizer_;
  FakeModel model_{&log_};
};

TEST_F(ConversationTest, ANewConversationIsEncodedWhole) {
  Session s;
  const Turn t = Reuse("abcd", s);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{14, 2, 3}));
  EXPECT_EQ(t.held, 0u);
  EXPECT_EQ(t.dropped, 0u);
  EXPECT_EQ(model_.truncates, 0);
}

// The session's text begins the rendering: its tokens stay as the model
// generated them (not as the tokenizer would encode "ab"), and only the
// rest is encoded.
TEST_F(ConversationTest, AConversationThatGoesOnKeepsTheSessionsOwnTokens) {
  Session s = Holding({0, 1, 2});  // "abc", the "ab" not merged
  const Turn t = Reuse("abcde", s);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.held, 3u);
  EXPECT_EQ(t.dropped, 0u);
  EXPECT_EQ(model_.truncates, 0);  // no call
}

// Pending tokens (sampled, not fed) are part of the session's text, and
// the turn prefills them.
TEST_F(ConversationTest, PendingTokensArePrefilledByTheTurn) {
  Session s = Holding({2, 3});
  s.pending = {4};
  const Turn t = Reuse("cdef", s);
  EXPECT_EQ(t.ids, (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_EQ(t.held, 2u);
  EXPECT_TRUE(s.pending.empty());
}

// A rewritten history: the longest common token prefix is kept, the rest of
// the session dropped.
TEST_F(ConversationTest, ARewrittenTurnIsCutBackToWhereTheTokensAgree) {
  Session s = Holding({2, 3, 4, 5});  // "cdef"
  const Turn t = Reuse("cdxg", s);
  EXPECT_EQ(t.held, 2u);
  EXPECT_EQ(t.dropped, 2u);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(model_.sessions.at(s.id), (std::vector<int32_t>{2, 3}));
}

// Nothing new: one token is left to prefill, for the logits.
TEST_F(ConversationTest, TheSameConversationLeavesOneTokenToPrefill) {
  Session s = Holding({2, 3, 4});
  const Turn t = Reuse("cde", s);
  EXPECT_EQ(t.held, 2u);
  EXPECT_EQ(t.dropped, 1u);
  EXPECT_EQ(model_.sessions.at(s.id), (std::vector<int32_t>{2, 3}));
}

TEST_F(ConversationTest, AnUnsyncedSessionIsTruncatedToWhatAgrees) {
  Session s = Holding({2, 3});
  s.unsynced = true;
  const Turn t = Reuse("cdef", s);
  EXPECT_EQ(t.held, 2u);
  EXPECT_FALSE(s.unsynced);
  EXPECT_EQ(model_.truncates, 1);
}

TEST_F(ConversationTest, AFailedTruncationStartsANewSession) {
  Session s = Holding({2, 3, 4});
  model_.truncate_error = absl::DeadlineExceededError("slow");
  const Turn t = Reuse("cx", s);
  EXPECT_EQ(t.held, 0u);
  EXPECT_EQ(t.dropped, 3u);
  EXPECT_TRUE(s.id.empty());
  EXPECT_TRUE(s.tokens.empty());
  EXPECT_EQ(model_.releases, 1);
}

TEST_F(ConversationTest, AnEmptyRenderingIsAnError) {
  Session s;
  EXPECT_EQ(ReuseSession(tokenizer_, model_, "", {}, s).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace llm::client
