// Chat templates: how a conversation's messages become the model's prompt
// text. The format is chosen from the GGUF tokenizer.chat_template text (the
// tokenizer service's Info): it contains "<|im_start|>" -> ChatML (SmolLM2,
// Qwen, ...), "<|start_header_id|>" -> Llama-3; anything else (or no
// template) -> raw, where messages are plain text. Jinja is not evaluated:
// the two formats are written out here, and a literal default system message
// in a ChatML template (SmolLM2's "You are a helpful AI assistant named
// SmolLM, trained by Hugging Face") is extracted and used when the
// conversation has no system message, as the template itself would.
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
#ifndef LLM_CLIENT_CHAT_TEMPLATE_H_
#define LLM_CLIENT_CHAT_TEMPLATE_H_

#include <span>
#include <string>
#include <string_view>

namespace llm::client {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Kind { kRaw, kChatMl, kLlama3 };

  // The format a GGUF chat template text asks for (see above); raw when the
  // text is empty or in no known format.
  static ChatTemplate Detect(std::string_view template_text);
  static ChatTemplate Raw() { return ChatTemplate(Kind::kRaw, ""); }
  static ChatTemplate ChatMl(std::string default_system = "") {
    return ChatTemplate(Kind::kChatMl, std::move(default_system));
  }
  static ChatTemplate Llama3() { return ChatTemplate(Kind::kLlama3, ""); }

  Kind kind() const { return kind_; }
  // "raw", "chatml" or "llama3".
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

 private:
  ChatTemplate(Kind kind, std::string default_system)
      : kind_(kind), default_system_(std::move(default_system)) {}

  Kind kind_;
  std::string default_system_;
};

// A literal system message written in a ChatML template text, e.g.
// '<|im_start|>system\nYou are ...<|im_end|>' (with a real newline or the
// two characters \n): its content, or "" when there is none.
std::string ExtractChatMlDefaultSystem(std::string_view template_text);

}  // namespace llm::client

#endif  // LLM_CLIENT_CHAT_TEMPLATE_H_
