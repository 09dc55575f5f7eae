// What xgrammar enforces of a JSON Schema, checked before it compiles one.
//
// xgrammar turns a schema into a grammar for generation: it enforces most of
// JSON Schema, ignores some keywords (with a warning at best) and reads a few
// combinations in its own way. A constraint that silently enforces less than
// its schema says is a generation that silently breaks the schema, so
// PrepareSchema refuses such a schema, naming the keyword and where it is:
//   - keywords xgrammar does not enforce: not, if/then/else, dependencies,
//     dependentRequired, dependentSchemas, uniqueItems (true), contains,
//     minContains, maxContains, $dynamicRef, $recursiveRef;
//   - keywords beside $ref (draft 2019-09 and later; draft 7 and earlier
//     ignore them, as xgrammar does), const, enum, anyOf, oneOf or allOf,
//     which xgrammar ignores there;
//   - validation keywords in a schema without "type" that xgrammar reads as
//     "anything" (minimum, pattern, required, ...).
// Compile (constraint.cc) refuses as well what xgrammar warns it ignores while
// compiling (multipleOf of a number, oneOf whose branches may overlap, ...).
// With Spec::lenient none of this is refused: xgrammar's own behaviour.
//
// Before checking a schema node it rewrites it into an equivalent form that
// xgrammar enforces exactly where it can (schema_rewrite.h: draft 7's tuple
// items, keywords beside combinators, allOf, object and array consts,
// unanchored patterns, schemas without "type").
//
// Cost: one parse of the schema and one walk of its tree as rewritten
// (within max_bytes); the caller has bounded its nesting (bounds.h).
#ifndef LLM_CLIENT_CONSTRAIN_SCHEMA_SUPPORT_H_
#define LLM_CLIENT_CONSTRAIN_SCHEMA_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace llm::constrain {

// The schema xgrammar should compile (`schema` itself unless rewritten), or
// InvalidArgument: not JSON, not a schema (an object or a boolean), a
// feature named as above (only when !lenient), or a rewrite that would make
// it longer than `max_bytes` (schema_rewrite.h's GrowthBudget: the copies
// are measured before they are made, so memory and time stay within a few
// times `max_bytes`).
absl::StatusOr<std::string> PrepareSchema(std::string_view schema, bool lenient,
                                          size_t max_bytes = SIZE_MAX);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_SCHEMA_SUPPORT_H_
