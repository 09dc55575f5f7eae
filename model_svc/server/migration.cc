#include "model_svc/server/migration.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "common/rendezvous.h"
#include "common/strings.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/server/snapshot_rpc.h"

namespace llm {
namespace {

constexpr absl::Duration kPeersRefresh = absl::Seconds(1);
constexpr absl::Duration kBusyPoll = absl::Milliseconds(2);

}  // namespace

SessionMigrator::SessionMigrator(engine::Engine& engine, client::ModelPool& peers,
                                 MovedSessions& moved, ModelMetrics* metrics,
                                 MigrationOptions options)
    : engine_(engine),
      peers_(peers),
      moved_(moved),
      metrics_(metrics),
      options_(std::move(options)) {}

MigrationCounts SessionMigrator::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::vector<SessionMigrator::Peer> SessionMigrator::Peers() {
  if (absl::Now() - last_refresh_ >= kPeersRefresh) {
    peers_.Refresh().IgnoreError();  // none up: no peer, every move fails
    last_refresh_ = absl::Now();
  }
  std::vector<Peer> out;
  for (client::ModelPool::Endpoint* e : peers_.UpEndpoints()) {
    const v1::ModelInfo info = peers_.InfoOf(e);
    if (info.draining() || info.replica_id().empty() || info.replica_id() == options_.replica_id) {
      continue;
    }
    out.push_back({info.replica_id(), client::ModelPool::ReplicaOf(info.replica_id()), e});
  }
  return out;
}

absl::Status SessionMigrator::Send(const Peer& peer, const std::string& id,
                                   const std::string& bytes) {
  const std::shared_ptr<const client::ModelPool::Connection> connection =
      peers_.Connect(peer.endpoint);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ImportSessionResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::SessionChunk>> writer =
      connection->stub->ImportSession(&context, &response);
  v1::SessionChunk chunk;
  chunk.set_session_id(id);
  size_t offset = 0;
  do {  // the first chunk carries the id (and data, if any)
    const size_t n = std::min<size_t>(kSnapshotChunkBytes, bytes.size() - offset);
    chunk.set_data(bytes.data() + offset, n);
    offset += n;
    if (!writer->Write(chunk)) break;  // the call ended: Finish says why
    chunk.clear_session_id();
  } while (offset < bytes.size());
  writer->WritesDone();
  const absl::Status s = FromGrpcStatus(writer->Finish());
  if (s.ok() && response.session_id() != id) {
    return absl::InternalError(StrCat("the peer imported it as \"", response.session_id(), "\""));
  }
  return s;
}

SessionMigrator::Outcome SessionMigrator::Move(const std::string& id,
                                               const std::vector<Peer>& peers) {
  const absl::Time start = absl::Now();
  const engine::SessionInfo before = Info(id);
  absl::StatusOr<std::string> bytes = engine_.ExportSession(id, /*compress=*/false);
  if (absl::IsAborted(bytes.status())) return Outcome::kRetry;  // a call got in first
  if (!bytes.ok()) {
    // Gone meanwhile (released, expired: nothing to move), or not exportable
    // (a backend without snapshots: UNIMPLEMENTED), which counts as failed.
    std::fprintf(stderr, "model_server: migration: session %s not exported: %s\n", id.c_str(),
                 std::string(bytes.status().message()).c_str());
    return absl::IsNotFound(bytes.status()) ? Outcome::kGone : Outcome::kFailed;
  }
  std::vector<std::string> pods;
  for (const Peer& p : peers) pods.push_back(p.pod);
  std::string why = "no peer is up and not draining";
  for (size_t i : RendezvousOrder(id, pods)) {
    const absl::Status s = Send(peers[i], id, *bytes);
    if (s.ok()) {
      // A call admitted just before the mark may have changed the session
      // after the copy: then the peer's copy is stale; drop it, try again.
      const engine::SessionInfo after = Info(id);
      if (after.busy || after.num_tokens != before.num_tokens) {
        ReleaseOnPeer(peers[i], id);
        return Outcome::kRetry;
      }
      moved_.End(id, peers[i].replica_id);
      const absl::Duration took = absl::Now() - start;
      const int64_t tokens = after.num_tokens;
      engine_.Release(id).IgnoreError();
      std::fprintf(stderr,
                   "model_server: migration: session %s (%lld tokens, %.1f MiB) -> %s in %.0f ms\n",
                   id.c_str(), static_cast<long long>(tokens), bytes->size() / (1024.0 * 1024.0),
                   peers[i].replica_id.c_str(), absl::ToDoubleMilliseconds(took));
      absl::MutexLock lock(&mu_);
      ++counts_.moved;
      counts_.bytes += static_cast<int64_t>(bytes->size());
      counts_.tokens += tokens;
      counts_.busy += took;
      return Outcome::kMoved;
    }
    why = StrCat(peers[i].replica_id, ": ", s.ToString());
  }
  std::fprintf(stderr, "model_server: migration: session %s not moved (%s)\n", id.c_str(),
               why.c_str());
  return Outcome::kFailed;
}

engine::SessionInfo SessionMigrator::Info(const std::string& id) const {
  for (engine::SessionInfo& s : engine_.ListSessions()) {
    if (s.id == id) return s;
  }
  return {};
}

void SessionMigrator::ReleaseOnPeer(const Peer& peer, const std::string& id) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ReleaseRequest request;
  request.set_session_id(id);
  v1::ReleaseResponse response;
  peers_.Connect(peer.endpoint)->stub->Release(&context, request, &response);
}

int64_t SessionMigrator::Pass(absl::Time deadline) {
  std::vector<std::string> todo;
  {
    absl::MutexLock lock(&mu_);
    for (const engine::SessionInfo& s : engine_.ListSessions()) {
      if (!tried_.contains(s.id)) todo.push_back(s.id);
    }
  }
  if (todo.empty()) return 0;
  const std::vector<Peer> peers = Peers();
  std::atomic<size_t> next{0};
  std::atomic<int64_t> left{0};
  const auto worker = [&] {
    for (size_t i = next++; i < todo.size(); i = next++) {
      const std::string& id = todo[i];
      if (absl::Now() >= deadline) {
        ++left;
        continue;
      }
      moved_.Begin(id);  // from here no call starts on it: its calls wait for the outcome
      // The request in flight on it (a decode step, a prefill) ends first.
      while (Info(id).busy && absl::Now() < deadline) absl::SleepFor(kBusyPoll);
      if (Info(id).busy) {
        moved_.End(id, "");
        ++left;
        continue;
      }
      const Outcome outcome = Move(id, peers);
      if (outcome != Outcome::kMoved) moved_.End(id, "");
      if (outcome == Outcome::kRetry) {  // the next pass tries it again
        ++left;
        continue;
      }
      if (metrics_ != nullptr && outcome != Outcome::kGone) {
        metrics_->CountMigration(outcome == Outcome::kMoved ? "moved" : "failed");
      }
      absl::MutexLock lock(&mu_);
      tried_.insert(id);
      if (outcome == Outcome::kFailed) ++counts_.failed;
    }
  };
  std::vector<std::thread> threads;
  const int n = std::clamp<int>(options_.parallel, 1, static_cast<int>(todo.size()));
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return left.load();
}

}  // namespace llm
