#include "client/transport/model_pool.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "client/transport/health.h"
#include "common/grpc/grpc_status.h"
#include "common/rendezvous.h"
#include "common/strings.h"

namespace llm::client {
namespace {

// The deadline of an Info probe of an endpoint that is down.
constexpr absl::Duration kDownProbeTimeout = absl::Seconds(1);
// The most entries of the moved-session routing table.
constexpr size_t kMaxMoved = 1 << 16;
// The trailing metadata of a NOT_FOUND that names a moved session's replica.
constexpr char kSessionLocationKey[] = "llm-session-location";

// Whether `e` takes new sessions (named ones too).
bool TakesNewSessions(const ModelPool::Endpoint& e) {
  return e.listed && e.up && !e.info.draining();
}

}  // namespace

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
  absl::MutexLock lock(&mu_);
  for (const auto& e : endpoints_) {
    if (e->listed && e->loading) return true;
  }
  return false;
}

v1::ModelInfo ModelPool::info() const {
  absl::MutexLock lock(&mu_);
  return info_;
}

size_t ModelPool::size() const {
  absl::MutexLock lock(&mu_);
  return endpoints_.size();
}

std::vector<ModelPool::Endpoint*> ModelPool::UpEndpoints() const {
  absl::MutexLock lock(&mu_);
  std::vector<Endpoint*> up;
  for (const auto& e : endpoints_) {
    if (e->up) up.push_back(e.get());
  }
  return up;
}

std::shared_ptr<const ModelPool::Connection> ModelPool::NewConnection(
    const std::string& address) const {
  auto c = std::make_shared<Connection>();
  c->channel = factory_(address, target_.dns_host);
  c->stub = v1::Model::NewStub(c->channel);
  return c;
}

std::shared_ptr<const ModelPool::Connection> ModelPool::Connect(const Endpoint* endpoint) const {
  absl::MutexLock lock(&mu_);
  return endpoint->connection;
}

absl::Status ModelPool::CheckAppliesTokenMasks(const Endpoint* endpoint) const {
  {
    absl::MutexLock lock(&mu_);
    if (endpoint->info.token_mask()) return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      StrCat("the model server at ", endpoint->address,
             " does not apply token masks (an older server: ModelInfo.token_mask is false); a "
             "constrained generation needs one that does"));
}

void ModelPool::Probe(Endpoint& e) {
  bool was_up;
  std::shared_ptr<const Connection> connection;
  {
    absl::MutexLock lock(&mu_);
    was_up = e.up;
    connection = e.connection;
    // An endpoint that went down is probed over a new channel. The old one
    // can stay in TRANSIENT_FAILURE, failing every call at once, for many
    // seconds after its server is back (gRPC 1.51, measured: 9-14 s after a
    // restarted model server was ready), while a new channel connects at
    // once. Kept only when it answers.
    if (!was_up && e.used) connection = NewConnection(e.address);
    e.used = true;
  }
  // An endpoint that is down gets a short deadline: its callers retry
  // (ModelClient: 100 ms doubling to 1 s).
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(
      absl::Now() +
      (was_up ? options_.probe_timeout : std::min(options_.probe_timeout, kDownProbeTimeout))));
  v1::ModelInfo info;
  const grpc::Status s = connection->stub->Info(&context, v1::ModelInfoRequest(), &info);
  absl::Status error;
  bool loading = false;
  if (!s.ok()) {
    loading = s.error_code() == grpc::StatusCode::UNAVAILABLE &&
              connection->channel->GetState(false) == GRPC_CHANNEL_READY;
    error = FromGrpcStatus(s);
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {  // another service at the address
      const std::string why =
          WrongServiceMessage(connection->channel, Service::kModel, options_.probe_timeout);
      error = absl::UnimplementedError(size() > 1 ? StrCat(e.address, ": ", why) : why);
    }
  }
  absl::MutexLock lock(&mu_);
  e.loading = loading;
  if (!error.ok()) {
    e.up = false;
    e.last_error = std::move(error);
    return;
  }
  if (have_info_ && info.vocab_size() != info_.vocab_size()) {
    e.up = false;
    e.last_error = absl::FailedPreconditionError(
        StrCat("the model at ", e.address, " has ", info.vocab_size(), " tokens, the one at ",
               endpoints_.front()->address, " ", info_.vocab_size(), ": not the same model"));
    return;
  }
  e.connection = std::move(connection);
  e.info = std::move(info);
  e.up = true;
  e.last_error = absl::OkStatus();
  if (!have_info_) {
    info_ = e.info;
    have_info_ = true;
  }
}

absl::Status ModelPool::Refresh() {
  const absl::Time asked = absl::Now();
  absl::MutexLock one_at_a_time(&refresh_mu_);
  std::vector<Endpoint*> listed;
  absl::Status last;
  {
    absl::MutexLock lock(&mu_);
    // Another caller's refresh began after this one was asked for: its
    // outcome is as fresh as ours would be.
    if (last_refresh_ >= asked) return last_refresh_status_;
    last_refresh_ = absl::Now();
  }
  absl::StatusOr<std::vector<std::string>> addresses = TargetAddresses(target_);
  last = addresses.status();
  {
    absl::MutexLock lock(&mu_);
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
          e->connection = NewConnection(address);
          found = e.get();
          endpoints_.push_back(std::move(e));
        }
        found->listed = true;
      }
    }
    for (auto& e : endpoints_) {
      if (e->listed) {
        listed.push_back(e.get());
      } else {
        e->up = false;
      }
    }
  }
  bool any_up = false;
  for (Endpoint* e : listed) Probe(*e);
  absl::Status result;
  {
    absl::MutexLock lock(&mu_);
    for (Endpoint* e : listed) {
      if (e->up) {
        any_up = true;
      } else {
        last = e->last_error;
      }
    }
    if (any_up) {
      result = absl::OkStatus();
    } else if (!last.ok() && !absl::IsUnavailable(last) && !absl::IsDeadlineExceeded(last)) {
      // A refusal that is the caller's own (a wrong token, a vocabulary that
      // does not fit) keeps its code; only unreachable replicas are
      // UNAVAILABLE.
      result = absl::Status(last.code(), StrCat("model service at ", spec_, ": ", last.message()));
    } else {
      result =
          absl::UnavailableError(StrCat("no model server is up at ", spec_, ": ", last.message()));
    }
    last_refresh_end_ = absl::Now();
    last_refresh_status_ = result;
  }
  return result;
}

ModelPool::Endpoint* ModelPool::Find(const std::string& replica_id) {
  if (replica_id.empty()) return nullptr;
  for (auto& e : endpoints_) {
    if (e->up && e->info.replica_id() == replica_id) return e.get();
  }
  return nullptr;
}

ModelPool::Endpoint* ModelPool::FindRestarted(const std::string& replica_id) {
  const std::string pod = ReplicaOf(replica_id);  // "<pod>.<epoch>": the pod
  if (pod.empty()) return nullptr;
  for (auto& e : endpoints_) {
    if (e->up && ReplicaOf(e->info.replica_id()) == pod) return e.get();
  }
  return nullptr;
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForSession(const std::string& session_id) {
  std::string replica = MovedTo(session_id);  // a session that moved: its new replica
  if (replica.empty()) replica = ReplicaOf(session_id);
  {
    absl::MutexLock lock(&mu_);
    if (Endpoint* e = Find(replica)) return e;
  }
  Refresh().IgnoreError();
  {
    absl::MutexLock lock(&mu_);
    if (Endpoint* e = Find(replica)) return e;
    if (Endpoint* e = FindRestarted(replica)) return e;
  }
  // Its replica is gone: the session may have moved to another one.
  if (absl::StatusOr<Endpoint*> e = Locate(session_id); e.ok()) return e;
  return absl::NotFoundError(StrCat("session \"", session_id, "\" is lost: no model server at ",
                                    spec_, " is replica \"", replica,
                                    "\" any more (restarted or gone)"));
}

absl::Status ModelPool::RefreshToPlace(bool unprobed) {
  bool refresh;
  {
    absl::MutexLock lock(&mu_);
    bool any = false, never_probed = false;
    for (const auto& e : endpoints_) {
      any = any || TakesNewSessions(*e);
      never_probed = never_probed || (e->listed && !e->used);
    }
    refresh = !any || (unprobed && never_probed) ||
              absl::Now() - last_refresh_ >= options_.refresh_interval;
  }
  return refresh ? Refresh() : absl::OkStatus();
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForNewSession() {
  if (absl::Status s = RefreshToPlace(/*unprobed=*/false); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    Endpoint* e = endpoints_[(next_ + i) % endpoints_.size()].get();
    if (TakesNewSessions(*e)) {
      next_ = (next_ + i + 1) % endpoints_.size();
      return e;
    }
  }
  return absl::UnavailableError(
      StrCat("no model server at ", spec_, " takes new sessions (all down or draining)"));
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForNamedSession(const std::string& name) {
  if (absl::Status s = RefreshToPlace(/*unprobed=*/true); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    // Where this process last found the name (a redirect, Locate, or a call
    // that went there), while that replica is up and not draining.
    if (const auto it = moved_.find(name); it != moved_.end()) {
      if (Endpoint* e = Find(it->second); e != nullptr && !e->info.draining()) return e;
      moved_.erase(it);  // Locate asks again
    }
  }
  // A name may live elsewhere than its rendezvous winner: moved there by a
  // drain while its pod was away (a rolling restart brings the pod back),
  // placed while a replica was down, before one was added, or by another
  // process. Asking the replicas first (one ListSessions each, for a name
  // this process has not placed) keeps its KV instead of prefilling the
  // whole history anew on the winner. A draining replica that still holds
  // it serves it until its drain moves it.
  if (absl::StatusOr<Endpoint*> e = Locate(name, /*count=*/false); e.ok()) return *e;
  absl::MutexLock lock(&mu_);
  std::vector<Endpoint*> candidates;
  for (const auto& e : endpoints_) {
    if (TakesNewSessions(*e) && !e->info.replica_id().empty()) candidates.push_back(e.get());
  }
  if (candidates.empty()) {
    return absl::UnavailableError(StrCat("no model server at ", spec_, " takes session \"", name,
                                         "\" (all down or draining)"));
  }
  // Ties (two replicas of one pod name) go the same way in every process.
  std::sort(candidates.begin(), candidates.end(), [](const Endpoint* a, const Endpoint* b) {
    return a->info.replica_id() < b->info.replica_id();
  });
  std::vector<std::string> pods;
  pods.reserve(candidates.size());
  for (const Endpoint* e : candidates) {
    std::string pod = ReplicaOf(e->info.replica_id());
    pods.push_back(pod.empty() ? e->info.replica_id() : std::move(pod));
  }
  Endpoint* winner = candidates[RendezvousOrder(name, pods).front()];
  if (moved_.size() >= kMaxMoved) moved_.clear();
  moved_[name] = winner->info.replica_id();  // placed: no Locate next time
  return winner;
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::ForNewSessionWithPrompt(
    std::span<const int32_t> prompt) {
  const PrefixIndex::Match match = prefixes_.Longest(prompt);
  if (match.tokens > 0) {
    if (absl::Status s = RefreshToPlace(/*unprobed=*/false); !s.ok()) return s;
    absl::MutexLock lock(&mu_);
    Endpoint* holder = nullptr;
    Endpoint* least = nullptr;
    for (const auto& e : endpoints_) {
      if (!TakesNewSessions(*e)) continue;
      if (least == nullptr || e->in_flight.load(std::memory_order_relaxed) <
                                  least->in_flight.load(std::memory_order_relaxed)) {
        least = e.get();
      }
      if (e->info.replica_id() == match.replica_id) holder = e.get();
    }
    if (holder != nullptr) {
      // Overloaded: the least busy replica instead (round robin might pick
      // the holder again).
      if (holder->in_flight.load(std::memory_order_relaxed) >
          least->in_flight.load(std::memory_order_relaxed) + options_.prefix_load_margin) {
        return least;
      }
      prefix_routed_.fetch_add(1, std::memory_order_relaxed);
      return holder;
    }
  }
  return ForNewSession();
}

void ModelPool::PlacedPrompt(const Endpoint* endpoint, std::span<const int32_t> prompt) {
  std::string replica;
  {
    absl::MutexLock lock(&mu_);
    replica = endpoint->info.replica_id();
  }
  if (!replica.empty()) prefixes_.Record(prompt, replica);
}

void ModelPool::Learned(Endpoint* endpoint, const std::string& session_id) {
  const std::string replica = ReplicaOf(session_id);
  absl::MutexLock lock(&mu_);
  if (!replica.empty()) endpoint->info.set_replica_id(replica);
}

void ModelPool::MarkDown(Endpoint* endpoint, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  endpoint->up = false;
  endpoint->last_error = why;
}

v1::ModelInfo ModelPool::InfoOf(const Endpoint* endpoint) const {
  absl::MutexLock lock(&mu_);
  return endpoint->info;
}

bool ModelPool::LearnLocation(const std::string& session_id, const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kSessionLocationKey);
  if (it == trailers.end() || it->second.empty()) return false;
  Moved(session_id, std::string(it->second.data(), it->second.size()));
  relocated_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ModelPool::Moved(const std::string& session_id, const std::string& replica_id) {
  absl::MutexLock lock(&mu_);
  if (moved_.size() >= kMaxMoved) moved_.clear();
  moved_[session_id] = replica_id;
}

std::string ModelPool::MovedTo(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  const auto it = moved_.find(session_id);
  return it == moved_.end() ? std::string() : it->second;
}

void ModelPool::Forget(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  moved_.erase(session_id);
}

absl::StatusOr<ModelPool::Endpoint*> ModelPool::Locate(const std::string& session_id, bool count) {
  {
    absl::MutexLock lock(&mu_);
    const auto it = moved_.find(session_id);
    if (it != moved_.end()) {
      if (Endpoint* e = Find(it->second)) return e;
    }
  }
  v1::ListSessionsRequest request;
  request.set_session_id(session_id);
  for (Endpoint* e : UpEndpoints()) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.probe_timeout));
    v1::ListSessionsResponse response;
    if (!Connect(e)->stub->ListSessions(&context, request, &response).ok()) continue;
    for (const v1::SessionInfo& s : response.sessions()) {
      if (s.session_id() != session_id) continue;  // a server older than the filter lists all
      const std::string replica = InfoOf(e).replica_id();
      if (!replica.empty()) Moved(session_id, replica);
      if (count) relocated_.fetch_add(1, std::memory_order_relaxed);
      return e;
    }
  }
  return absl::NotFoundError(
      StrCat("no model server at ", spec_, " holds session \"", session_id, "\""));
}

}  // namespace llm::client
