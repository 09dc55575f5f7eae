#include "gateway/choice_writer.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/logprobs_json.h"
#include "gateway/openai_api.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

// A generated token's score: its text, logprob and alternatives.
TokenScore ScoreOf(const client::TokenEvent& e, const TokenText& text) {
  TokenScore s{text(e.token), e.logprob, {}};
  for (const client::TopLogprob& t : e.top) s.top.emplace_back(text(t.token), t.logprob);
  return s;
}

class ChatWriter final : public ChoiceWriter {
 public:
  ChatWriter(ResponseInfo info, bool logprobs, TokenText text, ToolParserFactory tools)
      : info_(std::move(info)),
        logprobs_(logprobs),
        text_(std::move(text)),
        tools_(std::move(tools)) {}

  void Begin(int index, const ChoicePrompt&, Events* events) override {
    entries_ = json::array();
    pending_ = json::array();
    if (tools_) parser_ = tools_();
    if (info_.stream) {
      events->push_back(Chunk(index, {{"role", "assistant"}, {"content", ""}}, "", nullptr));
    }
  }

  void Token(int index, const client::TokenEvent& e, Events* events) override {
    json entry;
    if (logprobs_ && e.token >= 0) entry = ChatLogprobEntry(ScoreOf(e, text_));
    if (!info_.stream) {
      if (!entry.is_null()) entries_.push_back(std::move(entry));
      if (parser_ != nullptr) {
        parser_->Feed(e.text, &tool_events_);
        tool_events_.clear();  // the whole answer is read from the parser at the end
      }
      return;
    }
    if (parser_ != nullptr) {
      if (!entry.is_null()) pending_.push_back(std::move(entry));
      tool_events_.clear();
      parser_->Feed(e.text, &tool_events_);
      Send(index, events);
      return;
    }
    // A token whose text is held back, without logprobs, sends nothing
    // (the gateway writes an SSE comment to notice a client gone).
    if (e.text.empty() && entry.is_null()) return;
    events->push_back(Chunk(index, {{"content", std::string(e.text)}}, "",
                            entry.is_null() ? json() : ChatLogprobs(json::array({entry}))));
  }

  void End(int index, const client::GenerateResult& r, Events* events) override {
    json calls;
    if (parser_ != nullptr) {
      tool_events_.clear();
      parser_->Finish(&tool_events_);
      calls = json::array();
      for (const client::ToolCall& c : parser_->calls()) calls.push_back(ToolCallJson(c));
    }
    if (info_.stream) {
      Send(index, events);
      if (!pending_.empty()) events->push_back(Chunk(index, json::object(), "", TakePending()));
      events->push_back(
          Chunk(index, json::object(), ChatFinishReason(r.stop_reason, !calls.empty()), nullptr));
      return;
    }
    choices_.push_back({parser_ != nullptr ? parser_->content() : r.text, r.stop_reason,
                        logprobs_ ? ChatLogprobs(std::move(entries_)) : json(), calls});
  }

  json Response(int64_t prompt_tokens, int64_t completion_tokens) override {
    return ChatCompletionJson(info_.id, info_.created, info_.model, choices_, prompt_tokens,
                              completion_tokens);
  }
  json UsageChunk(int64_t prompt_tokens, int64_t completion_tokens) override {
    return UsageChunkJson(info_.id, info_.created, info_.model, prompt_tokens, completion_tokens);
  }

 private:
  json Chunk(int index, json delta, std::string_view finish, json logprobs) const {
    return ChatChunkJson(info_.id, info_.created, info_.model, index, std::move(delta), finish,
                         info_.include_usage, std::move(logprobs));
  }

  // The logprobs waiting for a chunk (null: none).
  json TakePending() {
    if (pending_.empty()) return json();
    json out = ChatLogprobs(std::move(pending_));
    pending_ = json::array();
    return out;
  }

  // The parser's tool_events_ as chunks.
  void Send(int index, Events* events) {
    for (const client::ToolCallEvent& t : tool_events_) {
      if (t.index < 0) {
        events->push_back(Chunk(index, {{"content", t.content}}, "", TakePending()));
        continue;
      }
      const json opening = {{"index", t.index},
                            {"id", t.call.id},
                            {"type", "function"},
                            {"function", {{"name", t.call.name}, {"arguments", ""}}}};
      const json arguments = {{"index", t.index}, {"function", {{"arguments", t.call.arguments}}}};
      events->push_back(Chunk(index, {{"tool_calls", json::array({opening})}}, "", TakePending()));
      events->push_back(Chunk(index, {{"tool_calls", json::array({arguments})}}, "", nullptr));
    }
    tool_events_.clear();
  }

  const ResponseInfo info_;
  const bool logprobs_;
  const TokenText text_;
  const ToolParserFactory tools_;
  json entries_ = json::array();  // the current choice's logprobs.content
  std::vector<ChatChoice> choices_;
  // Tool calling: the current choice's parser, what it released last, and
  // (streamed) the logprobs entries not sent yet.
  std::unique_ptr<client::ToolCallParser> parser_;
  std::vector<client::ToolCallEvent> tool_events_;
  json pending_ = json::array();
};

// How many leading bytes of the tokens' texts (`bytes` in all) the echoed
// `text` does not show: their excess when they end with it, else 0.
size_t HiddenPrefix(const std::vector<TokenScore>& tokens, size_t bytes, std::string_view text) {
  if (bytes <= text.size()) return 0;
  const size_t hidden = bytes - text.size();
  size_t at = 0;  // compare the tokens' bytes past `hidden` with the text
  for (const TokenScore& s : tokens) {
    const size_t begin = std::max(at, hidden);
    const size_t end = at + s.text.size();
    if (begin < end &&
        std::string_view(s.text).substr(begin - at) != text.substr(begin - hidden, end - begin)) {
      return 0;
    }
    at = end;
  }
  return hidden;
}

class CompletionWriter final : public ChoiceWriter {
 public:
  CompletionWriter(ResponseInfo info, bool echo, int logprobs, TokenText text)
      : info_(std::move(info)), echo_(echo), logprobs_(logprobs), text_(std::move(text)) {}

  void Begin(int index, const ChoicePrompt& prompt, Events* events) override {
    prompt_ = prompt;
    logprobs_json_ = CompletionLogprobs();
    text_so_far_.clear();
    echoed_ = !echo_;
    // Without prompt scores to wait for, the echo goes first at once.
    if (echo_ && logprobs_ < 0) Echo(index, {}, events);
  }

  void Token(int index, const client::TokenEvent& e, Events* events) override {
    if (!echoed_) Echo(index, e.prompt_logprobs, events);
    if (logprobs_ >= 0 && e.token >= 0) logprobs_json_.Add(ScoreOf(e, text_));
    if (!info_.stream) {
      text_so_far_ += e.text;
      return;
    }
    const bool scored = logprobs_ >= 0 && e.token >= 0;
    if (e.text.empty() && !scored) return;
    events->push_back(Chunk(index, e.text, scored ? logprobs_json_.Take() : json(), ""));
  }

  void End(int index, const client::GenerateResult& r, Events* events) override {
    if (!echoed_) Echo(index, r.prompt_logprobs, events);
    if (info_.stream) {
      events->push_back(Chunk(index, "", nullptr, FinishReason(r.stop_reason)));
      return;
    }
    choices_.push_back(
        {text_so_far_, r.stop_reason, logprobs_ >= 0 ? logprobs_json_.ToJson() : json()});
  }

  json Response(int64_t prompt_tokens, int64_t completion_tokens) override {
    return CompletionJson(info_.id, info_.created, info_.model, choices_, prompt_tokens,
                          completion_tokens);
  }
  json UsageChunk(int64_t prompt_tokens, int64_t completion_tokens) override {
    return UsageChunkJson(info_.id, info_.created, info_.model, prompt_tokens, completion_tokens,
                          "text_completion");
  }

 private:
  // The prompt's text first, and with logprobs its tokens' scores: the first
  // token has none; the others come from the model (TokenLogprob of token i
  // is scores[i - 1]).
  void Echo(int index, std::span<const v1::TokenLogprob> scores, Events* events) {
    echoed_ = true;
    if (logprobs_ >= 0) {
      std::vector<TokenScore> tokens(prompt_.ids.size());
      size_t bytes = 0;
      for (size_t i = 0; i < prompt_.ids.size(); ++i) {
        TokenScore& s = tokens[i];
        s.text = text_(prompt_.ids[i]);
        bytes += s.text.size();
        if (i > 0 && i - 1 < scores.size()) {
          const v1::TokenLogprob& t = scores[i - 1];
          s.logprob = t.logprob();
          for (int j = 0; j < t.top_ids_size() && j < logprobs_; ++j) {
            s.top.emplace_back(text_(t.top_ids(j)), t.top_logprobs(j));
          }
        }
      }
      // Text offsets index into the echoed text: bytes the tokens have
      // before it (a BOS the encoder added, a tokenizer's leading space:
      // the tokens' bytes end with the text) are in no offset.
      size_t hidden = HiddenPrefix(tokens, bytes, prompt_.text);
      for (const TokenScore& s : tokens) {
        const size_t skip = std::min(hidden, s.text.size());
        hidden -= skip;
        logprobs_json_.Add(s, static_cast<int64_t>(s.text.size() - skip));
      }
    }
    if (info_.stream) {
      events->push_back(
          Chunk(index, prompt_.text, logprobs_ >= 0 ? logprobs_json_.Take() : json(), ""));
    } else {
      text_so_far_ = std::string(prompt_.text);
    }
  }

  json Chunk(int index, std::string_view text, json logprobs, std::string_view finish) const {
    return CompletionChunkJson(info_.id, info_.created, info_.model, index, text,
                               std::move(logprobs), finish, info_.include_usage);
  }

  const ResponseInfo info_;
  const bool echo_;
  const int logprobs_;
  const TokenText text_;
  ChoicePrompt prompt_;
  bool echoed_ = true;
  CompletionLogprobs logprobs_json_;
  std::string text_so_far_;  // non-streamed: the current choice's text
  std::vector<ChatChoice> choices_;
};

}  // namespace

std::unique_ptr<ChoiceWriter> NewChatWriter(ResponseInfo info, bool logprobs, TokenText text,
                                            ToolParserFactory tools) {
  return std::make_unique<ChatWriter>(std::move(info), logprobs, std::move(text), std::move(tools));
}

std::unique_ptr<ChoiceWriter> NewCompletionWriter(ResponseInfo info, bool echo, int logprobs,
                                                  TokenText text) {
  return std::make_unique<CompletionWriter>(std::move(info), echo, logprobs, std::move(text));
}

}  // namespace llm::gateway
