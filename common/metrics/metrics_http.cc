#include "common/metrics/metrics_http.h"

#include <exception>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& listen) {
  std::unique_ptr<MetricsHttp> m(new MetricsHttp());
  m->registry_ = std::make_shared<prometheus::Registry>();
  try {
    // A connection holds a worker until its request has arrived, so one idle
    // connection (a port scanner, a TCP liveness probe) stalled a single
    // worker's scrapes for civetweb's default 30 s: several workers, and a
    // short wait for a request.
    m->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", listen, "num_threads", std::to_string(kWorkers),
                                 "request_timeout_ms", std::to_string(kRequestTimeoutMs)});
  } catch (const std::exception& e) {
    return absl::UnavailableError(StrCat("metrics: cannot listen on ", listen, ": ", e.what()));
  }
  const std::vector<int> ports = m->exposer_->GetListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(StrCat("metrics: cannot listen on ", listen));
  }
  m->port_ = ports[0];
  m->exposer_->RegisterCollectable(m->registry_);
  return m;
}

void MetricsHttp::Add(const std::shared_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

}  // namespace llm
