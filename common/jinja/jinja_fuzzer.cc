// libFuzzer target: the input is a chat template (as an untrusted GGUF would
// carry one). It is parsed and, when it parses, rendered on a small
// conversation with tight limits. Any crash, hang, sanitizer report or
// unbounded allocation is a bug; errors are expected.
// Seeds: real templates (fuzz_seeds/).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/time/time.h"
#include "common/jinja/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using llm::jinja::Dict;
  using llm::jinja::List;
  using llm::jinja::Value;
  llm::jinja::Limits limits;
  limits.max_depth = 64;
  limits.max_iterations = 10000;
  limits.max_output_bytes = 1 << 16;
  absl::StatusOr<llm::jinja::Template> t = llm::jinja::Template::Parse(
      std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!t.ok()) return 0;
  static const Dict* const vars = [] {
    List messages = {
        Value(Dict{{"role", Value("system")}, {"content", Value("Be brief.")}}),
        Value(Dict{{"role", Value("user")}, {"content", Value(" Héllo 👋\n")}}),
        Value(Dict{{"role", Value("assistant")}, {"content", Value("<think>x</think>Hi")}}),
        Value(Dict{{"role", Value("user")}, {"content", Value("And?")}}),
    };
    return new Dict{{"messages", Value(std::move(messages))},
                    {"tools", Value::None()},
                    {"add_generation_prompt", Value(true)},
                    {"bos_token", Value("<s>")},
                    {"eos_token", Value("</s>")}};
  }();
  llm::jinja::RenderOptions options;
  options.now = absl::FromUnixSeconds(1736942400);
  options.zone = absl::UTCTimeZone();
  (void)t->Render(*vars, options);
  return 0;
}
