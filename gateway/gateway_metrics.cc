#include "gateway/gateway_metrics.h"

#include <prometheus/text_serializer.h>

#include <array>

namespace llm::gateway {
namespace {

// The label of a request path: a served endpoint, else "other".
std::string EndpointLabel(std::string_view uri) {
  static constexpr std::array<std::string_view, 9> kEndpoints = {"/v1/chat/completions",
                                                                 "/v1/completions",
                                                                 "/v1/models",
                                                                 "/health",
                                                                 "/tokenize",
                                                                 "/detokenize",
                                                                 "/metrics",
                                                                 "/v1/messages",
                                                                 "/v1/messages/count_tokens"};
  for (std::string_view e : kEndpoints) {
    if (uri == e) return std::string(e);
  }
  if (uri.starts_with("/v1/models/")) return "/v1/models";
  return "other";
}

prometheus::Histogram::BucketBoundaries SecondsBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

}  // namespace

GatewayMetrics::GatewayMetrics(const std::string& model_name)
    : requests_(prometheus::BuildCounter()
                    .Name("llm_gateway_requests_total")
                    .Help("HTTP requests, by endpoint and status code.")
                    .Register(*registry_)),
      seconds_(prometheus::BuildHistogram()
                   .Name("llm_gateway_request_seconds")
                   .Help("Handling time of HTTP requests (streams: to the last event), seconds.")
                   .Register(*registry_)),
      tokens_(prometheus::BuildCounter()
                  .Name("llm_gateway_tokens_total")
                  .Help("Tokens of chat and completions requests, by kind: prompt or completion.")
                  .Register(*registry_)),
      prompt_tokens_(tokens_.Add({{"kind", "prompt"}})),
      completion_tokens_(tokens_.Add({{"kind", "completion"}})),
      active_(prometheus::BuildGauge()
                  .Name("llm_gateway_generations_active")
                  .Help("Chat and completions requests generating now.")
                  .Register(*registry_)
                  .Add({})),
      ttft_(prometheus::BuildHistogram()
                .Name("llm_gateway_time_to_first_token_seconds")
                .Help("From a generating request's arrival to its first token, seconds.")
                .Register(*registry_)
                .Add({}, SecondsBuckets())),
      queued_(prometheus::BuildGauge()
                  .Name("llm_gateway_requests_queued")
                  .Help("Chat and completions requests waiting for a place to generate now.")
                  .Register(*registry_)
                  .Add({})),
      queue_wait_(prometheus::BuildHistogram()
                      .Name("llm_gateway_queue_wait_seconds")
                      .Help("How long admitted chat and completions requests waited, seconds.")
                      .Register(*registry_)
                      .Add({}, SecondsBuckets())),
      rejected_(prometheus::BuildCounter()
                    .Name("llm_gateway_requests_rejected_total")
                    .Help("Chat and completions requests refused at admission (429): the queue "
                          "was full or the wait ran out.")
                    .Register(*registry_)
                    .Add({})),
      forced_(prometheus::BuildCounter()
                  .Name("llm_gateway_forced_tokens_total")
                  .Help("Generated tokens that a structured output's grammar forced (fed "
                        "without a draw, several in one decode step).")
                  .Register(*registry_)
                  .Add({})),
      conversation_tokens_(prometheus::BuildCounter()
                               .Name("llm_gateway_conversation_tokens_total")
                               .Help("Prompt tokens of conversation (X-Session-Id) turns, by "
                                     "kind: kept (the named model session held them) or computed.")
                               .Register(*registry_)),
      conversation_kept_(conversation_tokens_.Add({{"kind", "kept"}})),
      conversation_computed_(conversation_tokens_.Add({{"kind", "computed"}})),
      prefix_routed_(prometheus::BuildCounter()
                         .Name("llm_gateway_prefix_routed_total")
                         .Help("New model sessions placed on the replica that was given a prompt "
                               "sharing their prompt's longest prefix (prefix-aware routing).")
                         .Register(*registry_)
                         .Add({})),
      rebuilt_(prometheus::BuildCounter()
                   .Name("llm_gateway_sessions_rebuilt_total")
                   .Help("Model sessions lost (expired, evicted, replica gone) and re-prefilled "
                         "from the conversation's history.")
                   .Register(*registry_)
                   .Add({})),
      relocated_(prometheus::BuildCounter()
                     .Name("llm_gateway_sessions_relocated_total")
                     .Help("Model sessions found moved to another replica (live migration on "
                           "drain) and continued there without a re-prefill.")
                     .Register(*registry_)
                     .Add({})),
      e2e_(prometheus::BuildHistogram()
               .Name("vllm:e2e_request_latency_seconds")
               .Help("Chat, completions and messages requests answered 200: from arrival to "
                     "the last byte (streams: the last event), seconds.")
               .Register(*registry_)
               .Add({{"model_name", model_name}}, SecondsBuckets())) {}

void GatewayMetrics::Request(std::string_view uri, int code, absl::Duration latency) {
  const std::string endpoint = EndpointLabel(uri);
  requests_.Add({{"endpoint", endpoint}, {"code", std::to_string(code)}}).Increment();
  seconds_.Add({{"endpoint", endpoint}}, SecondsBuckets()).Observe(absl::ToDoubleSeconds(latency));
  if (code == 200 && (endpoint == "/v1/chat/completions" || endpoint == "/v1/completions" ||
                      endpoint == "/v1/messages")) {
    e2e_.Observe(absl::ToDoubleSeconds(latency));
  }
}

void GatewayMetrics::Tokens(int64_t prompt, int64_t completion) {
  prompt_tokens_.Increment(static_cast<double>(prompt));
  completion_tokens_.Increment(static_cast<double>(completion));
}

void GatewayMetrics::ConversationTokens(int64_t kept, int64_t computed) {
  conversation_kept_.Increment(static_cast<double>(kept));
  conversation_computed_.Increment(static_cast<double>(computed));
}

void GatewayMetrics::PrefixRouted(int64_t total) {
  std::lock_guard<std::mutex> lock(prefix_routed_mu_);
  const double now = prefix_routed_.Value();
  if (static_cast<double>(total) > now) prefix_routed_.Increment(static_cast<double>(total) - now);
}

void GatewayMetrics::FirstToken(absl::Duration since_arrival) {
  ttft_.Observe(absl::ToDoubleSeconds(since_arrival));
}

void GatewayMetrics::QueueWait(absl::Duration waited) {
  queue_wait_.Observe(absl::ToDoubleSeconds(waited));
}

std::string GatewayMetrics::Text() const {
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace llm::gateway
