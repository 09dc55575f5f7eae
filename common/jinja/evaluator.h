// The tree-walking evaluator behind Template::Render (template.h has the
// contract): renders a parsed body with the given variables, within limits.
//
// Scoping follows jinja2: a for loop's body gets a fresh scope per
// iteration (a set inside it is gone after the iteration; namespace()
// attributes are how templates carry state out), if blocks do not open a
// scope, a macro sees the template's top-level scope and its arguments.
// Threads: a pure function (each call has its own state).
#ifndef LLM_COMMON_JINJA_EVALUATOR_H_
#define LLM_COMMON_JINJA_EVALUATOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/jinja/ast.h"
#include "common/jinja/template.h"
#include "common/jinja/value.h"

namespace llm::jinja {

absl::StatusOr<std::string> Evaluate(const Body& body, const Dict& variables, const Limits& limits,
                                     const RenderOptions& options);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_EVALUATOR_H_
