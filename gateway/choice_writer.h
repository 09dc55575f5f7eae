// A request's choices as OpenAI's JSON: chat.completion / chat.completion.chunk
// or text_completion, streamed or not, with logprobs when asked for.
//
// The gateway calls Begin, Token (once per TokenEvent) and End for each
// choice in turn. Streamed, each call appends the server-sent events to send
// now; otherwise the choices are gathered for Response().
//
// Threads: one request's; not thread-safe. Cost: a token's texts (its own
// and its alternatives') are looked up through TokenText.
#ifndef LLM_GATEWAY_CHOICE_WRITER_H_
#define LLM_GATEWAY_CHOICE_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/result.h"
#include "client/tools/tool_call_parser.h"

namespace llm::gateway {

// The bytes of a token id.
using TokenText = std::function<std::string(int32_t id)>;

// What every event of a request repeats.
struct ResponseInfo {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;
  std::string model;
  bool stream = false;
  bool include_usage = false;
};

// The prompt a choice continues (completions with echo show it).
struct ChoicePrompt {
  std::span<const int32_t> ids;
  std::string_view text;  // the prompt's text, as echoed
};

class ChoiceWriter {
 public:
  using Events = std::vector<nlohmann::json>;
  virtual ~ChoiceWriter() = default;
  virtual void Begin(int index, const ChoicePrompt& prompt, Events* events) = 0;
  virtual void Token(int index, const client::TokenEvent& event, Events* events) = 0;
  // `result`: the choice's generation (its text, stop reason and prompt scores).
  virtual void End(int index, const client::GenerateResult& result, Events* events) = 0;
  // Non-streamed: the whole response, with the usage.
  virtual nlohmann::json Response(int64_t prompt_tokens, int64_t completion_tokens) = 0;
  // Streamed with include_usage: the last event.
  virtual nlohmann::json UsageChunk(int64_t prompt_tokens, int64_t completion_tokens) = 0;
};

// A new parser of a choice's answer for tool calls (one per choice).
using ToolParserFactory = std::function<std::unique_ptr<client::ToolCallParser>()>;

// Chat: `logprobs` adds each generated token's logprob and the
// TokenEvent::top alternatives (logprobs.content).
//
// `tools` (not null): each answer goes through a tool-call parser
// (tool_call_parser.h): its content is the text outside calls, its calls
// message.tool_calls, finish_reason "tool_calls" when it called tools and
// ended by itself. Streamed, content deltas come as the parser releases
// them, and each call as two chunks once it is complete: {"tool_calls":
// [{"index", "id", "type": "function", "function": {"name", "arguments":
// ""}}]}, then {"tool_calls": [{"index", "function": {"arguments"}}]}
// (OpenAI's shape: the first names it, the next carry its arguments); a
// token's logprobs ride on the next chunk sent (on a chunk of their own
// before the last when nothing follows).
std::unique_ptr<ChoiceWriter> NewChatWriter(ResponseInfo info, bool logprobs, TokenText text,
                                            ToolParserFactory tools = nullptr);

// Completions: `echo` puts the prompt first in each choice (streamed: its
// own first event); `logprobs` >= 0 lists each token's logprob with that
// many alternatives and the token itself (the prompt's too with echo, its
// first token's null). text_offset indexes into the choice's text: an
// echoed prompt's tokens whose bytes the prompt text does not show (a BOS
// the encoder added) are at offset 0 and take no room.
std::unique_ptr<ChoiceWriter> NewCompletionWriter(ResponseInfo info, bool echo, int logprobs,
                                                  TokenText text);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_CHOICE_WRITER_H_
