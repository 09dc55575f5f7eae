#include "client/tools/tool_constraint.h"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

const std::vector<ToolSpec> kTools = {
    {"get_weather", "", R"({"type": "object", "properties": {"city": {"type": "string"}}})", ""},
    {"get_time", "", "", ""},
};

Json Constraint(ToolSyntax syntax, ToolChoice choice, ControlTokenId special = nullptr) {
  absl::StatusOr<std::optional<std::string>> c =
      ToolCallConstraint(syntax, kTools, choice, special);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok() || !c->has_value()) return Json();
  Json j = Json::parse(**c);
  EXPECT_EQ(j["type"], "structural_tag");
  return j["format"];
}

TEST(ToolConstraintTest, HermesAutoIsTriggeredByTheMarker) {
  const Json f = Constraint(ToolSyntax::kHermes, {ToolChoiceMode::kAuto, "", true});
  EXPECT_EQ(f["type"], "triggered_tags");
  EXPECT_EQ(f["triggers"], Json::array({"<tool_call>"}));
  EXPECT_EQ(f["at_least_one"], false);
  EXPECT_EQ(f["stop_after_first"], false);
  ASSERT_EQ(f["tags"].size(), 2u);
  EXPECT_EQ(f["tags"][0]["begin"], "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(f["tags"][0]["content"]["json_schema"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(f["tags"][0]["end"], "}\n</tool_call>");
  EXPECT_EQ(f["tags"][1]["content"]["json_schema"], Json({{"type", "object"}}));
}

TEST(ToolConstraintTest, RequiredAndNamedFunction) {
  const Json required = Constraint(ToolSyntax::kHermes, {ToolChoiceMode::kRequired, "", false});
  EXPECT_EQ(required["at_least_one"], true);
  EXPECT_EQ(required["stop_after_first"], true);
  EXPECT_EQ(required["tags"].size(), 2u);
  const Json named = Constraint(ToolSyntax::kHermes, {ToolChoiceMode::kFunction, "get_time", true});
  EXPECT_EQ(named["at_least_one"], true);
  EXPECT_EQ(named["stop_after_first"], true);
  ASSERT_EQ(named["tags"].size(), 1u);
  EXPECT_THAT(named["tags"][0]["begin"].get<std::string>(), HasSubstr("\"get_time\""));
  absl::StatusOr<std::optional<std::string>> missing =
      ToolCallConstraint(ToolSyntax::kHermes, kTools, {ToolChoiceMode::kFunction, "nope", true});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ToolConstraintTest, NothingToConstrain) {
  for (ToolSyntax s : {ToolSyntax::kHermes, ToolSyntax::kLlama3, ToolSyntax::kPythonic}) {
    EXPECT_EQ(*ToolCallConstraint(s, kTools, {ToolChoiceMode::kNone, "", true}), std::nullopt);
  }
  EXPECT_EQ(*ToolCallConstraint(ToolSyntax::kLlama3, kTools, {}), std::nullopt);
  EXPECT_EQ(*ToolCallConstraint(ToolSyntax::kPythonic, kTools, {}), std::nullopt);
  EXPECT_EQ(*ToolCallConstraint(ToolSyntax::kHermes, {}, {ToolChoiceMode::kRequired, "", true}),
            std::nullopt);
  EXPECT_EQ(ToolCallConstraint(ToolSyntax::kPythonic, kTools, {ToolChoiceMode::kRequired, "", true})
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ToolCallConstraint(ToolSyntax::kNone, kTools, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ToolConstraintTest, Llama3RequiredIsTheWholeAnswer) {
  const Json f = Constraint(ToolSyntax::kLlama3, {ToolChoiceMode::kRequired, "", true});
  EXPECT_EQ(f["type"], "or");
  ASSERT_EQ(f["elements"].size(), 2u);
  EXPECT_EQ(f["elements"][0]["begin"], "{\"name\": \"get_weather\", \"parameters\": ");
  EXPECT_EQ(f["elements"][0]["end"], "}");
  const Json one =
      Constraint(ToolSyntax::kLlama3, {ToolChoiceMode::kFunction, "get_weather", true});
  EXPECT_EQ(one["type"], "tag");
}

TEST(ToolConstraintTest, MistralSpecialTokenMarker) {
  const auto special = [](std::string_view t) {
    return t == "[TOOL_CALLS]" ? std::optional<int32_t>(5) : std::nullopt;
  };
  const Json f = Constraint(ToolSyntax::kMistral, {ToolChoiceMode::kAuto, "", true}, special);
  EXPECT_EQ(f["type"], "token_triggered_tags");
  EXPECT_EQ(f["trigger_tokens"], Json::array({5}));
  ASSERT_EQ(f["tags"].size(), 1u);
  const Json& tag = f["tags"][0];
  EXPECT_EQ(tag["begin"], Json({{"type", "token"}, {"token", 5}}));
  EXPECT_EQ(tag["content"]["elements"][0], Json({{"type", "const_string"}, {"value", "["}}));
  const Json& list = tag["content"]["elements"][1];
  EXPECT_EQ(list["type"], "tags_with_separator");
  EXPECT_EQ(list["separator"], ", ");
  EXPECT_EQ(list["tags"][0]["begin"], "{\"name\": \"get_weather\", \"arguments\": ");
  EXPECT_EQ(tag["end"], "]");
  // Not a special token: a string trigger.
  const Json text = Constraint(ToolSyntax::kMistral, {ToolChoiceMode::kRequired, "", true});
  EXPECT_EQ(text["type"], "triggered_tags");
  EXPECT_EQ(text["tags"][0]["begin"], "[TOOL_CALLS][");
}

TEST(ToolConstraintTest, ToolCallTokensAroundTheList) {
  const auto special = [](std::string_view t) {
    return t == "<|tool_call|>"    ? std::optional<int32_t>(7)
           : t == "<|/tool_call|>" ? std::optional<int32_t>(8)
                                   : std::nullopt;
  };
  const Json f = Constraint(ToolSyntax::kToolCall, {ToolChoiceMode::kRequired, "", true}, special);
  EXPECT_EQ(f["type"], "token_triggered_tags");
  const Json& tag = f["tags"][0];
  EXPECT_EQ(tag["begin"], Json({{"type", "token"}, {"token", 7}}));
  EXPECT_EQ(tag["end"], Json({{"type", "token"}, {"token", 8}}));
  EXPECT_EQ(tag["content"]["elements"].back(), Json({{"type", "const_string"}, {"value", "]"}}));
}

}  // namespace
}  // namespace llm::client
