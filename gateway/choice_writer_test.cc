#include "gateway/choice_writer.h"

#include <string>
#include <vector>

#include "gateway/logprobs_json.h"
#include "gtest/gtest.h"
#include "llm/v1/model.pb.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

// Token 9 is the first two bytes of "€" (E2 82 AC), token 100 a BOS.
std::string Text(int32_t id) {
  if (id == 9) return std::string("\xE2\x82");
  if (id == 100) return "<bos>";
  return "t" + std::to_string(id);
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
  // Not UTF-8 on its own: OpenAI's "bytes:" form, never U+FFFD.
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "bytes:\\xe2\\x82");
  EXPECT_EQ(content[1]["token"], "bytes:\\xe2\\x82");
  EXPECT_EQ(content[1]["bytes"], json::array({0xE2, 0x82}));
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
    // The prompt's token at its position too, when the alternatives lack it.
    EXPECT_EQ(logprobs["top_logprobs"][1], json::parse(R"({"t7": -0.5, "t22": -1.5})"));
    EXPECT_EQ(logprobs["top_logprobs"][2], json::parse(R"({"t3": -0.75})"));
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
  // logprobs 0: no alternatives, the token itself (OpenAI's logprobs + 1).
  EXPECT_EQ(out["choices"][0]["logprobs"]["top_logprobs"][1], json::parse(R"({"t2": -3.0})"));
}

// Completions: a generated token the sampler picked outside the most likely
// ones is listed among them too; a token that is not UTF-8 on its own is
// "bytes:..." in tokens and as a key, and its offset counts its bytes.
TEST(ChoiceWriterTest, CompletionLogprobsListTheTokenAndItsBytes) {
  auto w = NewCompletionWriter(Info(false), /*echo=*/false, /*logprobs=*/1, Text);
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  const client::TopLogprob top5[] = {{5, -0.5f}};
  w->Token(0, {"", 9, -3.0f, top5, {}}, &events);
  const client::TopLogprob top9[] = {{9, -0.25f}};
  w->Token(0, {"", 9, -0.25f, top9, {}}, &events);
  w->Token(0, {"t4", 4, -1.0f, top5, {}}, &events);
  w->End(0, Result("\xE2\x82\xE2\x82t4", client::StopReason::kMaxTokens), &events);
  const json lp = w->Response(1, 3)["choices"][0]["logprobs"];
  const std::string partial = "bytes:\\xe2\\x82";
  EXPECT_EQ(lp["tokens"], json::array({partial, partial, "t4"}));
  EXPECT_EQ(lp["top_logprobs"][0], json({{"t5", -0.5f}, {partial, -3.0f}}));
  EXPECT_EQ(lp["top_logprobs"][1], json({{partial, -0.25f}}));
  EXPECT_EQ(lp["top_logprobs"][2], json({{"t5", -0.5f}, {"t4", -1.0f}}));
  EXPECT_EQ(lp["text_offset"], json::parse("[0, 2, 4]"));
}

// Echo of a prompt that starts with a BOS the encoder added (Gemma 3): the
// text is the prompt as given, so the BOS is at offset 0 and takes no room,
// and every other offset indexes into the text.
TEST(ChoiceWriterTest, CompletionEchoOffsetsIndexIntoTheText) {
  const std::vector<int32_t> ids = {100, 1, 22};
  const std::string prompt = "t1t22";
  for (bool stream : {false, true}) {
    auto w = NewCompletionWriter(Info(stream), /*echo=*/true, /*logprobs=*/0, Text);
    ChoiceWriter::Events events;
    w->Begin(0, {ids, prompt}, &events);
    std::vector<v1::TokenLogprob> scores(2);
    scores[0].set_token(1);
    scores[0].set_logprob(-1.0f);
    scores[1].set_token(22);
    scores[1].set_logprob(-2.0f);
    w->Token(0, {"t5", 5, -0.5f, {}, scores}, &events);
    w->End(0, Result("t5", client::StopReason::kMaxTokens), &events);
    json offsets = json::array(), tokens = json::array();
    std::string text;
    if (stream) {
      for (const json& e : events) {
        text += e["choices"][0]["text"].get<std::string>();
        const json& l = e["choices"][0]["logprobs"];
        if (l.is_null()) continue;
        for (const json& v : l["text_offset"]) offsets.push_back(v);
        for (const json& v : l["tokens"]) tokens.push_back(v);
      }
    } else {
      const json c = w->Response(3, 1)["choices"][0];
      text = c["text"];
      offsets = c["logprobs"]["text_offset"];
      tokens = c["logprobs"]["tokens"];
    }
    EXPECT_EQ(text, "t1t22t5");
    EXPECT_EQ(tokens, json::array({"<bos>", "t1", "t22", "t5"}));
    ASSERT_EQ(offsets, json::parse("[0, 0, 2, 5]")) << "stream " << stream;
    for (size_t i = 1; i < tokens.size(); ++i) {
      EXPECT_EQ(text.substr(offsets[i].get<size_t>(), tokens[i].get<std::string>().size()),
                tokens[i].get<std::string>());
    }
  }
}

TEST(ChoiceWriterTest, TokenStringWritesBytesAsOpenAiDoes) {
  EXPECT_EQ(TokenString("t\xC3\xA9"), "t\xC3\xA9");  // valid UTF-8: as it is
  EXPECT_EQ(TokenString(""), "");
  EXPECT_EQ(TokenString("\xE4\xB8"), "bytes:\\xe4\\xb8");
  EXPECT_EQ(TokenString(" a\xF0"), "bytes: a\\xf0");
  EXPECT_EQ(TokenString("\\\n\xFF"), "bytes:\\\\\\n\\xff");
}

}  // namespace
}  // namespace llm::gateway

namespace llm::gateway {
namespace {

ToolParserFactory Hermes() {
  return [] {
    client::ToolParserOptions o;
    auto n = std::make_shared<int>(0);
    o.new_id = [n] { return "call_" + std::to_string((*n)++); };
    return std::make_unique<client::ToolCallParser>(client::ToolSyntax::kHermes, std::move(o));
  };
}

// The answer's text in pieces, as tokens (id i for piece i).
void Feed(ChoiceWriter& w, const std::vector<std::string>& pieces, ChoiceWriter::Events* events) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    w.Token(0, {pieces[i], static_cast<int32_t>(i), -0.5f, {}, {}}, events);
  }
}

const std::vector<std::string> kCallPieces = {
    "Let me check", ".\n", "<tool", "_call>\n{\"name\": \"get_weather\", ",
    "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"};

TEST(ChoiceWriterToolsTest, NonStreamedMessageHasToolCalls) {
  auto w = NewChatWriter(Info(false), false, Text, Hermes());
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  Feed(*w, kCallPieces, &events);
  w->End(0, Result("ignored", client::StopReason::kEos), &events);
  const json m = w->Response(3, 5)["choices"][0];
  EXPECT_EQ(m["finish_reason"], "tool_calls");
  EXPECT_EQ(m["message"]["content"], "Let me check.");
  ASSERT_EQ(m["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(m["message"]["tool_calls"][0],
            json({{"id", "call_0"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}));
}

TEST(ChoiceWriterToolsTest, NoCallIsAPlainAnswer) {
  auto w = NewChatWriter(Info(false), false, Text, Hermes());
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  Feed(*w, {"Paris", " is <b>big</b>."}, &events);
  w->End(0, Result("", client::StopReason::kMaxTokens), &events);
  const json m = w->Response(3, 2)["choices"][0];
  EXPECT_EQ(m["finish_reason"], "length");
  EXPECT_EQ(m["message"], json({{"role", "assistant"}, {"content", "Paris is <b>big</b>."}}));
  // A call cut off by max_tokens is content, never a call.
  auto cut = NewChatWriter(Info(false), false, Text, Hermes());
  cut->Begin(0, {}, &events);
  Feed(*cut, {"<tool_call>\n{\"name\": \"f\", \"argum"}, &events);
  cut->End(0, Result("", client::StopReason::kMaxTokens), &events);
  const json c = cut->Response(3, 2)["choices"][0];
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_EQ(c["message"]["content"], "<tool_call>\n{\"name\": \"f\", \"argum");
  EXPECT_FALSE(c["message"].contains("tool_calls"));
}

TEST(ChoiceWriterToolsTest, StreamedToolCallDeltas) {
  auto w = NewChatWriter(Info(true), /*logprobs=*/true, Text, Hermes());
  ChoiceWriter::Events events;
  w->Begin(0, {}, &events);
  Feed(*w, kCallPieces, &events);
  w->End(0, Result("", client::StopReason::kEos), &events);
  std::vector<json> deltas;
  size_t logprobs = 0;
  for (const json& e : events) {
    deltas.push_back(e["choices"][0]["delta"]);
    if (e["choices"][0]["logprobs"].is_object()) {
      logprobs += e["choices"][0]["logprobs"]["content"].size();
    }
  }
  ASSERT_EQ(deltas.size(), 6u) << json(deltas).dump();
  EXPECT_EQ(deltas[0], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(deltas[1], json({{"content", "Let me check"}}));
  EXPECT_EQ(deltas[2], json({{"content", "."}}));
  EXPECT_EQ(deltas[3]["tool_calls"][0],
            json({{"index", 0},
                  {"id", "call_0"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", ""}}}}));
  EXPECT_EQ(deltas[4]["tool_calls"][0],
            json({{"index", 0}, {"function", {{"arguments", "{\"city\":\"Paris\"}"}}}}));
  EXPECT_EQ(deltas[5], json::object());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(logprobs, kCallPieces.size());  // every token's logprob was sent
}

}  // namespace
}  // namespace llm::gateway
