#include "client/transport/connect.h"

#include "absl/time/clock.h"
#include "common/grpc/security.h"
#include "common/strings.h"

namespace llm::client::internal {

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                          const ClientOptions& options,
                                          const std::string& server_name) {
  grpc::ChannelArguments args;
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  } else if (!server_name.empty()) {
    args.SetSslTargetNameOverride(server_name);
  }
  // Loopback and cluster peers come back fast: retry connecting often. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC takes it as the minimum time a
  // connection attempt gets, 20 s by default; at 100 ms a handshake on a
  // loaded machine was cut short, "tcp handshaker shutdown", and a server
  // that was up counted as unreachable.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(64 << 20);
  return CreateAuthChannel(address, creds, args, options.auth_token);
}

absl::Status WaitReady(const ClientOptions& options, std::string_view name,
                       const std::string& address, const std::function<absl::Status()>& attempt,
                       const std::function<bool()>& loading, bool* still_loading) {
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + options.ready_timeout;
  bool waited = false;
  absl::Status s;
  while (!(s = attempt()).ok() && loading() && absl::Now() < give_up) {
    waited = true;
    if (options.on_wait) {
      options.on_wait({name, address, absl::Now() - start, options.ready_timeout, false});
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  *still_loading = !s.ok() && loading();
  if (waited && options.on_wait) {
    options.on_wait({name, address, absl::Now() - start, options.ready_timeout, true});
  }
  if (*still_loading) {
    return absl::DeadlineExceededError(StrCat("the ", name, " service at ", address,
                                              " is still loading after ",
                                              absl::FormatDuration(options.ready_timeout)));
  }
  return s;
}

absl::Status WithContext(const absl::Status& s, std::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), StrCat(what, ": ", s.message()));
}

}  // namespace llm::client::internal
