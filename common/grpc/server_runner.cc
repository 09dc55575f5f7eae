#include "common/grpc/server_runner.h"

#include <grpc/grpc.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/server_initializer.h>
#include <signal.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/grpc/reflection.h"
#include "common/strings.h"

namespace llm {
namespace {

// grpc::Service does not expose its name, but the server knows the names of
// the services it hosts; this builder option reads them once the server is
// built (as the reflection plugin does), so that SetServing() can set the
// health status of each one by name.
class ServiceNamesPlugin final : public grpc::ServerBuilderPlugin {
 public:
  explicit ServiceNamesPlugin(std::vector<std::string>* names) : names_(names) {}
  std::string name() override { return "llm_service_names"; }
  void InitServer(grpc::ServerInitializer*) override {}
  void Finish(grpc::ServerInitializer* si) override { *names_ = *si->GetServiceList(); }
  void ChangeArguments(const std::string&, void*) override {}

 private:
  std::vector<std::string>* names_;
};

class ServiceNamesOption final : public grpc::ServerBuilderOption {
 public:
  explicit ServiceNamesOption(std::vector<std::string>* names) : names_(names) {}
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->push_back(std::make_unique<ServiceNamesPlugin>(names_));
  }

 private:
  std::vector<std::string>* names_;
};

}  // namespace

void BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

absl::StatusOr<std::unique_ptr<ServerRunner>> ServerRunner::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& services) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<ServerRunner> runner(new ServerRunner());
  runner->reflection_ = std::make_unique<ReflectionServices>();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      options.listen,
      options.credentials != nullptr ? options.credentials : grpc::InsecureServerCredentials(),
      &runner->port_);
  // gRPC sets SO_REUSEPORT by default on Linux, so a second server on an
  // address already served would start and share its port, each taking a
  // share of the connections. An address in use must be an error, as it is
  // for every other server.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  builder.SetMaxSendMessageSize(options.max_send_bytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  for (grpc::Service* s : runner->reflection_->services()) builder.RegisterService(s);
  builder.SetOption(std::make_unique<ServiceNamesOption>(&runner->service_names_));
  runner->server_ = builder.BuildAndStart();
  if (runner->server_ == nullptr || runner->port_ == 0) {
    // The runner is destroyed on return: it must not touch a server that was
    // never built (or built without a port: shut that one down here).
    if (runner->server_ != nullptr) {
      runner->server_->Shutdown();
      runner->server_->Wait();
      runner->server_.reset();
    }
    return absl::UnavailableError(
        StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  runner->reflection_->SetServiceNames(runner->service_names_);
  runner->listen_ = options.listen;
  runner->SetServing(false);
  return runner;
}

std::string ServerRunner::endpoint() const {
  if (absl::StartsWith(listen_, "unix:") || absl::StartsWith(listen_, "unix-abstract:")) {
    return listen_;
  }
  return StrCat("port ", port_);
}

ServerRunner::ServerRunner() = default;

ServerRunner::~ServerRunner() {
  if (!shut_down_) Shutdown(absl::ZeroDuration());
}

void ServerRunner::SetServing(bool serving) {
  if (server_ == nullptr) return;
  if (auto* health = server_->GetHealthCheckService()) {
    // The overall status (""), then each hosted service by name: gRPC's
    // SetServingStatus(bool) only updates names it has already been given.
    health->SetServingStatus(serving);
    for (const std::string& name : service_names_) health->SetServingStatus(name, serving);
  }
}

int ServerRunner::WaitForTerminationSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

void ServerRunner::Shutdown(absl::Duration deadline) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  SetServing(false);
  server_->Shutdown(absl::ToChronoTime(absl::Now() + deadline));
  server_->Wait();
}

}  // namespace llm
