// The tokenizer service's Prometheus metrics:
//   llm_tokenizer_requests_total{method}   calls, by method (every status)
//   llm_tokenizer_bytes_total              text bytes encoded or decoded
//   llm_tokenizer_request_seconds          handling time of unary calls
// Threads: every method may be called concurrently.
#ifndef LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_METRICS_H_
#define LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace llm {

class TokenizerMetrics {
 public:
  explicit TokenizerMetrics(prometheus::Registry& registry);

  // One call of `method` that handled `bytes` bytes of text; `latency` < 0:
  // not observed (streams).
  void Observe(const std::string& method, uint64_t bytes, absl::Duration latency);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Counter& bytes_;
  prometheus::Histogram& seconds_;
};

}  // namespace llm

#endif  // LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_METRICS_H_
