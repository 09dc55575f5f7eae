// Reads a model's tool calls out of its answer as the answer streams
// (tool_format.h lists each family's syntax): text outside calls is the
// answer's content, each complete call an OpenAI tool call (id, function
// name, arguments as JSON text of an object).
//
//   ToolCallParser p(ToolSyntax::kHermes, options);
//   for each piece of generated text:  p.Feed(piece, &events);  // send events
//   at the end:                        p.Finish(&events);
//   p.content(), p.calls(): the whole answer
//
// Streaming: content is released as it comes, except text that may still
// turn out to start a call (a partial marker such as "<tool_c", or, where a
// family's call can only open the answer, the answer's first characters
// until they decide it) and whitespace, which waits for the next text (the
// whitespace right before a call is dropped: it belongs to no content).
// A call is held from its marker until it is complete, then released whole
// (one event with id, name and all the arguments): a call is never
// released half-parsed. A call still open when the generation ends
// (max_tokens, a stop string, EOS inside the JSON), or one that turns out
// malformed (not JSON, no name, arguments that are not an object, text
// where the closing marker should be), is content, as vLLM returns it: the
// client sees what the model wrote and no call. (A Hermes call whose JSON is
// complete but whose closing </tool_call> never came is a call: it is
// whole.)
//
// Arguments are re-serialized compactly in the model's key order
// ({"city":"Paris"}, as OpenAI writes them); arguments written as a JSON
// string holding an object are decoded; missing ones are {}. Nesting deeper
// than kMaxToolJsonDepth makes the call malformed. Names are not checked
// against the request's tools (a constraint keeps the model to them; the
// client decides what an unknown name means), except where the syntax needs
// them to tell a call from text (kPythonic).
//
// Threads: one generation's. Cost: linear in the text, but a call is
// re-scanned from its marker each time text arrives while it is open
// (quadratic in one call's length, which max_tokens bounds).
#ifndef LLM_CLIENT_TOOLS_TOOL_CALL_PARSER_H_
#define LLM_CLIENT_TOOLS_TOOL_CALL_PARSER_H_

#include <cstddef>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/tools/tool_format.h"

namespace llm::client {

inline constexpr int kMaxToolJsonDepth = 64;

// What one Feed or Finish adds: content text (index < 0), or a complete call.
struct ToolCallEvent {
  std::string content;
  int index = -1;  // the call's place among the answer's calls
  ToolCall call;
};

struct ToolParserOptions {
  // parallel_tool_calls false: 1. Calls past it are dropped (neither calls
  // nor content).
  size_t max_calls = std::numeric_limits<size_t>::max();
  // The id of a call (the model's own is kept only where the syntax has one
  // and it is 9 letters and digits, Mistral's form). Null: "call_" and 24
  // random letters and digits.
  std::function<std::string()> new_id;
  // kPythonic: the functions a call may name (a call opens the answer with
  // one of them); empty: any identifier.
  std::vector<std::string> tool_names;
};

class ToolCallParser {
 public:
  ToolCallParser(ToolSyntax syntax, ToolParserOptions options);

  // `text`: the next generated text. Appends what it releases to *events
  // (adjacent content merged into one event).
  void Feed(std::string_view text, std::vector<ToolCallEvent>* events);
  // The generation ended: what is held is released (a call still open as
  // content).
  void Finish(std::vector<ToolCallEvent>* events);

  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State { kText, kCall };
  enum class Marker { kNone, kTag, kStart };

  void Process(bool final, std::vector<ToolCallEvent>* events);
  // In kText: where the next call starts in buf_ (npos: none yet), and
  // whether more text is needed to tell.
  size_t FindCall(bool final, bool* wait);
  void EmitContent(std::string_view text, std::vector<ToolCallEvent>* events);
  void EmitCall(ToolCall call, std::vector<ToolCallEvent>* events);

  const ToolSyntax syntax_;
  const ToolParserOptions options_;
  State state_ = State::kText;
  Marker marker_ = Marker::kNone;  // kCall: what opened it
  size_t marker_size_ = 0;         // kCall, kTag: the marker's length
  bool opened_ = false;            // the answer's opening is decided (start-only calls)
  std::string buf_;                // received, not yet released
  std::string space_;              // kCall: the whitespace before the call
  std::string content_;
  std::vector<ToolCall> calls_;
  size_t dropped_ = 0;  // calls past max_calls
};

// A random id: `prefix` and `length` letters and digits.
std::string RandomToolCallId(std::string_view prefix, size_t length);

}  // namespace llm::client

#endif  // LLM_CLIENT_TOOLS_TOOL_CALL_PARSER_H_
