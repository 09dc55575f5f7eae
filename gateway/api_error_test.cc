#include "gateway/api_error.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ApiErrorTest, ErrorShape) {
  ApiError e = BadParam("top_p", "top_p must be in (0, 1]");
  nlohmann::json j = ErrorJson(e);
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j["error"]["message"], "top_p must be in (0, 1]");
}

std::string Nested(int depth) {
  return std::string(static_cast<size_t>(depth), '[') +
         std::string(static_cast<size_t>(depth), ']');
}

TEST(ParseJsonBodyTest, ParsesAValue) {
  json j;
  ASSERT_EQ(ParseJsonBody(R"( {"a": [1, 2.5, "x", null, true, {"b": {}}], "a2": -3} )", &j),
            std::nullopt);
  EXPECT_EQ(j, json::parse(R"({"a": [1, 2.5, "x", null, true, {"b": {}}], "a2": -3})"));
  ASSERT_EQ(ParseJsonBody(R"({"k": 1, "k": 2})", &j), std::nullopt);
  EXPECT_EQ(j["k"], 2) << "a repeated key: the last wins, as nlohmann's own parser";
  ASSERT_EQ(ParseJsonBody("\"s\"", &j), std::nullopt);
  EXPECT_EQ(j, "s");
}

TEST(ParseJsonBodyTest, DepthIsBounded) {
  json j;
  EXPECT_EQ(ParseJsonBody(Nested(kMaxJsonDepth), &j), std::nullopt);
  std::optional<ApiError> e = ParseJsonBody(Nested(kMaxJsonDepth + 1), &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_THAT(e->message, HasSubstr("deeper than 64 levels"));
  e = ParseJsonBody(R"({"a": {"b": [[1]]}})", &j, /*max_depth=*/3);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("deeper than 3 levels"));
}

// Where malformed JSON goes wrong: the byte offset, line and column, and
// nlohmann's reason without the text it read.
TEST(ParseJsonBodyTest, MalformedJsonSaysWhere) {
  json j;
  std::optional<ApiError> e = ParseJsonBody("{not json", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->param, "");
  EXPECT_THAT(e->message, HasSubstr("not valid JSON"));
  EXPECT_THAT(e->message, HasSubstr("at byte offset 2 (line 1, column 3)"));  // "no"
  e = ParseJsonBody("{\n  \"a\": 1,\n  \"b\": tru\n}", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("(line 3, column 11)"));
  EXPECT_THAT(e->message, HasSubstr("invalid literal"));
  e = ParseJsonBody(R"({"a": 1)", &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("unexpected end of input"));
  // An unterminated long string: its text is not quoted back.
  e = ParseJsonBody("{\"a\": \"" + std::string(5000, 'Q'), &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, Not(HasSubstr("QQ")));
  EXPECT_LT(e->message.size(), 400u);
}

TEST(ParseJsonBodyTest, NothingMayFollowTheValue) {
  json j;
  for (const std::string& body :
       {std::string("{} x"), std::string("{}{}"), std::string("{}\0garbage", 10),
        std::string("{}\0", 3), std::string("{\"a\": \0}", 8)}) {
    std::optional<ApiError> e = ParseJsonBody(body, &j);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_THAT(e->message, HasSubstr("not valid JSON")) << body;
  }
  std::optional<ApiError> e = ParseJsonBody(std::string("{}\0garbage", 10), &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("a NUL byte at byte offset 2"));
  // An error before the NUL is that error.
  e = ParseJsonBody(std::string("{x}\0", 4), &j);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("at byte offset 1"));
  EXPECT_EQ(ParseJsonBody("{} \n\t", &j), std::nullopt) << "whitespace may follow";
}

TEST(ParseJsonBodyTest, OrderedKeepsKeyOrder) {
  nlohmann::ordered_json j;
  ASSERT_EQ(ParseJsonBody(R"({"b": 1, "a": {"z": [1, {"y": 2, "x": 3}], "c": null}, "b": 3})", &j),
            std::nullopt);
  EXPECT_EQ(j.dump(), R"({"b":3,"a":{"z":[1,{"y":2,"x":3}],"c":null}})");
  // The same bounds and errors as the unordered parse.
  EXPECT_TRUE(ParseJsonBody(std::string(65, '[') + std::string(65, ']'), &j).has_value());
  EXPECT_TRUE(ParseJsonBody("{} x", &j).has_value());
  EXPECT_TRUE(ParseJsonBody(std::string("{}\0", 3), &j).has_value());
}

// Repeated keys are found through a hash table: an object of 200,000 keys
// (each repeated once) parses in linear time, where ordered_json's own
// operator[] would compare ~10^10 keys.
TEST(ParseJsonBodyTest, OrderedObjectOfManyKeys) {
  std::string body = "{";
  for (int i = 0; i < 200000; ++i) body += "\"k" + std::to_string(i % 100000) + "\": 1,";
  body += "\"end\": 2}";
  nlohmann::ordered_json j;
  ASSERT_EQ(ParseJsonBody(body, &j), std::nullopt);
  EXPECT_EQ(j.size(), 100001u);
  EXPECT_EQ(j.begin().key(), "k0");
  EXPECT_EQ(j.back(), 2);
}

TEST(QuoteForErrorTest, LongValuesAreCut) {
  EXPECT_EQ(QuoteForError("gpt-4"), "'gpt-4'");
  const std::string long_value(1000, 'x');
  EXPECT_EQ(QuoteForError(long_value), "'" + std::string(100, 'x') + "...' (1000 bytes)");
  // Cut at a character's start: 99 x then "é" (2 bytes) across byte 100.
  const std::string accented = std::string(99, 'x') + "\xC3\xA9" + std::string(10, 'y');
  EXPECT_EQ(QuoteForError(accented), "'" + std::string(99, 'x') + "...' (111 bytes)");
  EXPECT_EQ(DescribeForError(json::parse("[[[1]]]")), "an array");
  EXPECT_EQ(DescribeForError(json::parse(R"({"a": [1]})")), "an object");
  EXPECT_EQ(DescribeForError(json(-2)), "-2");
  EXPECT_EQ(DescribeForError(json(1.5)), "1.5");
  EXPECT_EQ(DescribeForError(json("s")), "'s'");
  EXPECT_EQ(DescribeForError(json()), "null");
}

}  // namespace
}  // namespace llm::gateway
