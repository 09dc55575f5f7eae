// A Jinja-subset template engine for chat templates, which come from
// untrusted model files (GGUF tokenizer.chat_template, a .jinja file).
//
//   auto t = jinja::Template::Parse(text);            // InvalidArgument with line/column
//   jinja::Dict vars = {{"messages", ...}, {"add_generation_prompt", true}};
//   auto prompt = t->Render(vars);
//
// It renders as Hugging Face transformers' apply_chat_template does (jinja2's
// ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
// loopcontrols extension, transformers' tojson, raise_exception and
// strftime_now); tests pin the output byte for byte against jinja2's on real
// templates (common/jinja/testdata). The supported language: parser.h
// (statements, expressions), builtins.h (filters, tests, methods); globals:
// range, namespace, dict, raise_exception(message) (-> an error carrying the
// message), strftime_now(format) (RenderOptions::now, in its time zone).
//
// Safety: nothing in a template can read files, import, include, or reach
// anything but the values passed in and those it builds; every resource is
// bounded by Limits, and exceeding one is an error (ResourceExhausted),
// never a crash or a hang.
//
// Errors: Parse: InvalidArgument "line L, column C: ...". Render:
// InvalidArgument for template errors (type errors, an undefined value used
// as an object, raise_exception: "raise_exception: <message>"),
// ResourceExhausted for a limit.
// Threads: a Template is immutable; Render may run on several threads.
// Cost: Parse is linear in the text; Render is bounded by Limits.
#ifndef LLM_COMMON_JINJA_TEMPLATE_H_
#define LLM_COMMON_JINJA_TEMPLATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/jinja/ast.h"
#include "common/jinja/value.h"

namespace llm::jinja {

struct Limits {
  size_t max_template_bytes = 1 << 20;  // the source text
  int max_depth = 200;                  // nesting: parser, values built, macro calls
  int64_t max_iterations = 100000;      // loop iterations and range() items, per render
  size_t max_output_bytes = 4 << 20;    // the output, and any one string built on the way
};

struct RenderOptions {
  // strftime_now's clock: InfiniteFuture() (the default) means absl::Now().
  absl::Time now = absl::InfiniteFuture();
  absl::TimeZone zone = absl::LocalTimeZone();
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source, const Limits& limits = {});

  // `variables` are the template's globals (messages, add_generation_prompt,
  // bos_token, ...); they hide the built-in globals of the same name.
  absl::StatusOr<std::string> Render(const Dict& variables,
                                     const RenderOptions& options = {}) const;

  const Limits& limits() const { return limits_; }

 private:
  Template(std::shared_ptr<const Body> body, const Limits& limits)
      : body_(std::move(body)), limits_(limits) {}

  std::shared_ptr<const Body> body_;
  Limits limits_;
};

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_TEMPLATE_H_
