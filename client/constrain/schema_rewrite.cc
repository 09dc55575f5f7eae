#include "client/constrain/schema_rewrite.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/constrain/schema_keywords.h"
#include "common/strings.h"

namespace llm::constrain {
namespace {

using Json = SchemaJson;

// Keywords that must come from one side of a merge: each group's meaning
// depends on the others in the same schema object (additionalProperties on
// properties, items on prefixItems).
constexpr std::array<std::string_view, 4> kObjectGroup = {
    "properties", "patternProperties", "additionalProperties", "unevaluatedProperties"};
constexpr std::array<std::string_view, 5> kArrayGroup = {"prefixItems", "items", "additionalItems",
                                                         "unevaluatedItems", "contains"};

template <size_t N>
bool HasAnyOf(const Json& schema, const std::array<std::string_view, N>& keys) {
  for (std::string_view k : keys) {
    if (schema.contains(std::string(k))) return true;
  }
  return false;
}

// The type names a "type" value allows, "integer" included in "number".
std::set<std::string> TypeSet(const Json& type) {
  std::set<std::string> types;
  auto add = [&](const std::string& t) {
    types.insert(t);
    if (t == "number") types.insert("integer");
  };
  if (type.is_string()) add(type.get<std::string>());
  if (type.is_array()) {
    for (const Json& t : type) {
      if (t.is_string()) add(t.get<std::string>());
    }
  }
  return types;
}

// The "type" value of the intersection of two (xgrammar reads the result).
Json IntersectTypes(const Json& a, const Json& b) {
  const std::set<std::string> sa = TypeSet(a);
  const std::set<std::string> sb = TypeSet(b);
  Json result = Json::array();
  for (const std::string& t : sa) {
    // "integer" alone when only one side says "number".
    if (t == "integer" && sa.count("number") && sb.count("number")) continue;
    if (sb.count(t)) result.push_back(t);
  }
  if (result.size() == 1) return result[0];
  return result;
}

// Whether `a` and `b` can be merged into one schema object that means
// allOf(a, b), and the merge into *out.
bool Merge(const Json& a, const Json& b, Json* out) {
  if (a.contains("$ref") || b.contains("$ref")) return false;
  if (HasAnyOf(a, kObjectGroup) && HasAnyOf(b, kObjectGroup)) return false;
  if (HasAnyOf(a, kArrayGroup) && HasAnyOf(b, kArrayGroup)) return false;
  Json merged = a;
  for (const auto& [key, value] : b.items()) {
    if (!merged.contains(key)) {
      merged[key] = value;
    } else if (key == "type") {
      merged[key] = IntersectTypes(merged[key], value);
    } else if (!IsAnnotation(key)) {
      return false;  // annotations: the first side's stays
    }
  }
  *out = std::move(merged);
  return true;
}

// The schema object of `schema` without the keys of `drop` and of the
// containers that must stay where they are ($defs, definitions).
Json Siblings(const Json& schema, std::string_view drop) {
  Json siblings = Json::object();
  for (const auto& [key, value] : schema.items()) {
    if (key == drop || IsAnnotation(key) || key == "$defs" || key == "definitions") continue;
    siblings[key] = value;
  }
  return siblings;
}

void EraseSiblings(Json& schema, const Json& siblings) {
  for (const auto& [key, value] : siblings.items()) schema.erase(key);
}

bool RewriteDraft7Items(Json& schema, const std::string& path, PointerMoves* moves) {
  const bool tuple = schema.contains("items") && schema["items"].is_array();
  if (!tuple) {
    // Beside a schema-form "items" (or none), "additionalItems" means nothing.
    return schema.erase("additionalItems") > 0;
  }
  if (schema.contains("prefixItems")) return false;  // xgrammar reports "items"
  Json prefix = std::move(schema["items"]);
  schema.erase("items");
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (prefix[i] == true) prefix[i] = Json::object();  // xgrammar takes objects only
    if (prefix[i] != false) continue;
    // No item may stand here: the array ends before it.
    prefix.erase(prefix.begin() + static_cast<std::ptrdiff_t>(i), prefix.end());
    if (!schema.contains("maxItems") || !schema["maxItems"].is_number() ||
        schema["maxItems"].get<double>() > static_cast<double>(i)) {
      schema["maxItems"] = i;
    }
    schema.erase("additionalItems");
    break;
  }
  schema["prefixItems"] = std::move(prefix);
  moves->emplace_back(StrCat(path, "/items/"), StrCat(path, "/prefixItems/"));
  if (schema.contains("additionalItems")) {
    schema["items"] = std::move(schema["additionalItems"]);
    schema.erase("additionalItems");
    moves->emplace_back(StrCat(path, "/additionalItems"), StrCat(path, "/items"));
  }
  return true;
}

// The schema of exactly the JSON value `v`.
Json ExactSchema(const Json& v) {
  if (v.is_object()) {
    Json properties = Json::object();
    Json required = Json::array();
    for (const auto& [key, value] : v.items()) {
      properties[key] = ExactSchema(value);
      required.push_back(key);
    }
    Json s = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
    if (!required.empty()) s["required"] = required;
    return s;
  }
  if (v.is_array()) {
    Json items = Json::array();
    for (const Json& item : v) items.push_back(ExactSchema(item));
    if (items.empty()) return {{"type", "array"}, {"maxItems", 0}};
    return {
        {"type", "array"}, {"prefixItems", items}, {"items", false}, {"minItems", items.size()}};
  }
  return {{"const", v}};
}

// The bytes of `j` as compact JSON text.
int64_t TextBytes(const Json& j) {
  return static_cast<int64_t>(j.dump(-1, ' ', false, Json::error_handler_t::replace).size());
}

// "const" / "enum" with an object or array value: "anyOf" of exact schemas
// (a few times the value's size, taken from the budget).
bool RewriteCompoundValues(Json& schema, const std::string& path, GrowthBudget* budget) {
  if (schema.contains("anyOf")) return false;
  if (schema.contains("const") && schema["const"].is_structured()) {
    Json branches = Json::array({ExactSchema(schema["const"])});
    if (budget != nullptr &&
        !budget->Take(TextBytes(branches) - TextBytes(schema["const"]), path)) {
      return false;
    }
    schema["anyOf"] = std::move(branches);
    schema.erase("const");
    return true;
  }
  if (!schema.contains("enum") || !schema["enum"].is_array()) return false;
  const Json& values = schema["enum"];
  bool compound = false;
  for (const Json& v : values) compound = compound || v.is_structured();
  if (!compound) return false;
  Json branches = Json::array();
  Json scalars = Json::array();
  for (const Json& v : values) {
    if (v.is_structured()) {
      branches.push_back(ExactSchema(v));
    } else {
      scalars.push_back(v);
    }
  }
  if (!scalars.empty()) branches.push_back({{"enum", scalars}});
  if (budget != nullptr && !budget->Take(TextBytes(branches) - TextBytes(values), path)) {
    return false;
  }
  schema["anyOf"] = std::move(branches);
  schema.erase("enum");
  return true;
}

// Keywords beside "anyOf" / "oneOf" into every branch.
// Each branch gets a copy of the siblings: measured before any is made.
bool MergeIntoBranches(Json& schema, std::string_view combinator, const std::string& path,
                       PointerMoves* moves, GrowthBudget* budget) {
  const std::string key(combinator);
  if (!schema.contains(key) || !schema[key].is_array()) return false;
  for (std::string_view other : {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"}) {
    if (other != combinator && schema.contains(std::string(other))) return false;
  }
  const Json siblings = Siblings(schema, combinator);
  if (siblings.empty()) return false;
  const int64_t copies = static_cast<int64_t>(schema[key].size()) - 1;
  if (budget != nullptr && copies > 0 && !budget->Take(copies * TextBytes(siblings), path)) {
    return false;
  }
  Json branches = Json::array();
  for (const Json& branch : schema[key]) {
    if (branch == false) continue;  // never valid, with or without the siblings
    Json merged;
    if (branch == true) {
      merged = siblings;
    } else if (!branch.is_object() || !Merge(branch, siblings, &merged)) {
      return false;
    }
    branches.push_back(std::move(merged));
  }
  if (branches.empty()) return false;  // nothing valid: xgrammar says so
  schema[key] = std::move(branches);
  EraseSiblings(schema, siblings);
  for (const auto& [k, v] : siblings.items()) {
    moves->emplace_back(StrCat(path, "/", PointerToken(k)),
                        StrCat(path, "/", combinator, "/0/", PointerToken(k)));
  }
  return true;
}

// The members of "allOf" (and the keywords beside it) into one schema.
bool MergeAllOf(Json& schema, const std::string& path, PointerMoves* moves) {
  if (!schema.contains("allOf") || !schema["allOf"].is_array()) return false;
  Json merged = Siblings(schema, "allOf");
  for (const Json& member : schema["allOf"]) {
    if (member == true) continue;
    if (!member.is_object()) return false;
    // A member's own $defs would lose the place their "$ref"s name.
    if (member.contains("$defs") || member.contains("definitions")) return false;
    Json next;
    if (!Merge(merged, Siblings(member, ""), &next)) return false;
    merged = std::move(next);
  }
  for (size_t i = 0; i < schema["allOf"].size(); ++i) {
    if (!schema["allOf"][i].is_object()) continue;
    for (const auto& [k, v] : schema["allOf"][i].items()) {
      moves->emplace_back(StrCat(path, "/allOf/", i, "/", PointerToken(k)),
                          StrCat(path, "/", PointerToken(k)));
    }
  }
  EraseSiblings(schema, Siblings(schema, "allOf"));
  schema.erase("allOf");
  for (auto& [key, value] : merged.items()) schema[key] = value;
  return true;
}

// A JSON Schema regex (found anywhere in the string) as a whole-string one.
std::string Unanchored(const std::string& pattern) {
  const bool starts = !pattern.empty() && pattern.front() == '^';
  size_t backslashes = 0;
  for (size_t i = pattern.size() - 1; i > 0 && pattern[i - 1] == '\\'; --i) ++backslashes;
  const bool ends =
      pattern.size() > (starts ? 1u : 0u) && pattern.back() == '$' && backslashes % 2 == 0;
  if (starts && ends) return pattern;
  const std::string core =
      pattern.substr(starts ? 1 : 0, pattern.size() - (starts ? 1 : 0) - (ends ? 1 : 0));
  return StrCat("^", starts ? "" : ".*", "(", core, ")", ends ? "" : ".*", "$");
}

bool AnchorPatterns(Json& schema) {
  bool changed = false;
  if (schema.contains("pattern") && schema["pattern"].is_string()) {
    std::string anchored = Unanchored(schema["pattern"].get<std::string>());
    if (anchored != schema["pattern"].get<std::string>()) {
      schema["pattern"] = std::move(anchored);
      changed = true;
    }
  }
  if (schema.contains("patternProperties") && schema["patternProperties"].is_object()) {
    Json renamed = Json::object();
    for (auto& [key, value] : schema["patternProperties"].items()) {
      const std::string anchored = Unanchored(key);
      changed = changed || anchored != key;
      renamed[anchored] = std::move(value);
    }
    schema["patternProperties"] = std::move(renamed);
  }
  return changed;
}

// "propertyNames": true allows every name, false none (xgrammar takes a
// schema object only).
bool RewriteBooleanPropertyNames(Json& schema) {
  if (!schema.contains("propertyNames") || !schema["propertyNames"].is_boolean()) return false;
  if (schema["propertyNames"] == false) schema["maxProperties"] = 0;
  schema.erase("propertyNames");
  return true;
}

// {"minimum": 5} -> every type, so that xgrammar checks the numbers.
bool TypeTypelessSchema(Json& schema) {
  if (schema.contains("type")) return false;
  for (std::string_view k :
       {"$ref", "const", "enum", "anyOf", "oneOf", "allOf", "properties", "additionalProperties",
        "unevaluatedProperties", "items", "prefixItems", "unevaluatedItems"}) {
    if (schema.contains(std::string(k))) return false;
  }
  bool typed_keyword = false;
  for (const auto& [key, value] : schema.items()) typed_keyword = typed_keyword || IsTyped(key);
  if (!typed_keyword) return false;
  schema["type"] = Json::array({"null", "boolean", "number", "string", "array", "object"});
  return true;
}

}  // namespace

std::string PointerToken(std::string_view key) {
  std::string token;
  for (char c : key) {
    if (c == '~') {
      token += "~0";
    } else if (c == '/') {
      token += "~1";
    } else {
      token += c;
    }
  }
  return token;
}

bool GrowthBudget::Take(int64_t bytes, const std::string& path) {
  if (bytes > bytes_left) {
    if (!exceeded_at.has_value()) exceeded_at = path;
    return false;
  }
  bytes_left -= std::max<int64_t>(bytes, 0);
  return true;
}

bool RewriteNode(Json& schema, const std::string& path, PointerMoves* moves, GrowthBudget* budget) {
  if (!schema.is_object()) return false;
  bool changed = RewriteDraft7Items(schema, path, moves);
  changed = AnchorPatterns(schema) || changed;
  changed = RewriteBooleanPropertyNames(schema) || changed;
  // Each step may enable another (a const becomes an anyOf whose siblings
  // then move in); a few rounds reach the fixed point.
  for (int round = 0; round < 4; ++round) {
    bool now = RewriteCompoundValues(schema, path, budget);
    now = MergeAllOf(schema, path, moves) || now;
    now = MergeIntoBranches(schema, "anyOf", path, moves, budget) || now;
    now = MergeIntoBranches(schema, "oneOf", path, moves, budget) || now;
    now = TypeTypelessSchema(schema) || now;
    if (!now) break;
    changed = true;
  }
  return changed;
}

void ApplyPointerMoves(Json& root, const PointerMoves& moves) {
  if (moves.empty()) return;
  std::vector<Json*> stack = {&root};
  while (!stack.empty()) {
    Json* node = stack.back();
    stack.pop_back();
    if (node->is_object()) {
      if (auto it = node->find("$ref"); it != node->end() && it->is_string()) {
        std::string ref = it->get<std::string>();
        for (const auto& [from, to] : moves) {
          const std::string prefix = "#" + from;
          if (ref.rfind(prefix, 0) == 0) ref = "#" + to + ref.substr(prefix.size());
        }
        *it = ref;
      }
      for (auto& [key, value] : node->items()) stack.push_back(&value);
    } else if (node->is_array()) {
      for (Json& value : *node) stack.push_back(&value);
    }
  }
}

}  // namespace llm::constrain
