// libFuzzer target: the input is an HTTP request body, as a client sends it
// to any of the gateway's JSON endpoints. It is parsed as a chat, a
// completions, a /tokenize and a /detokenize request (openai_request.h),
// and each error is written as OpenAI's error JSON. Any crash, hang,
// sanitizer report or unbounded allocation is a bug, and so is an error
// message longer than 1 KiB (a message must never echo a client's value
// unbounded); errors themselves are expected.
// Seeds: one body of each kind (seeds/openai_request_fuzzer/).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/api_error.h"
#include "gateway/openai_request.h"

namespace {

using llm::gateway::ApiError;

void Check(const std::optional<ApiError>& e) {
  if (!e.has_value()) return;
  if (e->http_status != 400 || e->message.empty() || e->message.size() > 1024) std::abort();
  // Written as the gateway writes it (invalid UTF-8 replaced, never a throw).
  if (llm::gateway::Dump(llm::gateway::ErrorJson(*e)).empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  llm::gateway::RequestLimits limits;
  llm::gateway::ChatRequest chat;
  Check(llm::gateway::ParseChatRequest(body, limits, &chat));
  llm::gateway::CompletionRequest completion;
  Check(llm::gateway::ParseCompletionRequest(body, limits, &completion));
  llm::gateway::TokenizeRequest tokenize;
  Check(llm::gateway::ParseTokenizeRequest(body, limits, &tokenize));
  llm::gateway::DetokenizeRequest detokenize;
  Check(llm::gateway::ParseDetokenizeRequest(body, &detokenize));
  return 0;
}
