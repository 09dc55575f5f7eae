#include "common/metrics/metrics_http.h"

#include <exception>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(const std::string& listen) {
  std::unique_ptr<MetricsHttp> m(new MetricsHttp());
  m->registry_ = std::make_shared<prometheus::Registry>();
  try {
    // One HTTP thread: a scrape is cheap and rare.
    m->exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
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
