#include "gateway/api_error.h"

namespace llm::gateway {

using nlohmann::json;

ApiError BadParam(std::string_view param, std::string_view message) {
  ApiError e;
  e.http_status = 400;
  e.message = std::string(message);
  e.param = std::string(param);
  return e;
}

nlohmann::json ErrorJson(const ApiError& error) {
  json e;
  e["message"] = error.message;
  e["type"] = error.type;
  e["param"] = error.param.empty() ? json() : json(error.param);
  e["code"] = error.code.empty() ? json() : json(error.code);
  return json{{"error", e}};
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace llm::gateway
