// Groups of JSON Schema keywords, as the schema checks and rewrites
// (schema_support.h, schema_rewrite.h) need them.
#ifndef LLM_CLIENT_CONSTRAIN_SCHEMA_KEYWORDS_H_
#define LLM_CLIENT_CONSTRAIN_SCHEMA_KEYWORDS_H_

#include <string_view>

namespace llm::constrain {

// Keywords that say nothing about which instances are valid: annotations,
// and the content keywords (annotations since draft 2019-09).
inline bool IsAnnotation(std::string_view key) {
  for (std::string_view k : {"title", "description", "default", "examples", "deprecated",
                             "readOnly", "writeOnly", "$comment", "$schema", "$id", "id", "$anchor",
                             "contentMediaType", "contentEncoding", "contentSchema"}) {
    if (k == key) return true;
  }
  return false;
}

// Validation keywords that apply to instances of some types only (numbers,
// strings, arrays or objects), and that xgrammar ignores in a schema it
// reads as any value.
inline bool IsTyped(std::string_view key) {
  for (std::string_view k : {"minimum",           "maximum",          "exclusiveMinimum",
                             "exclusiveMaximum",  "multipleOf",       "minLength",
                             "maxLength",         "pattern",          "format",
                             "required",          "minProperties",    "maxProperties",
                             "patternProperties", "propertyNames",    "dependencies",
                             "dependentRequired", "dependentSchemas", "minItems",
                             "maxItems",          "uniqueItems",      "contains",
                             "minContains",       "maxContains",      "additionalItems"}) {
    if (k == key) return true;
  }
  return false;
}

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_SCHEMA_KEYWORDS_H_
