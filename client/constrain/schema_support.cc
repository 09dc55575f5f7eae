#include "client/constrain/schema_support.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "client/constrain/schema_keywords.h"
#include "client/constrain/schema_rewrite.h"
#include "common/strings.h"

namespace llm::constrain {
namespace {

using Json = SchemaJson;

// Keywords xgrammar does not enforce anywhere.
constexpr std::array<std::string_view, 13> kUnenforced = {"not",
                                                          "if",
                                                          "then",
                                                          "else",
                                                          "dependencies",
                                                          "dependentRequired",
                                                          "dependentSchemas",
                                                          "contains",
                                                          "minContains",
                                                          "maxContains",
                                                          "$dynamicRef",
                                                          "$recursiveRef",
                                                          "uniqueItems"};

// xgrammar reads the first of these a schema has, and nothing else of it.
constexpr std::array<std::string_view, 6> kExclusive = {"$ref",  "const", "enum",
                                                        "anyOf", "oneOf", "allOf"};

// Keywords whose value is a map of name -> schema, a schema, or an array of
// schemas.
constexpr std::array<std::string_view, 5> kSchemaMaps = {"properties", "patternProperties", "$defs",
                                                         "definitions", "dependentSchemas"};
constexpr std::array<std::string_view, 11> kSchemaValues = {"additionalProperties",
                                                            "propertyNames",
                                                            "items",
                                                            "additionalItems",
                                                            "contains",
                                                            "not",
                                                            "if",
                                                            "then",
                                                            "else",
                                                            "unevaluatedProperties",
                                                            "unevaluatedItems"};
constexpr std::array<std::string_view, 4> kSchemaArrays = {"allOf", "anyOf", "oneOf",
                                                           "prefixItems"};

template <size_t N>
bool In(const std::array<std::string_view, N>& set, std::string_view key) {
  for (std::string_view k : set) {
    if (k == key) return true;
  }
  return false;
}

absl::Status Unsupported(const std::string& path, std::string_view keyword, std::string_view why) {
  return absl::InvalidArgumentError(StrCat("unsupported JSON Schema keyword '", keyword, "' at ",
                                           path.empty() ? "/" : path, ": ", why));
}

// Whether `value` is an instance of the JSON Schema type `type`.
bool OfType(const Json& value, std::string_view type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    if (value.is_number_integer()) return true;
    if (!value.is_number_float()) return false;
    const double d = value.get<double>();
    return d == static_cast<double>(static_cast<long long>(d));
  }
  return false;
}

bool OfAnyType(const Json& value, const Json& type) {
  if (type.is_string()) return OfType(value, type.get<std::string>());
  if (!type.is_array()) return true;  // xgrammar reports a bad "type"
  for (const Json& t : type) {
    if (t.is_string() && OfType(value, t.get<std::string>())) return true;
  }
  return false;
}

class Walker {
 public:
  // lenient: rewrite only, refuse nothing. The rewrites may grow the
  // schema of `bytes` to at most `limit` bytes.
  Walker(bool ref_siblings_ignored, bool lenient, size_t bytes, size_t limit)
      : ref_siblings_ignored_(ref_siblings_ignored), lenient_(lenient), limit_(limit) {
    budget_.bytes_left =
        limit > bytes ? static_cast<int64_t>(std::min<size_t>(limit - bytes, INT64_MAX)) : 0;
  }

  bool rewritten() const { return rewritten_; }
  const PointerMoves& moves() const { return moves_; }

  // Rewrites and checks the schema at `path` and everything below it.
  absl::Status Walk(Json& schema, const std::string& path) {
    if (!schema.is_object()) return absl::OkStatus();  // booleans; xgrammar reports others
    rewritten_ = RewriteNode(schema, path, &moves_, &budget_) || rewritten_;
    if (budget_.exceeded_at.has_value()) return TooLarge(*budget_.exceeded_at);
    if (!lenient_) {
      if (absl::Status s = CheckHere(schema, path); !s.ok()) return s;
    }
    for (auto& [key, value] : schema.items()) {
      const std::string here = StrCat(path, "/", PointerToken(key));
      if (In(kSchemaMaps, key) && value.is_object()) {
        for (auto& [name, sub] : value.items()) {
          if (absl::Status s = Walk(sub, StrCat(here, "/", PointerToken(name))); !s.ok()) {
            return s;
          }
        }
      } else if (In(kSchemaValues, key)) {
        if (absl::Status s = Walk(value, here); !s.ok()) return s;
      } else if (In(kSchemaArrays, key) && value.is_array()) {
        for (size_t i = 0; i < value.size(); ++i) {
          if (absl::Status s = Walk(value[i], StrCat(here, "/", i)); !s.ok()) return s;
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status CheckHere(const Json& schema, const std::string& path) {
    for (const auto& [key, value] : schema.items()) {
      if (!In(kUnenforced, key)) continue;
      if (key == "uniqueItems" && value == false) continue;
      return Unsupported(path, key, "xgrammar does not enforce it");
    }
    if (schema.contains("$ref") && schema["$ref"].is_string()) {
      const std::string ref = schema["$ref"].get<std::string>();
      if (ref != "#" && ref.rfind("#/", 0) != 0) {
        return Unsupported(
            path, "$ref",
            StrCat("'", ref, "': only references into this schema (#/...) are supported"));
      }
    }
    if (schema.contains("allOf") && schema["allOf"].is_array() && schema["allOf"].size() > 1) {
      return Unsupported(path, "allOf",
                         "members that share keywords (they could not be merged into one schema, "
                         "and xgrammar does not enforce several)");
    }
    // xgrammar checks a property against one of the schemas that apply to
    // its name; JSON Schema against all of them (a name in "properties" that
    // a pattern matches too, a name that two patterns match).
    if (schema.contains("patternProperties") && schema["patternProperties"].is_object()) {
      if (schema["patternProperties"].size() > 1) {
        return Unsupported(path, "patternProperties",
                           "more than one pattern (xgrammar checks a name that two match "
                           "against one of them only)");
      }
      if (schema.contains("properties") && schema["properties"].is_object() &&
          !schema["properties"].empty()) {
        return Unsupported(path, "patternProperties",
                           "beside \"properties\" (xgrammar checks a name that both give a "
                           "schema for against one of them only)");
      }
    }
    // The keyword xgrammar reads alone, and what it would ignore beside it
    // (what the rewrites could not move).
    for (std::string_view first : kExclusive) {
      if (!schema.contains(std::string(first))) continue;
      if (first == "$ref" && ref_siblings_ignored_) return absl::OkStatus();
      for (const auto& [key, value] : schema.items()) {
        if (key == first || IsAnnotation(key) || key == "$defs" || key == "definitions") continue;
        if (key == "type" && (first == "const" || first == "enum")) {
          if (absl::Status s = CheckValuesOfType(schema, first, value, path); !s.ok()) return s;
          continue;
        }
        return Unsupported(path, key, StrCat("beside '", first, "', which xgrammar reads alone"));
      }
      return absl::OkStatus();
    }
    if (schema.contains("type")) return absl::OkStatus();
    for (std::string_view trigger : {"properties", "additionalProperties", "unevaluatedProperties",
                                     "items", "prefixItems", "unevaluatedItems"}) {
      if (schema.contains(std::string(trigger))) return absl::OkStatus();
    }
    for (const auto& [key, value] : schema.items()) {
      if (IsTyped(key)) {
        return Unsupported(path, key,
                           "in a schema without \"type\" (xgrammar reads it as any value)");
      }
    }
    return absl::OkStatus();
  }

  // "type" beside "const" / "enum": every value must be of the type, or
  // xgrammar (which reads only the values) would allow one the type forbids.
  absl::Status CheckValuesOfType(const Json& schema, std::string_view first, const Json& type,
                                 const std::string& path) {
    const Json& values = schema[std::string(first)];
    if (first == "const") {
      if (OfAnyType(values, type)) return absl::OkStatus();
    } else if (values.is_array()) {
      bool all = true;
      for (const Json& v : values) all = all && OfAnyType(v, type);
      if (all) return absl::OkStatus();
    } else {
      return absl::OkStatus();  // xgrammar reports a bad "enum"
    }
    return Unsupported(path, "type", StrCat("beside '", first, "' with a value not of that type"));
  }

  // The budget ran out at `path` (GrowthBudget).
  absl::Status TooLarge(const std::string& path) const {
    return absl::InvalidArgumentError(StrCat(
        "JSON schema: rewriting it into what xgrammar enforces (the keywords beside anyOf / "
        "oneOf copied into every branch, object and array const / enum values spelled out) at ",
        path.empty() ? "/" : path, " would make it more than ", limit_, " bytes, the limit"));
  }

  const bool ref_siblings_ignored_;
  const bool lenient_;
  bool rewritten_ = false;
  PointerMoves moves_;
  GrowthBudget budget_;
  size_t limit_ = 0;
};

// Drafts 3 to 7 ignore every keyword beside "$ref".
bool RefSiblingsIgnored(const Json& root) {
  if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) return false;
  const std::string uri = root["$schema"].get<std::string>();
  for (std::string_view draft : {"draft-03", "draft-04", "draft-06", "draft-07"}) {
    if (uri.find(draft) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::string> PrepareSchema(std::string_view schema, bool lenient, size_t max_bytes) {
  Json root;
  try {
    root = Json::parse(schema);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(StrCat("JSON schema: not valid JSON: ", e.what()));
  }
  if (!root.is_object() && !root.is_boolean()) {
    return absl::InvalidArgumentError(
        StrCat("JSON schema: a schema is an object or a boolean, not ", root.type_name()));
  }
  Walker walker(RefSiblingsIgnored(root), lenient, schema.size(), max_bytes);
  if (absl::Status s = walker.Walk(root, ""); !s.ok()) return s;
  if (!walker.rewritten()) return std::string(schema);
  ApplyPointerMoves(root, walker.moves());
  std::string prepared = root.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (prepared.size() > max_bytes) {
    return absl::InvalidArgumentError(
        StrCat("JSON schema: rewritten into what xgrammar enforces, it is ", prepared.size(),
               " bytes; the limit is ", max_bytes, " bytes"));
  }
  return prepared;
}

}  // namespace llm::constrain
