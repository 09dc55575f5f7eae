#include "client/transport/model_pool.h"

#include <utility>

#include "absl/time/clock.h"
#include "client/transport/health.h"
#include "common/grpc/grpc_status.h"
#include "common/strings.h"

namespace llm::client {

absl::StatusOr<std::unique_ptr<ModelPool>> ModelPool::Create(const std::string& spec,
                                                             ChannelFactory factory,
                                                             const ModelPoolOptions& options) {
  absl::StatusOr<ModelTarget> target = ParseModelTarget(spec);
  if (!target.ok()) return target.status();
  return std::unique_ptr<ModelPool>(
      new ModelPool(spec, std::move(*target), std::move(factory), options));
}

ModelPool::ModelPool(std::string spec, ModelTarget target, ChannelFactory factory,
                     const ModelPoolOptions& options)
    : spec_(std::move(spec)),
      target_(std::move(target)),
      factory_(std::move(factory)),
      options_(options) {}

std::string ModelPool::ReplicaOf(const std::string& session_id) {
  const size_t dot = session_id.rfind('.');
  return dot == std::string::npos ? std::string() : session_id.substr(0, dot);
}

bool ModelPool::any_loading() const {
  for (const auto& e : endpoints_) {
    if (e->listed && e->loading) return true;
  }
  return false;
}

void ModelPool::Probe(Endpoint& e) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.probe_timeout));
  v1::ModelInfo info;
  const grpc::Status s = e.stub->Info(&context, v1::ModelInfoRequest(), &info);
  e.loading = false;
  if (!s.ok()) {
    e.up = false;
    e.loading = s.error_code() == grpc::StatusCode::UNAVAILABLE &&
                e.channel->GetState(false) == GRPC_CHANNEL_READY;
    e.last_error = FromGrpcStatus(s);
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {  // another service at the address
      const std::string why =
          WrongServiceMessage(e.channel, Service::kModel, options_.probe_timeout);
      e.last_error =
          absl::UnimplementedError(endpoints_.size() > 1 ? StrCat(e.address, ": ", why) : why);
    }
    return;
  }
  if (have_info_ && info.vocab_size() != info_.vocab_size()) {
    e.up = false;
    e.last_error = absl::FailedPreconditionError(
        StrCat("the model at ", e.address, " has ", info.vocab_size(), " tokens, the one at ",
               endpoints_.front()->address, " ", info_.vocab_size(), ": not the same model"));
    return;
  }
  e.info = std::move(info);
  e.up = true;
  e.last_error = absl::OkStatus();
  if (!have_info_) {
    info_ = e.info;
    have_info_ = true;
  }
}

absl::Status ModelPool::Refresh() {
  last_refresh_ = absl::Now();
  absl::StatusOr<std::vector<std::string>> addresses = TargetAddresses(target_);
  if (addresses.ok()) {
    for (auto& e : endpoints_) e->listed = false;
    for (const std::string& address : *addresses) {
      Endpoint* found = nullptr;
      for (auto& e : endpoints_) {
        if (e->address == address) found = e.get();
      }
      if (found == nullptr) {
        auto e = std::make_unique<Endpoint>();
        e->address = address;
        e->channel = factory_(address, target_.dns_host);
        e->stub = v1::Model::NewStub(e->channel);
        found = e.get();
        endpoints_.push_back(std::move(e));
      }
      found->listed = true;
    }
  }
  absl::Status last = addresses.status();
  bool any_up = false;
  for (auto& e : endpoints_) {
    if (!e->listed) {
      e->up = false;
      continue;
    }
    Probe(*e);
    if (e->up) {
      any_up = true;
    } else {
      last = e->last_error;
    }
  }
  if (any_up) return absl::OkStatus();
  // A refusal that is the caller's own (a wrong token, a vocabulary that does
  // not fit) keeps its code; only unreachable replicas are UNAVAILABLE.
  if (!last.ok() && !absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) {
    return absl::Status(last.code(), StrCat("model service at ", spec_, ": ", last.message()));
  }
  return absl::UnavailableError(StrCat("no model server is up at ", spec_, ": ", last.message()));
}

ModelPool::Endpoint* ModelPool::Find(const std::string& replica_id) {
  if (replica_id.empty()) return nullptr;
  for (auto& e : endpoints_) {
    if (e->up && e->info.replica_id() == replica_id) return e.get();
  }
  return nullptr;
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForSession(const std::string& session_id) {
  const std::string replica = ReplicaOf(session_id);
  if (Endpoint* e = Find(replica)) return e;
  Refresh().IgnoreError();
  if (Endpoint* e = Find(replica)) return e;
  return absl::NotFoundError(StrCat("session \"", session_id, "\" is lost: no model server at ",
                                    spec_, " is replica \"", replica,
                                    "\" any more (restarted or gone)"));
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForNewSession() {
  const auto usable = [](const Endpoint& e) { return e.listed && e.up && !e.info.draining(); };
  bool any = false;
  for (const auto& e : endpoints_) any = any || usable(*e);
  if (!any || absl::Now() - last_refresh_ >= options_.refresh_interval) {
    absl::Status s = Refresh();
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    Endpoint* e = endpoints_[(next_ + i) % endpoints_.size()].get();
    if (usable(*e)) {
      next_ = (next_ + i + 1) % endpoints_.size();
      return e;
    }
  }
  return absl::UnavailableError(
      StrCat("no model server at ", spec_, " takes new sessions (all down or draining)"));
}

void ModelPool::Learned(Endpoint* endpoint, const std::string& session_id) {
  const std::string replica = ReplicaOf(session_id);
  if (!replica.empty()) endpoint->info.set_replica_id(replica);
}

void ModelPool::MarkDown(Endpoint* endpoint, const absl::Status& why) {
  endpoint->up = false;
  endpoint->last_error = why;
}

}  // namespace llm::client
