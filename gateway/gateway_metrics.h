// The gateway's Prometheus metrics, served in the text format at its own
// GET /metrics (no second port):
//   llm_gateway_requests_total{endpoint,code}   requests, by endpoint and HTTP status
//   llm_gateway_request_seconds{endpoint}       handling time (streams: to the last event)
//   llm_gateway_tokens_total{kind}              prompt and completion tokens of requests
//   llm_gateway_generations_active              chat and completions requests generating now
//   llm_gateway_time_to_first_token_seconds     from a request's arrival to its first token
//   llm_gateway_requests_queued                 generating requests waiting for admission now
//   llm_gateway_queue_wait_seconds              how long admitted requests waited
//   llm_gateway_requests_rejected_total         refused at admission (queue full or wait over: 429)
//   llm_gateway_forced_tokens_total             structured output: generated tokens a grammar
//   forced
//   llm_gateway_conversation_tokens_total{kind}  conversation (X-Session-Id) turns' prompt
//       tokens: "kept" (the named model session held them) or "computed" (the rest)
//   llm_gateway_prefix_routed_total             new sessions placed on the replica that was
//       given a prompt with the same long prefix (the client pool's prefix-aware routing)
//   llm_gateway_sessions_rebuilt_total          model sessions lost and re-prefilled from the
//       conversation's history (docs/client.md "Lost sessions")
//   llm_gateway_sessions_relocated_total        model sessions found moved to another replica
//       (a drain migrated them, docs/client.md "Sessions that move"): not re-prefilled
//   vllm:e2e_request_latency_seconds{model_name}  chat, completions and messages requests
//       answered 200, from arrival to the last byte (vLLM's name, for its Grafana dashboards
//       and the inference gateway: docs/operations.md; the model server exports the others)
// `endpoint` is one of the served paths or "other" (bounded cardinality).
// Threads: every method may be called concurrently.
#ifndef LLM_GATEWAY_GATEWAY_METRICS_H_
#define LLM_GATEWAY_GATEWAY_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/time/time.h"

namespace llm::gateway {

class GatewayMetrics {
 public:
  // `model_name`: the model's id, the label of the vllm: metric.
  explicit GatewayMetrics(const std::string& model_name = "");

  // One request to `uri` answered with `code` after `latency`.
  void Request(std::string_view uri, int code, absl::Duration latency);
  void Tokens(int64_t prompt, int64_t completion);
  void FirstToken(absl::Duration since_arrival);
  void QueueWait(absl::Duration waited);
  void Rejected() { rejected_.Increment(); }
  void Forced(int64_t tokens) { forced_.Increment(static_cast<double>(tokens)); }
  void ConversationTokens(int64_t kept, int64_t computed);
  // The model pool's ModelPool::prefix_routed() now (a running total).
  void PrefixRouted(int64_t total);
  // Model sessions a request re-prefilled, and found moved.
  void Sessions(int64_t rebuilt, int64_t relocated) {
    rebuilt_.Increment(static_cast<double>(rebuilt));
    relocated_.Increment(static_cast<double>(relocated));
  }
  prometheus::Gauge& active() { return active_; }
  prometheus::Gauge& queued() { return queued_; }

  // Every family, in Prometheus's text exposition format.
  std::string Text() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& seconds_;
  prometheus::Family<prometheus::Counter>& tokens_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& completion_tokens_;
  prometheus::Gauge& active_;
  prometheus::Histogram& ttft_;
  prometheus::Gauge& queued_;
  prometheus::Histogram& queue_wait_;
  prometheus::Counter& rejected_;
  prometheus::Counter& forced_;
  prometheus::Family<prometheus::Counter>& conversation_tokens_;
  prometheus::Counter& conversation_kept_;
  prometheus::Counter& conversation_computed_;
  std::mutex prefix_routed_mu_;  // PrefixRouted's read and increment, as one
  prometheus::Counter& prefix_routed_;
  prometheus::Counter& rebuilt_;
  prometheus::Counter& relocated_;
  prometheus::Histogram& e2e_;
};

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_GATEWAY_METRICS_H_
