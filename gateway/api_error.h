// OpenAI's error answer, and JSON text out.
//
// Threads: free functions, no state. No gRPC, no civetweb.
#ifndef LLM_GATEWAY_API_ERROR_H_
#define LLM_GATEWAY_API_ERROR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace llm::gateway {

// An error answer: the HTTP status and OpenAI's error object.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" = null
  std::string code;   // "" = null
};

ApiError BadParam(std::string_view param, std::string_view message);
// {"error": {...}}.
nlohmann::json ErrorJson(const ApiError& error);

// JSON text that never throws on invalid UTF-8 (replaced with U+FFFD).
std::string Dump(const nlohmann::json& j);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_API_ERROR_H_
