#include "client/constrain/schema_rewrite.h"

#include <gtest/gtest.h>

#include <string>

namespace llm::constrain {
namespace {

// The node rewritten (not its children), compact.
std::string Rewritten(const std::string& schema, PointerMoves* moves = nullptr) {
  SchemaJson json = SchemaJson::parse(schema);
  PointerMoves local;
  RewriteNode(json, "/at", moves != nullptr ? moves : &local);
  return json.dump();
}

TEST(SchemaRewriteTest, Draft7TuplesBecomePrefixItems) {
  PointerMoves moves;
  EXPECT_EQ(Rewritten(R"({"type": "array", "items": [{"type": "string"}, true],
                          "additionalItems": false})",
                      &moves),
            R"({"type":"array","prefixItems":[{"type":"string"},{}],"items":false})");
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].first, "/at/items/");
  EXPECT_EQ(moves[0].second, "/at/prefixItems/");
  // A false item ends the array there.
  EXPECT_EQ(Rewritten(R"({"type": "array", "items": [{}, false, {}]})"),
            R"({"type":"array","maxItems":1,"prefixItems":[{}]})");
  // additionalItems beside a schema-form items means nothing (draft 7).
  EXPECT_EQ(Rewritten(R"({"type": "array", "items": {}, "additionalItems": false})"),
            R"({"type":"array","items":{}})");
}

TEST(SchemaRewriteTest, SiblingsMoveIntoBranches) {
  EXPECT_EQ(Rewritten(R"({"type": "object", "title": "t", "anyOf": [{"required": ["a"]},
                          {"required": ["b"]}, false, true]})"),
            R"({"title":"t","anyOf":[{"required":["a"],"type":"object"},)"
            R"({"required":["b"],"type":"object"},{"type":"object"}]})");
  // Types intersect.
  EXPECT_EQ(Rewritten(R"({"type": ["number", "string"], "oneOf": [{"type": "integer"},
                          {"type": ["string", "null"]}]})"),
            R"({"oneOf":[{"type":"integer"},{"type":"string"}]})");
  // additionalProperties beside properties of a branch: not the same schema.
  const std::string kept = R"({"additionalProperties":false,"anyOf":[{"properties":{"a":{}}}]})";
  EXPECT_EQ(Rewritten(kept), kept);
  const std::string ref = R"({"type":"object","anyOf":[{"$ref":"#/$defs/a"}]})";
  EXPECT_EQ(Rewritten(ref), ref);
}

TEST(SchemaRewriteTest, AllOfMergesWhereItsMembersDoNotOverlap) {
  EXPECT_EQ(Rewritten(R"({"allOf": [{"type": "string"}, {"maxLength": 3}], "minLength": 1})"),
            R"({"minLength":1,"type":"string","maxLength":3})");
  const std::string overlap = R"({"allOf":[{"maxLength":3},{"maxLength":4}]})";
  EXPECT_EQ(Rewritten(overlap), overlap);
}

TEST(SchemaRewriteTest, CompoundConstsBecomeExactSchemas) {
  EXPECT_EQ(Rewritten(R"({"const": {"a": [1, {}]}})"),
            R"({"anyOf":[{"type":"object","properties":{"a":{"type":"array","prefixItems":)"
            R"([{"const":1},{"type":"object","properties":{},"additionalProperties":false}],)"
            R"("items":false,"minItems":2}},"additionalProperties":false,"required":["a"]}]})");
  EXPECT_EQ(Rewritten(R"({"enum": [[], "x", 2]})"),
            R"({"anyOf":[{"type":"array","maxItems":0},{"enum":["x",2]}]})");
  EXPECT_EQ(Rewritten(R"({"enum": ["x", 2]})"), R"({"enum":["x",2]})");
}

TEST(SchemaRewriteTest, PatternsMatchAnywhere) {
  EXPECT_EQ(Rewritten(R"({"type": "string", "pattern": "a|b"})"),
            R"({"type":"string","pattern":"^.*(a|b).*$"})");
  EXPECT_EQ(Rewritten(R"({"type": "string", "pattern": "^ab"})"),
            R"({"type":"string","pattern":"^(ab).*$"})");
  EXPECT_EQ(Rewritten(R"({"type": "string", "pattern": "^[0-9]+$"})"),
            R"({"type":"string","pattern":"^[0-9]+$"})");
  EXPECT_EQ(Rewritten(R"({"type": "string", "pattern": "a\\$"})"),
            R"({"type":"string","pattern":"^.*(a\\$).*$"})");
  EXPECT_EQ(Rewritten(R"({"type": "object", "patternProperties": {"^x": {}}})"),
            R"({"type":"object","patternProperties":{"^(x).*$":{}}})");
}

TEST(SchemaRewriteTest, TypelessSchemasGetEveryType) {
  EXPECT_EQ(Rewritten(R"({"minimum": 5})"),
            R"({"minimum":5,"type":["null","boolean","number","string","array","object"]})");
  // Read as an object by xgrammar, and left so.
  EXPECT_EQ(Rewritten(R"({"properties": {}, "required": ["a"]})"),
            R"({"properties":{},"required":["a"]})");
  EXPECT_EQ(Rewritten(R"({"description": "anything"})"), R"({"description":"anything"})");
  // propertyNames as a boolean.
  EXPECT_EQ(Rewritten(R"({"type": "object", "propertyNames": false})"),
            R"({"type":"object","maxProperties":0})");
}

TEST(SchemaRewriteTest, MovedPointersFollow) {
  SchemaJson root = SchemaJson::parse(
      R"({"a": {"$ref": "#/x/items/1"}, "b": [{"$ref": "#/x/additionalItems"}], "c": {"$ref": "#/y"}})");
  ApplyPointerMoves(root, {{"/x/items/", "/x/prefixItems/"}, {"/x/additionalItems", "/x/items"}});
  EXPECT_EQ(root.dump(),
            R"({"a":{"$ref":"#/x/prefixItems/1"},"b":[{"$ref":"#/x/items"}],"c":{"$ref":"#/y"}})");
  EXPECT_EQ(PointerToken("a/b~c"), "a~1b~0c");
}

}  // namespace
}  // namespace llm::constrain
