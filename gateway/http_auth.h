// The gateway's bearer token on the HTTP side (--http_auth_token_file): every
// request but GET /health and GET /metrics must carry
// `Authorization: Bearer <token>`, else it is answered 401 in OpenAI's error
// shape (code "invalid_api_key"). /health is exempt for probes and load
// balancers; /metrics as the services' metrics port is (plain, no token: it
// holds counters, no text). The presented token is compared in constant time
// (in the expected token's length) and never echoed.
#ifndef LLM_GATEWAY_HTTP_AUTH_H_
#define LLM_GATEWAY_HTTP_AUTH_H_

#include <optional>
#include <string>
#include <string_view>

#include "gateway/openai_api.h"

namespace llm::gateway {

// Threads: immutable after construction; Check may be called concurrently.
class HttpAuth {
 public:
  // An empty token: no request needs one.
  explicit HttpAuth(std::string token) : token_(std::move(token)) {}

  bool enabled() const { return !token_.empty(); }

  // Whether `path` (the request's path, without the query) is served without
  // a token: /health and /metrics.
  static bool Exempt(std::string_view path);

  // nullopt when the request may proceed: no token configured, an exempt
  // path, or `authorization` (the Authorization header's value; nullptr when
  // absent) is "Bearer <token>" (the scheme in any case, blanks around the
  // token ignored). Otherwise the 401 to send; its message names neither the
  // expected nor the presented token.
  std::optional<ApiError> Check(std::string_view path, const char* authorization) const;

 private:
  const std::string token_;
};

// True when `a` and `b` are equal, in time that depends on the length of `b`
// (the secret) only, not on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_HTTP_AUTH_H_
