// Built-in chat templates (Jinja texts) for the families we serve, for
// `llm --template NAME` and for models whose GGUF carries no template.
//
// Names: chatml, gemma (Gemma 3), llama3, mistral, phi3 (Phi-3.5), qwen
// (Qwen2.5), zephyr (Zephyr, TinyLlama-Chat). The texts are the models'
// published templates (common/jinja/testdata/README.md says where each
// comes from); jinja_reference_test checks them against jinja2.
// Threads: constant data.
#ifndef LLM_CLIENT_GENERATE_BUILTIN_TEMPLATES_H_
#define LLM_CLIENT_GENERATE_BUILTIN_TEMPLATES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace llm::client {

// The template text named `name`, or nullopt.
std::optional<std::string_view> BuiltinTemplate(std::string_view name);
std::vector<std::string_view> BuiltinTemplateNames();

// The family default for a model without a template, from its GGUF
// general.architecture and its vocabulary's special tokens (Gemma's
// <start_of_turn>, Llama 3's <|start_header_id|>, ChatML's <|im_start|>,
// Phi-3's <|user|> and <|end|>, Mistral's [INST], Zephyr's <|user|>); ""
// when nothing fits.
std::string_view DefaultFamily(std::string_view architecture,
                               const std::vector<std::string>& special_tokens);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_BUILTIN_TEMPLATES_H_
