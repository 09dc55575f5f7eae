#include "client/transport/model_target.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm::client {
namespace {

constexpr std::string_view kDnsScheme = "dns:///";

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

absl::StatusOr<ModelTarget> ParseModelTarget(std::string_view spec) {
  ModelTarget target;
  const std::string whole = Trim(spec);
  if (whole.empty()) return absl::InvalidArgumentError("the model service address is empty");
  if (whole.rfind(kDnsScheme, 0) == 0) {
    const std::string rest = whole.substr(kDnsScheme.size());
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
        rest.find(',') != std::string::npos) {
      return absl::InvalidArgumentError(
          StrCat("model target \"", whole, "\": expected dns:///NAME:PORT"));
    }
    target.dns_host = rest.substr(0, colon);
    target.dns_port = rest.substr(colon + 1);
    return target;
  }
  size_t start = 0;
  while (true) {
    const size_t comma = whole.find(',', start);
    const std::string one = Trim(std::string_view(whole).substr(
        start, comma == std::string::npos ? std::string::npos : comma - start));
    if (one.empty()) {
      return absl::InvalidArgumentError(
          StrCat("model target \"", whole, "\": an empty address in the list"));
    }
    if (std::find(target.addresses.begin(), target.addresses.end(), one) ==
        target.addresses.end()) {
      target.addresses.push_back(one);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return target;
}

absl::StatusOr<std::vector<std::string>> ResolveAll(const std::string& host,
                                                    const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    return absl::UnavailableError(
        StrCat("cannot resolve ", host, ":", port, ": ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    char ip[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
      out.push_back(StrCat(ip, ":", ntohs(in->sin_port)));
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
      out.push_back(StrCat("[", ip, "]:", ntohs(in6->sin6_port)));
    }
  }
  freeaddrinfo(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) return absl::UnavailableError(StrCat("no address for ", host, ":", port));
  return out;
}

absl::StatusOr<std::vector<std::string>> TargetAddresses(const ModelTarget& target) {
  if (target.dns_host.empty()) return target.addresses;
  return ResolveAll(target.dns_host, target.dns_port);
}

}  // namespace llm::client
