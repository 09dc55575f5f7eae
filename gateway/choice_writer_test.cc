#include "gateway/choice_writer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llm/v1/model.pb.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

std::string Text(int32_t id) {
  return id == 9 ? std::string("\xE2\x82") : "t" + std::to_string(id);
}

ResponseInfo Info(bool stream) { return {"id", 1, "m", stream, false}; }

client::GenerateResult Result(std::string text, client::StopReason reason) {
  client::GenerateResult r;
  r.text = std::move(text);
  r.stop_reason = reason;
  return r;
}

TEST(ChoiceWriterTest, ChatLogprobsListEachTokenAndItsAlternatives) {
  auto w = NewChatWriter(Info(false), /*logprobs=*/true, Text);
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  const client::TopLogprob top[] = {{3, -0.25f}, {9, -2.0f}};
  w->Token(0, {"t3", 3, -0.25f, top, {}}, &events);
  w->Token(0, {"", 9, -2.0f, {}, {}}, &events);
  w->End(0, Result("t3", client::StopReason::kEos), &events);
  EXPECT_TRUE(events.empty());
  const json r = w->Response(4, 2);
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "t3");
  EXPECT_EQ(content[0]["logprob"], -0.25f);
  EXPECT_EQ(content[0]["bytes"], json::array({'t', '3'}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json::array({0xE2, 0x82}));
  EXPECT_TRUE(content[1]["top_logprobs"].empty());
  EXPECT_TRUE(r["choices"][0]["logprobs"]["refusal"].is_null());
}

TEST(ChoiceWriterTest, ChatWithoutLogprobsStreamsTextOnly) {
  auto w = NewChatWriter(Info(true), false, Text);
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  w->Token(0, {"", 9, -2.0f, {}, {}}, &events);  // held back: nothing to send
  ASSERT_EQ(events.size(), 1u);
  w->Token(0, {"Hi", 4, -1.0f, {}, {}}, &events);
  w->End(0, Result("Hi", client::StopReason::kMaxTokens), &events);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events[1]["choices"][0]["delta"]["content"], "Hi");
  EXPECT_TRUE(events[1]["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
}

// Echo with logprobs: the prompt's tokens first (the first with a null
// logprob, the others scored by the model), then the generated ones, with
// text offsets counting the tokens' bytes.
TEST(ChoiceWriterTest, CompletionEchoScoresThePromptThenTheAnswer) {
  const std::vector<int32_t> ids = {1, 22, 3};
  for (bool stream : {false, true}) {
    auto w = NewCompletionWriter(Info(stream), /*echo=*/true, /*logprobs=*/1, Text);
    ChoiceWriter::Events events;
    w->Begin(0, {ids, "t1t22t3"}, &events);
    EXPECT_TRUE(events.empty()) << "the echo waits for the prompt's scores";
    std::vector<v1::TokenLogprob> scores(2);
    scores[0].set_token(22);
    scores[0].set_logprob(-1.5f);
    scores[0].add_top_ids(7);
    scores[0].add_top_logprobs(-0.5f);
    scores[1].set_token(3);
    scores[1].set_logprob(-0.75f);
    scores[1].add_top_ids(3);
    scores[1].add_top_logprobs(-0.75f);
    const client::TopLogprob top[] = {{5, -0.125f}};
    w->Token(0, {"t5", 5, -0.125f, top, scores}, &events);
    w->End(0, Result("t5", client::StopReason::kMaxTokens), &events);
    json logprobs;
    std::string text;
    if (stream) {
      ASSERT_EQ(events.size(), 3u);
      EXPECT_EQ(events[0]["choices"][0]["text"], "t1t22t3");
      EXPECT_EQ(events[1]["choices"][0]["text"], "t5");
      EXPECT_EQ(events[2]["choices"][0]["finish_reason"], "length");
      logprobs = events[0]["choices"][0]["logprobs"];
      const json& more = events[1]["choices"][0]["logprobs"];
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
        for (const json& v : more[key]) logprobs[key].push_back(v);
      }
    } else {
      EXPECT_TRUE(events.empty());
      const json r = w->Response(3, 1);
      EXPECT_EQ(r["object"], "text_completion");
      EXPECT_EQ(r["choices"][0]["text"], "t1t22t3t5");
      logprobs = r["choices"][0]["logprobs"];
    }
    EXPECT_EQ(logprobs["tokens"], json::array({"t1", "t22", "t3", "t5"}));
    EXPECT_EQ(logprobs["token_logprobs"], json::parse("[null, -1.5, -0.75, -0.125]"));
    EXPECT_TRUE(logprobs["top_logprobs"][0].is_null());
    EXPECT_EQ(logprobs["top_logprobs"][1], json::parse(R"({"t7": -0.5})"));
    EXPECT_EQ(logprobs["top_logprobs"][3], json::parse(R"({"t5": -0.125})"));
    EXPECT_EQ(logprobs["text_offset"], json::parse("[0, 2, 5, 7]"));
  }
}

// Echo only (nothing generated: max_tokens 0): the scores come with End.
TEST(ChoiceWriterTest, CompletionEchoWithoutTokensTakesTheScoresFromTheResult) {
  const std::vector<int32_t> ids = {1, 2};
  auto w = NewCompletionWriter(Info(false), true, 0, Text);
  ChoiceWriter::Events events;
  w->Begin(0, {ids, "t1t2"}, &events);
  client::GenerateResult r = Result("", client::StopReason::kMaxTokens);
  r.prompt_logprobs.resize(1);
  r.prompt_logprobs[0].set_token(2);
  r.prompt_logprobs[0].set_logprob(-3.0f);
  w->End(0, r, &events);
  const json out = w->Response(2, 0);
  EXPECT_EQ(out["choices"][0]["text"], "t1t2");
  EXPECT_EQ(out["choices"][0]["logprobs"]["token_logprobs"], json::parse("[null, -3.0]"));
  EXPECT_EQ(out["choices"][0]["logprobs"]["top_logprobs"][1], json::object());
}

}  // namespace
}  // namespace llm::gateway
