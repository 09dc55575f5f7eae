// The model service's Prometheus metrics (names under llm_, following vLLM's
// where one exists):
//   llm_time_to_first_token_seconds   histogram: a Prefill's latency
//   llm_inter_token_latency_seconds   histogram: a Decode / DecodeStream step's latency
//   llm_prompt_tokens_total           counter: tokens prefilled (engine)
//   llm_generation_tokens_total       counter: tokens decoded (engine)
//   llm_num_requests_running          gauge: requests being computed (engine)
//   llm_num_requests_waiting          gauge: requests queued (engine)
//   llm_kv_cache_usage_perc           gauge: fraction of KV blocks in use, 0..1 (engine)
//   llm_sessions                      gauge: sessions held (engine)
//   llm_sessions_evicted_total{reason} counter: idle sessions evicted, reason kv_cache (for KV
//       space) or max_sessions (for a new session at the session limit) (engine)
//   llm_sessions_expired_total        counter: sessions expired by TTL (engine)
//   llm_session_reuse_total           counter: Prefills that appended to an existing session
//   llm_requests_rejected_total{code} counter: calls that ended with a non-OK status
//   llm_limit_rejected_total{reason}  counter: calls refused by a server limit, reason one of
//       max_sessions (RESOURCE_EXHAUSTED), max_streams (RESOURCE_EXHAUSTED),
//       message_size (RESOURCE_EXHAUSTED), kv_cache (RESOURCE_EXHAUSTED),
//       prompt_tokens (a Prefill past the context, OUT_OF_RANGE),
//       context_length (a Decode past the context, OUT_OF_RANGE)
//   llm_non_finite_logits_total       counter: calls failed with INTERNAL because the model's
//       logits held NaN or infinity (broken weights or backend)
//   llm_session_dir_sessions_total{outcome} counter: sessions of --session_dir, outcome saved
//       (written on drain), restored (imported at start) or skipped (not saved, or a file
//       not imported: another model, corrupt, no room)
//   llm_kv_spill_total{outcome}       counter: evicted sessions and --kv_spill_dir, outcome
//       spilled (written), restored (imported back on their next call), dropped (no room in
//       the quota, or pushed out of it) or failed (a write, a read, a corrupt file) (engine)
//   llm_kv_spill_bytes                gauge: bytes of spill files in --kv_spill_dir (engine)
//   llm_kv_spill_copy_seconds_total   counter: time spent copying evicted sessions' KV for it,
//       under the engine's lock (engine)
//   llm_kv_spill_sessions             gauge: sessions held there, written or queued (engine)
//   llm_sessions_migrated_total{outcome} counter: sessions a drain moved to a peer (--peers,
//       migration.h): outcome moved, or failed (no peer took it: another model, full, down;
//       the session is dropped as without --peers and its client re-prefills it)
//   llm_prefix_cache_queries_total    counter: prompt tokens looked up in the prefix cache (engine)
//   llm_prefix_cache_hits_total       counter: prompt tokens found there (engine)
//   llm_kv_cache_cached_blocks        gauge: free KV blocks holding a cached prefix (engine)
//   llm_speculative_proposed_tokens_total     counter: tokens proposed by speculating clients
//   llm_speculative_rolled_back_tokens_total  counter: tokens truncate_to rolled back (the
//       rejected proposals; 1 - rolled back / proposed is about the acceptance rate) (engine)
// The engine's values are read from Engine::Stats() at scrape time.
//
// Beside them, the same values under vLLM's names, which the Gateway API
// Inference Extension's endpoint picker (EPP) and vLLM's Grafana dashboards
// read (docs/operations.md, "Behind the Kubernetes inference gateway"); each
// has a model_name label (the served model's id) but vllm:cache_config_info:
//   vllm:num_requests_waiting, vllm:num_requests_running, vllm:kv_cache_usage_perc
//       gauges: llm_num_requests_waiting, _running, llm_kv_cache_usage_perc
//   vllm:cache_config_info{block_size,num_gpu_blocks}  gauge, 1: the KV cache's
//       block size in tokens and its block count
//   vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total  counters: as llm_'s
//   vllm:prompt_tokens_total, vllm:generation_tokens_total  counters: as llm_'s
//   vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds  histograms:
//       the same observations as llm_'s
//
// Threads: every method may be called concurrently; SetEngine() once.
#ifndef LLM_MODEL_SVC_SERVER_MODEL_METRICS_H_
#define LLM_MODEL_SVC_SERVER_MODEL_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "model_svc/engine/engine.h"

namespace llm {

// What the vllm: metrics say about the server.
struct VllmLabels {
  std::string model_name;      // the model_name label: the model's id in the OpenAI API
  int32_t kv_block_size = 16;  // vllm:cache_config_info's block_size, in tokens
};

class ModelMetrics {
 public:
  ModelMetrics(prometheus::Registry& registry, VllmLabels vllm);

  // The engine whose Stats() the scrape reads; until then its metrics are absent.
  void SetEngine(const engine::Engine* engine);
  // Serve this too (MetricsHttp::Add).
  std::shared_ptr<prometheus::Collectable> engine_collectable() const;

  // A completed Prefill (OK), on a new or an existing (`reused`) session.
  void ObservePrefill(absl::Duration latency, bool reused);
  // A completed Decode or DecodeStream step (OK).
  void ObserveDecodeStep(absl::Duration latency);
  // A call that ended with `code` (OK is not counted).
  void CountStatus(absl::StatusCode code);
  // A call refused by the limit `reason` (one of the names above).
  void CountLimit(std::string_view reason);
  // A call whose logits were not finite.
  void CountNonFiniteLogits() { non_finite_.Increment(); }
  // `n` sessions of --session_dir with `outcome` (saved, restored, skipped).
  void CountSessionDir(std::string_view outcome, int64_t n);
  // A session a drain tried to move to a peer: `outcome` moved or failed.
  void CountMigration(std::string_view outcome);

 private:
  class EngineCollector;

  prometheus::Histogram& ttft_;
  prometheus::Histogram& itl_;
  prometheus::Histogram& vllm_ttft_;
  prometheus::Histogram& vllm_itl_;
  prometheus::Counter& reuse_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Family<prometheus::Counter>& limited_;
  prometheus::Counter& non_finite_;
  prometheus::Family<prometheus::Counter>& session_dir_;
  prometheus::Family<prometheus::Counter>& migrated_;
  std::shared_ptr<EngineCollector> collector_;
};

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_MODEL_METRICS_H_
