// Which chat template the llm CLI uses for a model (generate and chat):
//
//   1. --template NAME|FILE: a built-in template (builtin_templates.h), "raw",
//      or a .jinja file (read whole; a parse error names its line/column);
//   2. the model's own template (GGUF tokenizer.chat_template, from the
//      tokenizer service's Info), evaluated as Jinja;
//   3. when the model has none, or its template does not parse here, the
//      family default (DefaultFamily: architecture and special tokens,
//      e.g. Gemma's <start_of_turn>), with a note saying so;
//   4. when nothing fits, raw text, with a warning: never silently.
//
// Errors: InvalidArgument for a bad --template (unknown name, unreadable or
// unparsable file). Threads: a pure function but for reading FILE.
#ifndef LLM_CLIENT_GENERATE_TEMPLATE_CHOICE_H_
#define LLM_CLIENT_GENERATE_TEMPLATE_CHOICE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"

namespace llm::client {

struct ModelTemplateInfo {
  std::string chat_template;                // GGUF tokenizer.chat_template ("" if none)
  std::string architecture;                 // GGUF general.architecture
  std::vector<std::string> special_tokens;  // the vocabulary's special-token texts
  std::string bos_token;                    // BOS / EOS text ("" if none)
  std::string eos_token;
};

struct TemplateChoice {
  ChatTemplate chat_template;
  std::string note;  // a line for stderr ("" when the choice needs no comment)
};

absl::StatusOr<TemplateChoice> ChooseChatTemplate(const ModelTemplateInfo& info,
                                                  std::string_view template_flag);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_TEMPLATE_CHOICE_H_
