// Chat templates: how a conversation's messages become the model's prompt
// text. Two ways:
//
// Jinja (kJinja, what the llm CLI uses): the model's own template text (GGUF
// tokenizer.chat_template, a .jinja file, or a built-in family template,
// builtin_templates.h) evaluated by common/jinja as transformers'
// apply_chat_template would: Render() gives the whole conversation's text.
// Each turn's text is then the new suffix of that rendering (chat_turns.h).
//
// Written-out formats (kChatMl, kLlama3, kRaw; Detect): chosen by substring
// from the template text: "<|im_start|>" -> ChatML (SmolLM2, Qwen, ...),
// "<|start_header_id|>" -> Llama-3; anything else (or no template) -> raw,
// where messages are plain text. A literal default system message in a
// ChatML template (SmolLM2's "You are a helpful AI assistant named SmolLM,
// trained by Hugging Face") is extracted and used when the conversation has
// no system message, as the template itself would.
//
// A conversation is formatted turn by turn, so that each turn's text is
// exactly what the whole conversation's text adds (the model session only
// needs the new tokens):
//   turn 1: FormatTurn({system?, user}, /*first=*/true)
//   turn n: EndOfAssistantTurn() + FormatTurn({user}, /*first=*/false)
// Every turn boundary is a special token, so encoding turn by turn gives the
// same ids as encoding the whole conversation at once.
//
// ChatML:  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
// Llama-3: <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n
//          {content, trimmed}<|eot_id|> ... <|start_header_id|>assistant<|end_header_id|>\n\n
// Raw:     each message's content followed by "\n"; no markers.
//
// Threads: immutable after construction; share freely.
#ifndef LLM_CLIENT_GENERATE_CHAT_TEMPLATE_H_
#define LLM_CLIENT_GENERATE_CHAT_TEMPLATE_H_

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/jinja/template.h"

namespace llm::client {

// A call an assistant message made (OpenAI's tool_calls[i]).
struct ToolCall {
  std::string id;
  std::string name;       // the function's
  std::string arguments;  // JSON text, as OpenAI sends it (an object, as a string)
};

// A message of a conversation. Tool calling: an assistant message may carry
// the calls it made (tool_calls, its content then often empty); a "tool"
// message answers one of them (tool_call_id; name: the function's, when the
// client gives it). `tools`: a system message's own tool list as JSON text,
// for templates that read it there (Phi-4-mini's); "" = none.
struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ToolCall> tool_calls;
  std::string tool_call_id;
  std::string name;
  std::string tools;
};

class ChatTemplate {
 public:
  enum class Kind { kRaw, kChatMl, kLlama3, kJinja };

  // A Jinja template; `name` says where it came from (for messages: "the
  // model's", "gemma", a file name); bos_token / eos_token are the
  // vocabulary's BOS / EOS text ("" when it has none). InvalidArgument with
  // the line and column when the text does not parse.
  static absl::StatusOr<ChatTemplate> FromJinja(std::string_view source, std::string name,
                                                std::string bos_token, std::string eos_token);

  // The format a GGUF chat template text asks for (see above); raw when the
  // text is empty or in no known format.
  static ChatTemplate Detect(std::string_view template_text);
  static ChatTemplate Raw() { return ChatTemplate(Kind::kRaw, ""); }
  static ChatTemplate ChatMl(std::string default_system = "") {
    return ChatTemplate(Kind::kChatMl, std::move(default_system));
  }
  static ChatTemplate Llama3() { return ChatTemplate(Kind::kLlama3, ""); }

  Kind kind() const { return kind_; }
  // "raw", "chatml" or "llama3"; a Jinja template's name.
  std::string_view name() const;
  // The system message used when a conversation starts without one ("" if none).
  const std::string& default_system() const { return default_system_; }

  // The text that `messages` add to a conversation, followed by the header of
  // the assistant's answer (the generation prompt). `first`: the conversation
  // is empty, so its opening comes first (Llama-3's <|begin_of_text|>, and the
  // default system message unless messages[0] is a system message).
  std::string FormatTurn(std::span<const ChatMessage> messages, bool first) const;

  // What closes an assistant message that the model generated: ChatML
  // "<|im_end|>\n", Llama-3 "<|eot_id|>", raw "\n". The end-of-turn token
  // that stopped a generation is not part of the session (it is never fed to
  // the model), so the next turn starts with this text.
  std::string EndOfAssistantTurn() const;

  // kJinja: the whole conversation's text, with the assistant header at the
  // end when add_generation_prompt, as transformers renders it (variables
  // messages, add_generation_prompt, bos_token, eos_token, tools, documents
  // None).
  //
  // Tools, as transformers passes them: `tools_json` is a JSON array of
  // OpenAI tool objects ({"type": "function", "function": {"name",
  // "description", "parameters"}}), given to the template as `tools` (keys
  // in their order in the text); "" gives None. Each message is a dict with
  // role and content; an assistant message's calls are `tool_calls`, a list
  // of {"id", "type": "function", "function": {"name", "arguments"}} with
  // the arguments parsed into a dict (templates write them with tojson; text
  // that is not a JSON object stays a string); a tool message has
  // `tool_call_id` and `name`; a system message's `tools` is its text.
  // Each of these keys is present only when the message has it (templates
  // test `'tool_calls' in message`).
  //
  // Errors: the template's (raise_exception: roles that do not alternate, a
  // system role it does not support, ...), InvalidArgument; tools_json that
  // is not a JSON array, InvalidArgument; a limit, ResourceExhausted. Cost:
  // one rendering of the whole conversation.
  absl::StatusOr<std::string> Render(std::span<const ChatMessage> messages,
                                     bool add_generation_prompt,
                                     std::string_view tools_json = {}) const;
  // As above, with strftime_now's clock fixed at `now` (UTC): for tests.
  absl::StatusOr<std::string> RenderAt(std::span<const ChatMessage> messages,
                                       bool add_generation_prompt, std::string_view tools_json,
                                       absl::Time now) const;

  // kJinja: the template's text ("" for the written-out formats).
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(Kind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}

  Kind kind_;
  std::string default_system_;
  // kJinja only.
  std::shared_ptr<const jinja::Template> jinja_;
  std::string name_;
  std::string bos_token_;
  std::string eos_token_;
  std::string source_;
};

// A literal system message written in a ChatML template text, e.g.
// '<|im_start|>system\nYou are ...<|im_end|>' (with a real newline or the
// two characters \n): its content, or "" when there is none.
std::string ExtractChatMlDefaultSystem(std::string_view template_text);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_TEMPLATE_H_
