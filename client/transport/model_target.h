// Where the model service is: one address, a comma-separated list of
// replicas, or a DNS name that resolves to every replica (a Kubernetes
// headless Service):
//
//   "127.0.0.1:50052"
//   "10.0.0.5:50052,10.0.0.6:50052"
//   "dns:///llm-model.llm.svc.cluster.local:50052"   (every A / AAAA record)
//
// Threads: pure functions; ResolveAll blocks on the system resolver.
#ifndef LLM_CLIENT_TRANSPORT_MODEL_TARGET_H_
#define LLM_CLIENT_TRANSPORT_MODEL_TARGET_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::client {

struct ModelTarget {
  // The addresses given (a list), or empty for a DNS target.
  std::vector<std::string> addresses;
  // A DNS target: the name and port to resolve (dns_host empty otherwise).
  std::string dns_host;
  std::string dns_port;
};

// INVALID_ARGUMENT for an empty target, an empty list element, or a dns:///
// target without "name:port".
absl::StatusOr<ModelTarget> ParseModelTarget(std::string_view spec);

// Every address of `host` (getaddrinfo, TCP), as "ip:port" or "[ipv6]:port",
// sorted and without duplicates. UNAVAILABLE when the name does not resolve.
absl::StatusOr<std::vector<std::string>> ResolveAll(const std::string& host,
                                                    const std::string& port);

// The target's addresses now: the list, or ResolveAll for a DNS target.
absl::StatusOr<std::vector<std::string>> TargetAddresses(const ModelTarget& target);

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_MODEL_TARGET_H_
