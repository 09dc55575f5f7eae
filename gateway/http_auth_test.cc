#include "gateway/http_auth.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kToken[] = "sk-s3cret-token";

TEST(HttpAuthTest, WithoutATokenEverythingPasses) {
  const HttpAuth auth("");
  EXPECT_FALSE(auth.enabled());
  EXPECT_FALSE(auth.Check("/v1/chat/completions", nullptr).has_value());
  EXPECT_FALSE(auth.Check("/v1/models", "Bearer whatever").has_value());
}

TEST(HttpAuthTest, TheRightTokenPasses) {
  const HttpAuth auth(kToken);
  EXPECT_TRUE(auth.enabled());
  EXPECT_FALSE(auth.Check("/v1/chat/completions", "Bearer sk-s3cret-token").has_value());
  // The scheme in any case (RFC 7235), blanks around the token.
  EXPECT_FALSE(auth.Check("/v1/models", "bearer sk-s3cret-token").has_value());
  EXPECT_FALSE(auth.Check("/v1/models", "BEARER   sk-s3cret-token  ").has_value());
  EXPECT_FALSE(auth.Check("/tokenize", "Bearer\tsk-s3cret-token").has_value());
}

TEST(HttpAuthTest, HealthAndMetricsNeedNoToken) {
  const HttpAuth auth(kToken);
  EXPECT_FALSE(auth.Check("/health", nullptr).has_value());
  EXPECT_FALSE(auth.Check("/metrics", nullptr).has_value());
  EXPECT_FALSE(auth.Check("/metrics", "Bearer wrong").has_value());
  // Only those exact paths.
  EXPECT_TRUE(auth.Check("/health/", nullptr).has_value());
  EXPECT_TRUE(auth.Check("/healthz", nullptr).has_value());
  EXPECT_TRUE(auth.Check("/v1/health", nullptr).has_value());
  EXPECT_TRUE(auth.Check("/metrics/x", nullptr).has_value());
}

TEST(HttpAuthTest, MissingOrWrongTokenIs401InOpenAiShape) {
  const HttpAuth auth(kToken);
  for (const char* header :
       {static_cast<const char*>(nullptr), "", "Bearer", "Bearer ", "Basic c2stczNjcmV0LXRva2Vu",
        "sk-s3cret-token", "Bearersk-s3cret-token", "Bearer sk-s3cret-toke",
        "Bearer sk-s3cret-token2", "Bearer SK-S3CRET-TOKEN", "Bearer sk-s3cret-token x",
        "Token sk-s3cret-token"}) {
    const std::optional<ApiError> e = auth.Check("/v1/models", header);
    ASSERT_TRUE(e.has_value()) << (header == nullptr ? "(none)" : header);
    EXPECT_EQ(e->http_status, 401);
    const nlohmann::json j = ErrorJson(*e);
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["code"], "invalid_api_key");
    EXPECT_TRUE(j["error"]["param"].is_null());
    EXPECT_FALSE(e->message.empty());
    // Neither the expected token nor what was presented is echoed.
    EXPECT_THAT(e->message, Not(HasSubstr("s3cret")));
    EXPECT_THAT(e->message, Not(HasSubstr("c2stczNj")));
  }
  // Unknown paths too: no probing for endpoints without the key.
  EXPECT_TRUE(auth.Check("/v1/nothing", nullptr).has_value());
}

TEST(HttpAuthTest, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abcd", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", ""));
  // A presented value that is the secret followed by NULs is not the secret.
  EXPECT_FALSE(ConstantTimeEquals(std::string("abc\0", 4), "abc"));
}

}  // namespace
}  // namespace llm::gateway
