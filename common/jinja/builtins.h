// Jinja's built-in filters and tests, and the methods of strings and dicts
// that chat templates call (str.strip(), dict.items(), ...), as jinja2 and
// Python define them. Only these exist: nothing reaches files, the process
// or any object but the template's own values. List methods that mutate
// (append, pop, ...) are refused, as jinja2's ImmutableSandboxedEnvironment
// refuses them.
//
// Filters: abs, capitalize, count, d, default, first, float, int, items,
// join, last, length, list, lower, map (attribute= or a filter name),
// reject, rejectattr, replace, reverse, round, safe, select, selectattr,
// sort (attribute=, reverse=), string, sum, title, tojson (indent=,
// sort_keys=; transformers' definition: json.dumps with ensure_ascii=False),
// trim, unique, upper, wordcount.
// Tests: boolean, callable, defined, divisibleby, eq/equalto/==, even, false,
// float, ge/>=, gt/>, in, integer, iterable, le/<=, lower, lt/<, mapping,
// ne/!=, none, number, odd, sameas, sequence, string, true, undefined, upper.
//
// Errors: InvalidArgument naming the filter, test or method (unknown name,
// wrong argument types); ResourceExhausted when a result would exceed
// max_bytes. Threads: pure functions.
#ifndef LLM_COMMON_JINJA_BUILTINS_H_
#define LLM_COMMON_JINJA_BUILTINS_H_

#include <cstddef>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/jinja/value.h"

namespace llm::jinja {

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args,
                                  size_t max_bytes);
absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args);
// The method `name` of a string or dict, bound to `receiver`; nullopt when
// there is none.
std::optional<Value> BoundMethod(const Value& receiver, std::string_view name, size_t max_bytes);

// Python's comparison for <, <=, >, >= (numbers with numbers, strings with
// strings, lists item by item): negative, zero or positive; InvalidArgument
// for other types.
absl::StatusOr<int> Compare(const Value& a, const Value& b);
// Python's `a in b` (substring, list item, dict key); false for an undefined b.
absl::StatusOr<bool> Contains(const Value& container, const Value& item);
// The items a for loop visits: a list's items, a string's characters, a
// dict's keys; nothing for undefined. InvalidArgument for other types.
absl::StatusOr<List> Iterate(const Value& v);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_BUILTINS_H_
