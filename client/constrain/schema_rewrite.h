// Rewrites of one JSON Schema node into an equivalent form that xgrammar
// enforces exactly (schema_support.h walks the tree and calls them):
//   - draft 7's tuple "items": [...] and "additionalItems" become
//     "prefixItems" and "items" (and `true` in a tuple becomes {});
//   - keywords beside "anyOf" / "oneOf" move into every branch, and the
//     members of "allOf" merge into their schema, where no keyword is on
//     both sides (xgrammar reads a combinator alone, and an allOf of several
//     members not at all);
//   - "const" / "enum" values that are objects or arrays become schemas of
//     that exact object or array (xgrammar matches them only as their
//     compact serialization, without the whitespace JSON allows);
//   - "pattern" and "patternProperties" regexes match anywhere in the string,
//     as JSON Schema says (xgrammar matches the whole string);
//   - a schema without "type" whose keywords apply to some types only
//     ({"minimum": 5}) gets the list of all types, so that xgrammar checks
//     numbers and lets the other types through, as JSON Schema says (it would
//     read the schema as any value). A schema without "type" that xgrammar
//     reads as an object or an array ("properties", "items") is left so: it
//     refuses the other types, which a generation wants.
// A rewrite that cannot be made exactly is not made; the checks then refuse
// what xgrammar would not enforce.
#ifndef LLM_CLIENT_CONSTRAIN_SCHEMA_REWRITE_H_
#define LLM_CLIENT_CONSTRAIN_SCHEMA_REWRITE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llm::constrain {

using SchemaJson = nlohmann::ordered_json;

// Moves of JSON pointers that a rewrite made ("/a/items/0" now lives at
// "/a/prefixItems/0"), for the "$ref"s that pointed there.
using PointerMoves = std::vector<std::pair<std::string, std::string>>;

// `key` as one reference token of a JSON pointer (RFC 6901: ~ and / escaped).
std::string PointerToken(std::string_view key);

// How much the rewrites may grow a schema: bytes of compact JSON text they
// may still add. Copying the keywords beside an "anyOf" into each of its
// branches multiplies them (a 80 KB schema of 1,000 branches beside 57 KB
// would become 57 MB, which xgrammar compiles for minutes in gigabytes):
// such a copy is measured before it is made, and not made past the budget.
struct GrowthBudget {
  int64_t bytes_left = INT64_MAX;
  // The path of the first node a rewrite would have grown past the budget.
  std::optional<std::string> exceeded_at;

  // Takes `bytes`: false (nothing taken, exceeded_at set) when fewer are left.
  bool Take(int64_t bytes, const std::string& path);
};

// Rewrites the node at JSON pointer `path` (not its children). Returns
// whether it changed anything. With a budget, a rewrite that would grow the
// schema past it is not made (budget->exceeded_at says where).
bool RewriteNode(SchemaJson& schema, const std::string& path, PointerMoves* moves,
                 GrowthBudget* budget = nullptr);

// Points every local "$ref" under `root` that starts with a moved pointer at
// its new place.
void ApplyPointerMoves(SchemaJson& root, const PointerMoves& moves);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_SCHEMA_REWRITE_H_
