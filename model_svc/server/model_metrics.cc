#include "model_svc/server/model_metrics.h"

#include <prometheus/metric_family.h>

#include <string>
#include <utility>
#include <vector>

namespace llm {

namespace {

const prometheus::Histogram::BucketBoundaries& TtftBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
      0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& ItlBuckets() {
  static const auto* const buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0};
  return *buckets;
}

prometheus::Histogram& AddHistogram(prometheus::Registry& registry, const std::string& name,
                                    const std::string& help, const prometheus::Labels& labels,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry).Add(labels, buckets);
}

constexpr char kTtftHelp[] = "Latency of a Prefill (prompt in, first logits out), in seconds.";
constexpr char kItlHelp[] = "Latency of one Decode or DecodeStream step, in seconds.";

}  // namespace

class ModelMetrics::EngineCollector final : public prometheus::Collectable {
 public:
  explicit EngineCollector(VllmLabels vllm) : vllm_(std::move(vllm)) {}

  void SetEngine(const engine::Engine* engine) { engine_.store(engine, std::memory_order_release); }

  std::vector<prometheus::MetricFamily> Collect() const override {
    const engine::Engine* e = engine_.load(std::memory_order_acquire);
    if (e == nullptr) return {};
    const engine::EngineStats s = e->Stats();
    std::vector<prometheus::MetricFamily> out;
    auto add = [&out](const char* name, const char* help, prometheus::MetricType type, double value,
                      std::vector<prometheus::ClientMetric::Label> labels = {}) {
      prometheus::MetricFamily f;
      f.name = name;
      f.help = help;
      f.type = type;
      prometheus::ClientMetric m;
      m.label = std::move(labels);
      if (type == prometheus::MetricType::Counter) {
        m.counter.value = value;
      } else {
        m.gauge.value = value;
      }
      f.metric.push_back(std::move(m));
      out.push_back(std::move(f));
    };
    using prometheus::MetricType;
    add("llm_prompt_tokens_total", "Prompt tokens prefilled.", MetricType::Counter,
        static_cast<double>(s.prefill_tokens));
    add("llm_generation_tokens_total", "Tokens decoded (generated).", MetricType::Counter,
        static_cast<double>(s.decode_tokens));
    add("llm_num_requests_running", "Requests being computed by the step loop.", MetricType::Gauge,
        static_cast<double>(s.running));
    add("llm_num_requests_waiting", "Requests queued for the step loop.", MetricType::Gauge,
        static_cast<double>(s.waiting));
    const double kv_usage = s.kv_blocks_total > 0 ? 1.0 - static_cast<double>(s.kv_blocks_free) /
                                                              static_cast<double>(s.kv_blocks_total)
                                                  : 0.0;
    add("llm_kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).",
        MetricType::Gauge, kv_usage);
    add("llm_sessions", "Sessions held.", MetricType::Gauge, static_cast<double>(s.sessions));
    {
      // One series per reason: for KV space, or for a session slot.
      prometheus::MetricFamily f;
      f.name = "llm_sessions_evicted_total";
      f.help =
          "Idle sessions evicted (least recently used), by reason: kv_cache (for KV space) or "
          "max_sessions (for a new session at the session limit).";
      f.type = MetricType::Counter;
      for (const auto& [reason, value] : {std::pair{"kv_cache", s.evicted_sessions},
                                          std::pair{"max_sessions", s.evicted_for_session_limit}}) {
        prometheus::ClientMetric m;
        m.label.push_back({"reason", reason});
        m.counter.value = static_cast<double>(value);
        f.metric.push_back(std::move(m));
      }
      out.push_back(std::move(f));
    }
    {
      // --kv_spill_dir (spill_dir.h): what became of the evicted sessions.
      prometheus::MetricFamily f;
      f.name = "llm_kv_spill_total";
      f.help =
          "Evicted sessions and --kv_spill_dir, by outcome: spilled (written), restored "
          "(imported back on their next call), dropped (no room in the quota, or pushed out of "
          "it) or failed (a write, a read or a corrupt file).";
      f.type = MetricType::Counter;
      for (const auto& [outcome, value] :
           {std::pair{"spilled", s.spill.spilled}, std::pair{"restored", s.spill.restored},
            std::pair{"dropped", s.spill.dropped}, std::pair{"failed", s.spill.failed}}) {
        prometheus::ClientMetric m;
        m.label.push_back({"outcome", outcome});
        m.counter.value = static_cast<double>(value);
        f.metric.push_back(std::move(m));
      }
      out.push_back(std::move(f));
    }
    add("llm_kv_spill_bytes", "Bytes of spilled sessions in --kv_spill_dir.", MetricType::Gauge,
        static_cast<double>(s.spill.bytes));
    add("llm_kv_spill_copy_seconds_total",
        "Time the engine spent copying evicted sessions' KV for --kv_spill_dir, under its lock "
        "(the step loop waits meanwhile).",
        MetricType::Counter, absl::ToDoubleSeconds(s.spill_copy_time));
    add("llm_kv_spill_sessions", "Spilled sessions held by --kv_spill_dir (written or queued).",
        MetricType::Gauge, static_cast<double>(s.spill.sessions));
    add("llm_sessions_expired_total", "Sessions expired after their idle TTL.", MetricType::Counter,
        static_cast<double>(s.expired_sessions));
    add("llm_engine_steps_total", "Forward steps run by the step loop.", MetricType::Counter,
        static_cast<double>(s.steps));
    add("llm_engine_step_seconds_total",
        "Time spent in forward steps (the busy time of the step loop), in seconds.",
        MetricType::Counter, absl::ToDoubleSeconds(s.step_time));
    add("llm_lookahead_steps_total",
        "Lookahead steps: a greedy client's next token guessed and computed ahead.",
        MetricType::Counter, static_cast<double>(s.lookahead_steps));
    add("llm_lookahead_hits_total", "Lookahead steps whose token the client then sent.",
        MetricType::Counter, static_cast<double>(s.lookahead_hits));
    add("llm_prefix_cache_queries_total",
        "Prompt tokens of the prefill requests that looked up the prefix cache.",
        MetricType::Counter, static_cast<double>(s.prefix_cache_queries));
    add("llm_prefix_cache_hits_total",
        "Prompt tokens found in the prefix cache (their KV reused, not computed).",
        MetricType::Counter, static_cast<double>(s.prefix_cache_hits));
    add("llm_speculative_proposed_tokens_total",
        "Tokens that speculating clients proposed after their sampled ones (Decode's proposed).",
        MetricType::Counter, static_cast<double>(s.proposed_tokens));
    add("llm_speculative_rolled_back_tokens_total",
        "Tokens rolled back by truncate_to: a speculating client's rejected proposals.",
        MetricType::Counter, static_cast<double>(s.rolled_back_tokens));
    add("llm_kv_cache_cached_blocks",
        "Free KV cache blocks that still hold a cached prefix (evicted when needed).",
        MetricType::Gauge, static_cast<double>(s.kv_blocks_cached));

    // vLLM's names, for the inference gateway's endpoint picker and vLLM's dashboards.
    const std::vector<prometheus::ClientMetric::Label> model = {{"model_name", vllm_.model_name}};
    add("vllm:num_requests_waiting", "Requests queued for the step loop.", MetricType::Gauge,
        static_cast<double>(s.waiting), model);
    add("vllm:num_requests_running", "Requests being computed by the step loop.", MetricType::Gauge,
        static_cast<double>(s.running), model);
    add("vllm:kv_cache_usage_perc", "Fraction of KV cache blocks in use (0 to 1).",
        MetricType::Gauge, kv_usage, model);
    add("vllm:cache_config_info", "The KV cache's configuration, in the labels (value 1).",
        MetricType::Gauge, 1.0,
        {{"block_size", std::to_string(vllm_.kv_block_size)},
         {"num_gpu_blocks", std::to_string(s.kv_blocks_total)}});
    add("vllm:prefix_cache_queries_total",
        "Prompt tokens of the prefill requests that looked up the prefix cache.",
        MetricType::Counter, static_cast<double>(s.prefix_cache_queries), model);
    add("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.",
        MetricType::Counter, static_cast<double>(s.prefix_cache_hits), model);
    add("vllm:prompt_tokens_total", "Prompt tokens prefilled.", MetricType::Counter,
        static_cast<double>(s.prefill_tokens), model);
    add("vllm:generation_tokens_total", "Tokens decoded (generated).", MetricType::Counter,
        static_cast<double>(s.decode_tokens), model);
    return out;
  }

 private:
  const VllmLabels vllm_;
  std::atomic<const engine::Engine*> engine_{nullptr};
};

ModelMetrics::ModelMetrics(prometheus::Registry& registry, VllmLabels vllm)
    : ttft_(
          AddHistogram(registry, "llm_time_to_first_token_seconds", kTtftHelp, {}, TtftBuckets())),
      itl_(AddHistogram(registry, "llm_inter_token_latency_seconds", kItlHelp, {}, ItlBuckets())),
      vllm_ttft_(AddHistogram(registry, "vllm:time_to_first_token_seconds", kTtftHelp,
                              {{"model_name", vllm.model_name}}, TtftBuckets())),
      vllm_itl_(AddHistogram(registry, "vllm:inter_token_latency_seconds", kItlHelp,
                             {{"model_name", vllm.model_name}}, ItlBuckets())),
      reuse_(prometheus::BuildCounter()
                 .Name("llm_session_reuse_total")
                 .Help("Prefills that appended to an existing session (its KV cache reused).")
                 .Register(registry)
                 .Add({})),
      rejected_(prometheus::BuildCounter()
                    .Name("llm_requests_rejected_total")
                    .Help("Calls that ended with a non-OK status, by gRPC status code.")
                    .Register(registry)),
      limited_(prometheus::BuildCounter()
                   .Name("llm_limit_rejected_total")
                   .Help("Calls refused by a server limit, by reason (max_sessions, max_streams, "
                         "message_size, kv_cache, prompt_tokens, context_length).")
                   .Register(registry)),
      non_finite_(prometheus::BuildCounter()
                      .Name("llm_non_finite_logits_total")
                      .Help("Calls failed with INTERNAL because the model's logits held NaN or "
                            "infinity (broken weights or backend).")
                      .Register(registry)
                      .Add({})),
      session_dir_(prometheus::BuildCounter()
                       .Name("llm_session_dir_sessions_total")
                       .Help("Sessions of --session_dir, by outcome: saved (on drain), restored "
                             "(at start), skipped (not saved or a file not imported).")
                       .Register(registry)),
      migrated_(prometheus::BuildCounter()
                    .Name("llm_sessions_migrated_total")
                    .Help("Sessions a drain moved to a peer replica (--peers), by outcome: moved, "
                          "or failed (no peer took it; dropped, its client re-prefills it).")
                    .Register(registry)),
      collector_(std::make_shared<EngineCollector>(std::move(vllm))) {}

std::shared_ptr<prometheus::Collectable> ModelMetrics::engine_collectable() const {
  return collector_;
}

void ModelMetrics::SetEngine(const engine::Engine* engine) { collector_->SetEngine(engine); }

void ModelMetrics::ObservePrefill(absl::Duration latency, bool reused) {
  ttft_.Observe(absl::ToDoubleSeconds(latency));
  vllm_ttft_.Observe(absl::ToDoubleSeconds(latency));
  if (reused) reuse_.Increment();
}

void ModelMetrics::ObserveDecodeStep(absl::Duration latency) {
  itl_.Observe(absl::ToDoubleSeconds(latency));
  vllm_itl_.Observe(absl::ToDoubleSeconds(latency));
}

void ModelMetrics::CountStatus(absl::StatusCode code) {
  if (code == absl::StatusCode::kOk) return;
  rejected_.Add({{"code", absl::StatusCodeToString(code)}}).Increment();
}

void ModelMetrics::CountSessionDir(std::string_view outcome, int64_t n) {
  session_dir_.Add({{"outcome", std::string(outcome)}}).Increment(static_cast<double>(n));
}

void ModelMetrics::CountMigration(std::string_view outcome) {
  migrated_.Add({{"outcome", std::string(outcome)}}).Increment();
}

void ModelMetrics::CountLimit(std::string_view reason) {
  limited_.Add({{"reason", std::string(reason)}}).Increment();
}

}  // namespace llm
