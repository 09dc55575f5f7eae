// Prometheus metrics over HTTP (text format at /metrics), shared by both
// servers: a registry that the services add their metric families to, and an
// HTTP listener (prometheus-cpp's civetweb Exposer) that serves it and any
// other collectables (e.g. gauges read from the engine at scrape time).
//
// Usage in main():
//   auto metrics = llm::MetricsHttp::Start("127.0.0.1:9090");  // port 0: a free one
//   llm::TokenizerMetrics tm(metrics->registry());
//
// Threads: registry() families may be updated from any thread; Start() and
// destruction from the main thread.
#ifndef LLM_COMMON_METRICS_METRICS_HTTP_H_
#define LLM_COMMON_METRICS_METRICS_HTTP_H_

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llm {

class MetricsHttp {
 public:
  // HTTP workers, each serving one connection at a time, and how long a
  // connection may take to send its request before it is closed.
  static constexpr int kWorkers = 4;
  static constexpr int kRequestTimeoutMs = 5000;

  // Listens on `listen` (HOST:PORT; port 0 picks a free port). UNAVAILABLE
  // when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& listen);

  prometheus::Registry& registry() { return *registry_; }
  // Serves `collectable` too, while it lives.
  void Add(const std::shared_ptr<prometheus::Collectable>& collectable);
  int port() const { return port_; }

 private:
  MetricsHttp() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace llm

#endif  // LLM_COMMON_METRICS_METRICS_HTTP_H_
