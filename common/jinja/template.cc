#include "common/jinja/template.h"

#include "absl/status/status.h"
#include "common/jinja/evaluator.h"
#include "common/jinja/lexer.h"
#include "common/jinja/parser.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::jinja {

absl::StatusOr<Template> Template::Parse(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_template_bytes) {
    return absl::ResourceExhaustedError(
        StrCat("template of ", source.size(), " bytes; the limit is ", limits.max_template_bytes));
  }
  LLM_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source));
  LLM_ASSIGN_OR_RETURN(Body body, jinja::Parse(tokens, limits.max_depth));
  return Template(std::make_shared<const Body>(std::move(body)), limits);
}

absl::StatusOr<std::string> Template::Render(const Dict& variables,
                                             const RenderOptions& options) const {
  return Evaluate(*body_, variables, limits_, options);
}

}  // namespace llm::jinja
