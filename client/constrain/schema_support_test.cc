#include "client/constrain/schema_support.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace llm::constrain {
namespace {

using ::testing::HasSubstr;

std::string Refusal(const std::string& schema) {
  auto s = PrepareSchema(schema, /*lenient=*/false);
  EXPECT_FALSE(s.ok()) << schema;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(SchemaSupportTest, PassesWhatXgrammarEnforcesUnchanged) {
  const std::string schema =
      R"({"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"]},
          "b": {"$ref": "#/$defs/b", "description": "annotations are fine"},
          "c": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null}},
          "$defs": {"b": {"type": "array", "items": {"type": "number"}, "uniqueItems": false}}})";
  auto prepared = PrepareSchema(schema, false);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(*prepared, schema);
  EXPECT_TRUE(PrepareSchema("true", false).ok());
}

TEST(SchemaSupportTest, RefusesKeywordsXgrammarDoesNotEnforce) {
  EXPECT_THAT(Refusal(R"({"not": {"type": "string"}})"), HasSubstr("'not' at /:"));
  EXPECT_THAT(Refusal(R"({"type": "array", "uniqueItems": true})"), HasSubstr("'uniqueItems'"));
  EXPECT_THAT(Refusal(R"({"properties": {"a/b": {"if": {}}}})"),
              HasSubstr("'if' at /properties/a~1b"));
  EXPECT_THAT(Refusal(R"({"$defs": {"x": {"type": "array", "contains": {}}}})"),
              HasSubstr("'contains' at /$defs/x"));
  EXPECT_THAT(Refusal(R"({"type": "object", "dependencies": {"a": ["b"]}})"),
              HasSubstr("'dependencies'"));
}

TEST(SchemaSupportTest, RefusesKeywordsXgrammarIgnoresBesideAnother) {
  // What the rewrites cannot move into the branches.
  EXPECT_THAT(Refusal(R"({"type": "object", "anyOf": [{"type": "object", "$ref": "#"}]})"),
              HasSubstr("'type' at /: beside 'anyOf'"));
  EXPECT_THAT(Refusal(R"({"$ref": "#/$defs/a", "maxItems": 2, "$defs": {"a": {}}})"),
              HasSubstr("'maxItems' at /: beside '$ref'"));
  EXPECT_THAT(Refusal(R"({"enum": [1, "a"], "type": "string"})"),
              HasSubstr("value not of that type"));
  EXPECT_TRUE(PrepareSchema(R"({"enum": [1, 2.0], "type": "integer"})", false).ok());
  EXPECT_TRUE(PrepareSchema(R"({"const": "a", "type": ["string", "null"]})", false).ok());
}

TEST(SchemaSupportTest, Draft7IgnoresRefSiblings) {
  EXPECT_TRUE(PrepareSchema(R"({"$schema": "http://json-schema.org/draft-07/schema#",
                                "$ref": "#/definitions/a", "maxItems": 2,
                                "definitions": {"a": {}}})",
                            false)
                  .ok());
}

TEST(SchemaSupportTest, RefusesPatternPropertiesXgrammarChecksAgainstOneSchema) {
  EXPECT_THAT(Refusal(R"({"type": "object", "patternProperties": {"^a": {}, "^b": {}}})"),
              HasSubstr("more than one pattern"));
  EXPECT_THAT(Refusal(R"({"type": "object", "properties": {"a": {}},
                         "patternProperties": {"^a": {}}})"),
              HasSubstr("beside \"properties\""));
  EXPECT_TRUE(PrepareSchema(R"({"type": "object", "patternProperties": {"^a": {}}})", false).ok());
}

TEST(SchemaSupportTest, RefusesRemoteRefsAndAllOfItCannotMerge) {
  EXPECT_THAT(Refusal(R"({"$ref": "http://example.com/a.json"})"),
              HasSubstr("'$ref' at /: 'http://example.com/a.json': only references into"));
  EXPECT_THAT(Refusal(R"({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}})"),
              HasSubstr("at /properties/a"));
  EXPECT_THAT(Refusal(R"({"allOf": [{"maxLength": 3}, {"maxLength": 4}]})"),
              HasSubstr("'allOf' at /: members that share keywords"));
}

TEST(SchemaSupportTest, LenientRefusesNothing) {
  EXPECT_TRUE(PrepareSchema(R"({"not": {}, "minimum": 3})", true).ok());
}

TEST(SchemaSupportTest, RewritesAndFixesTheRefsIntoWhatMoved) {
  auto prepared = PrepareSchema(
      R"({"type": "array", "items": [{"type": "string"}, {"$ref": "#/items/0"}]})", false);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(*prepared,
            R"({"type":"array","prefixItems":[{"type":"string"},{"$ref":"#/prefixItems/0"}]})");
}

// Rewrites grow a schema (siblings copied into each branch, compound
// values spelled out) within max_bytes; the refusal names where the budget
// ran out, and nothing past it is copied.
TEST(SchemaSupportTest, RewritesStayWithinMaxBytes) {
  const std::string siblings =
      R"({"type": "object", "properties": {"x": {"minLength": 3, "maxLength": 9,
          "anyOf": [{"type": "string"}, {"type": "null"}, {"type": "integer"}]}}})";
  ASSERT_TRUE(PrepareSchema(siblings, false, 1000).ok());
  auto small = PrepareSchema(siblings, false, siblings.size() + 20);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(small.status().message(), HasSubstr("at /properties/x would make it more than"));
  const std::string compound = R"({"enum": [{"a": [1, 2, 3]}, {"b": {"c": null}}]})";
  ASSERT_TRUE(PrepareSchema(compound, false, 1000).ok());
  EXPECT_THAT(PrepareSchema(compound, false, 100).status().message(), HasSubstr("at /"));
  // Small additions (an anchored pattern) are checked on the result.
  const std::string pattern = R"({"type": "string", "pattern": "ab"})";
  EXPECT_THAT(PrepareSchema(pattern, false, pattern.size()).status().message(),
              HasSubstr("the limit is"));
}

TEST(SchemaSupportTest, RefusesWhatIsNotASchema) {
  EXPECT_THAT(PrepareSchema("{", false).status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(PrepareSchema("3", false).status().message(), HasSubstr("not number"));
}

}  // namespace
}  // namespace llm::constrain
