#include "gateway/api_error.h"

#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

TEST(ApiErrorTest, ErrorShape) {
  ApiError e = BadParam("top_p", "top_p must be in (0, 1]");
  nlohmann::json j = ErrorJson(e);
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["code"].is_null());
  EXPECT_EQ(j["error"]["message"], "top_p must be in (0, 1]");
}

}  // namespace
}  // namespace llm::gateway
