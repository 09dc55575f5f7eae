#include "tokenizer_svc/service/tokenizer_metrics.h"

namespace llm {

TokenizerMetrics::TokenizerMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("llm_tokenizer_requests_total")
                    .Help("Tokenizer calls, by method (any status).")
                    .Register(registry)),
      bytes_(prometheus::BuildCounter()
                 .Name("llm_tokenizer_bytes_total")
                 .Help("Text bytes encoded (request text) or decoded (response text).")
                 .Register(registry)
                 .Add({})),
      seconds_(prometheus::BuildHistogram()
                   .Name("llm_tokenizer_request_seconds")
                   .Help("Handling time of unary tokenizer calls, in seconds.")
                   .Register(registry)
                   .Add({}, prometheus::Histogram::BucketBoundaries{
                                0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0})) {}

void TokenizerMetrics::Observe(const std::string& method, uint64_t bytes, absl::Duration latency) {
  requests_.Add({{"method", method}}).Increment();
  if (bytes > 0) bytes_.Increment(static_cast<double>(bytes));
  if (latency >= absl::ZeroDuration()) seconds_.Observe(absl::ToDoubleSeconds(latency));
}

}  // namespace llm
