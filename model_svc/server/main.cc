// model_server: serves llm.v1.Model for one GGUF model file.
//
// Start-up: the file's header and configuration are read first (a bad path or
// file fails at once, exit status 1); then the server starts, NOT_SERVING,
// and prints its port; then the weights load and the server turns SERVING.
// Calls made while loading get UNAVAILABLE.
//
// Drain: on SIGTERM or SIGINT health turns NOT_SERVING and a new session
// (Prefill without a session_id, Fork) gets UNAVAILABLE, while calls on
// existing sessions and open DecodeStreams go on. Once no call is in flight,
// or after --drain_seconds, the server stops (cancelling what is left) and
// exits 0.
//
// Sessions across a restart (--session_dir, session_dir.h): saved on drain
// once the gRPC server has stopped, restored under their old ids before it
// turns SERVING; in between, checkpointed when idle and changed
// (--session_checkpoint_seconds, session_checkpoint.h). Sessions evicted for
// memory go to --kv_spill_dir (spill_dir.h) and come back on their next call.
//
// Live migration (--peers, migration.h): on drain the sessions move to the
// peers under their ids first, each as soon as the request in flight on it
// has ended, and calls on a moved session get NOT_FOUND with its location;
// then the drain goes on as above.
//
// Identity: the replica id "<--session_prefix><--pod_name>.<epoch>" (epoch:
// the start time in Unix milliseconds, hex) begins every session id, so a
// client can route a session to its replica and tell a restarted one's ids
// from the old ones.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/transport/model_pool.h"
#include "common/cpu_set.h"
#include "common/flags.h"
#include "common/gguf/gguf.h"
#include "common/grpc/request_log.h"
#include "common/grpc/security.h"
#include "common/grpc/server_flags.h"
#include "common/grpc/server_runner.h"
#include "common/metrics/metrics_http.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "gateway/model_id.h"
#include "model_svc/backend/backend_factory.h"
#include "model_svc/core/backend.h"
#include "model_svc/engine/backend_flags.h"
#include "model_svc/engine/engine.h"
#include "model_svc/engine/loader.h"
#include "model_svc/model/config.h"
#include "model_svc/server/compute_affinity.h"
#include "model_svc/server/migration.h"
#include "model_svc/server/model_service.h"
#include "model_svc/server/session_checkpoint.h"
#include "model_svc/server/session_dir.h"
#include "model_svc/server/spill_dir.h"
#include "model_svc/server/step_watchdog.h"

ABSL_FLAG(std::string, model, "",
          "Model file (GGUF) of the llama, qwen2, qwen3, gemma3 or phi3 family. Required.");
ABSL_FLAG(std::string, listen, "127.0.0.1:50052",
          "Address to listen on; port 0 picks a free port (printed on startup).");
ABSL_FLAG(int, threads, 0, "CPU threads for the forward pass; 0: one per available core.");
ABSL_FLAG(bool, pin_threads, false,
          "Pin the forward pass's threads to the first --threads CPUs this process may use "
          "(with the CPU backend; the step loop to the first CPU with another), and every "
          "other thread (gRPC's) to the rest, so that RPC work never preempts the forward "
          "pass. Needs --threads below the available CPUs. See docs/model_service.md.");
ABSL_FLAG(std::string, backend, "auto",
          "cpu, cuda, or auto (CUDA when this build has it and a GPU is present, else CPU).");
ABSL_FLAG(
    int64_t, kv_cache_mb, 512,
    "KV cache size in MiB: the pool holds kv_cache_mb MiB / block bytes blocks of 16 "
    "positions, a block holding the keys and values of every layer (--kv_cache_type*). A request "
    "that needs more than the whole pool gets RESOURCE_EXHAUSTED; idle sessions are "
    "evicted, least recently used first, when it is full.");
ABSL_FLAG(int64_t, max_batch_tokens, 512,
          "Tokens computed per forward step, all sessions together (decodes plus prefill "
          "chunks); a longer prompt is prefilled over several steps.");
ABSL_FLAG(int64_t, prefill_step_tokens, -1,
          "N > 0: a step takes the next request's prefill only while it holds fewer than N "
          "prefill tokens, so that requests arriving together get their first tokens one after "
          "the other instead of together at the end of one long step (where a step's prefill "
          "costs the same per token from N tokens on, this costs no throughput). 0: a step's "
          "prefill chunks fill --max_batch_tokens. -1: the backend's choice, 32 on the CPU and 0 "
          "on CUDA (bench/README.md, \"Serving\").");
ABSL_FLAG(int64_t, max_sessions, 256,
          "Most sessions held at once; a new one beyond it evicts the least recently used "
          "idle session (its client rebuilds it), or gets RESOURCE_EXHAUSTED when every "
          "session has a call in flight.");
ABSL_FLAG(bool, prefix_cache, true,
          "Automatic prefix caching: KV blocks of prompt prefixes stay cached after their "
          "session ends (evicted least recently used) and new sessions that share a prefix "
          "reuse them instead of computing it again.");
ABSL_FLAG(absl::Duration, session_ttl, absl::Minutes(10),
          "Idle time after which a session expires (e.g. 90s, 10m, 1h).");
ABSL_FLAG(int64_t, max_context, 0,
          "Most tokens per session; 0: the model's context length (a larger value is capped "
          "to it). Growing past it is OUT_OF_RANGE.");
ABSL_FLAG(std::string, session_prefix, "",
          "Prepended to the replica id that begins every session id.");
ABSL_FLAG(std::string, pod_name, "",
          "This replica's name in its session ids and Info.replica_id "
          "(\"<session_prefix><pod_name>.<epoch>\", epoch: the start time), so that a client "
          "sends a session's calls to the replica that holds it; empty: the host name. Letters, "
          "digits, '-', '_' and '.' only.");
ABSL_FLAG(std::string, session_dir, "",
          "Keeps the sessions across a restart: on drain (SIGTERM/SIGINT, after the calls in "
          "flight) every session is written to this directory as a snapshot file named after its "
          "id, and at start every snapshot file there is imported under its old id (and removed). "
          "A kill (SIGKILL, a crash) keeps what --session_checkpoint_seconds wrote. Files of "
          "another model or damaged are skipped "
          "with a warning and left in place. Empty: off.");
ABSL_FLAG(double, session_checkpoint_seconds, 10,
          "With --session_dir: a session idle for this many seconds and changed since it was "
          "last written is written there in the background, so that a kill (SIGKILL, a crash) "
          "loses only what changed after it; the file of a session that ends is removed. "
          "0: off (sessions saved on drain only).");
ABSL_FLAG(std::string, kv_spill_dir, "",
          "A session evicted for memory (KV space, or --max_sessions) is written to this "
          "directory as a snapshot file instead of being dropped, and restored on its next call "
          "(the client does not notice); files left by an earlier process are restored too. A "
          "full or failing disk drops it as without this flag (llm_kv_spill_total counts each). "
          "CPU backend only. Empty: off.");
ABSL_FLAG(int64_t, kv_spill_quota_mb, 4096,
          "The most --kv_spill_dir holds, in MiB; past it the least recently spilled sessions "
          "are removed (dropped). 0: none kept.");
ABSL_FLAG(double, drain_seconds, 5,
          "On SIGTERM/SIGINT (the drain; the issue's --drain-timeout): health turns NOT_SERVING, "
          "new sessions get UNAVAILABLE, calls on existing sessions and open streams go on for "
          "up to this many seconds (the server exits as soon as none is in flight), then what "
          "is left is cancelled.");
ABSL_FLAG(int64_t, max_streams, 1024,
          "Most DecodeStreams open at once; one more gets RESOURCE_EXHAUSTED. 0: no limit.");
ABSL_FLAG(double, step_watchdog_seconds, 10,
          "Readiness follows a live step loop: health turns NOT_SERVING while requests are "
          "pending and the engine's step loop has not gone round for this many seconds (a hung "
          "step), and SERVING again when it does. 0: off.");
ABSL_FLAG(std::string, served_model_name, "",
          "The model_name label of the vllm: metrics (docs/operations.md): the model's id in the "
          "OpenAI API, as the gateway's --served_model_name. Empty: the gateway's default id, the "
          "model file's name without .gguf and its quantization.");
ABSL_FLAG(int, max_message_bytes, 16 << 20,
          "Largest request or response message; a larger request gets RESOURCE_EXHAUSTED "
          "(counted in llm_limit_rejected_total{reason=\"message_size\"}; gRPC itself refuses, "
          "uncounted, requests over twice this).");

ABSL_FLAG(std::string, peers, "",
          "Live migration on drain: the model servers to move this one's sessions to on "
          "SIGTERM/SIGINT, as the client's --model takes them (a list, or dns:///NAME:PORT of a "
          "headless Service; this server itself, recognised by its replica id, is skipped). Each "
          "session goes to the first up, not draining peer in its rendezvous order (the next on "
          "failure), under the same id; calls on it here then get NOT_FOUND with the "
          "llm-session-location trailing metadata. The peers are called with this server's "
          "--tls_cert/--tls_key (as the client certificate), --tls_ca and --auth_token_file. "
          "Empty: off (sessions are dropped on drain, or saved by --session_dir).");
ABSL_FLAG(int, migrate_parallel, 4, "Sessions moved at once on drain (--peers).");

namespace llm {
namespace {

constexpr int32_t kKvBlockSize = 16;
constexpr absl::Duration kDrainPoll = absl::Milliseconds(20);

// Prints what --session_dir did (`outcome`: saved or restored) and counts it.
void ReportSessionDir(std::string_view outcome, const std::string& dir, int64_t done,
                      int64_t skipped, ModelMetrics* metrics) {
  std::fprintf(stderr, "model_server: --session_dir %s: %lld sessions %.*s, %lld skipped\n",
               dir.c_str(), static_cast<long long>(done), static_cast<int>(outcome.size()),
               outcome.data(), static_cast<long long>(skipped));
  if (metrics == nullptr) return;
  metrics->CountSessionDir(outcome, done);
  metrics->CountSessionDir("skipped", skipped);
}

// --pod_name, or the host name; INVALID_ARGUMENT for characters that do not
// belong in a session id.
absl::StatusOr<std::string> PodName() {
  std::string name = absl::GetFlag(FLAGS_pod_name);
  std::string what = "--pod_name";
  if (name.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return absl::FailedPreconditionError("no host name: set --pod_name");
    }
    name = host;
    what = "the host name (set --pod_name)";
  }
  if (absl::Status s = CheckSessionIdChars(what, name); !s.ok()) return s;
  return name;
}

// "<prefix><pod>.<start time in Unix milliseconds, hex>".
std::string ReplicaId(const std::string& prefix, const std::string& pod, absl::Time start) {
  char epoch[32];
  std::snprintf(epoch, sizeof(epoch), "%llx",
                static_cast<unsigned long long>(absl::ToUnixMillis(start)));
  return StrCat(prefix, pod, ".", epoch);
}

void PrintError(const absl::Status& status) {
  std::fprintf(stderr, "model_server: %s\n", std::string(status.message()).c_str());
}

// The --peers pool (null without --peers), its channels with this server's
// TLS files and `token` as a client's; INVALID_ARGUMENT for a bad target.
absl::StatusOr<std::unique_ptr<client::ModelPool>> PeerPool(const std::string& token) {
  const std::string spec = absl::GetFlag(FLAGS_peers);
  if (spec.empty()) return nullptr;
  LLM_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ChannelCredentials> creds,
      MakeChannelCredentials({absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                              absl::GetFlag(FLAGS_tls_ca)}));
  absl::StatusOr<std::unique_ptr<client::ModelPool>> pool = client::ModelPool::Create(
      spec,
      [creds, token](const std::string& address, const std::string& server_name) {
        grpc::ChannelArguments args;
        // A peer resolved from a DNS name is reached by its IP: its
        // certificate is checked against the name.
        if (!server_name.empty() && !absl::GetFlag(FLAGS_tls_ca).empty()) {
          args.SetSslTargetNameOverride(server_name);
        }
        args.SetMaxSendMessageSize(-1);
        return CreateAuthChannel(address, creds, args, token);
      },
      client::ModelPoolOptions());
  if (!pool.ok()) {
    return absl::InvalidArgumentError(StrCat("--peers: ", pool.status().message()));
  }
  return pool;
}

// The drain's live migration (--peers): moves every session to a peer, each
// as soon as it is idle, until none is left or `deadline`.
void MigrateSessions(engine::Engine& engine, client::ModelPool& peers, ModelServiceImpl& service,
                     ModelMetrics* metrics, const std::string& replica_id, absl::Time deadline) {
  const absl::Time start = absl::Now();
  const size_t sessions = engine.ListSessions().size();
  std::fprintf(stderr, "model_server: migrating %zu sessions to the peers (--peers %s)\n", sessions,
               absl::GetFlag(FLAGS_peers).c_str());
  MigrationOptions options;
  options.replica_id = replica_id;
  options.parallel = absl::GetFlag(FLAGS_migrate_parallel);
  SessionMigrator migrator(engine, peers, service.moved(), metrics, options);
  int64_t left = 0;
  while ((left = migrator.Pass(deadline)) > 0 && absl::Now() < deadline) {
    absl::SleepFor(kDrainPoll);
  }
  const MigrationCounts c = migrator.counts();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::fprintf(stderr,
               "model_server: migration: %lld sessions moved (%lld tokens, %.1f MiB, %.1f MiB/s), "
               "%lld failed, %lld left, in %.2f s\n",
               static_cast<long long>(c.moved), static_cast<long long>(c.tokens),
               c.bytes / (1024.0 * 1024.0),
               seconds > 0 ? c.bytes / (1024.0 * 1024.0) / seconds : 0.0,
               static_cast<long long>(c.failed), static_cast<long long>(left), seconds);
}

// "135.0M params", for the loaded line.
std::string DescribeParams(const gguf::File& file) {
  double n = 0;
  for (const gguf::TensorInfo& t : file.tensors()) n += static_cast<double>(t.elements());
  char buf[64];
  if (n >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fB params", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.1fM params", n / 1e6);
  } else if (n >= 1e3) {
    std::snprintf(buf, sizeof(buf), "%.1fK params", n / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f params", n);
  }
  return buf;
}

// --pin_threads, before any thread starts: splits this thread's CPUs (the
// compute threads take the first --threads with the CPU backend, the first
// one with another) and moves this thread to the rest, so that every thread
// it starts, and theirs, starts there; the engine puts its compute threads
// on theirs. "auto" is resolved here: probing CUDA may start the driver's
// threads, so this thread moves to the rest of a CUDA split first.
absl::StatusOr<ComputeAffinity> PinMainThread(const std::string& backend, int threads) {
  LLM_ASSIGN_OR_RETURN(const std::vector<int> allowed, ThisThreadCpus());
  LLM_RETURN_IF_ERROR(SplitCpus(allowed, threads).status());  // --threads must leave one
  bool cpu = backend == "cpu";
  if (backend == "auto") {
    LLM_ASSIGN_OR_RETURN(const ComputeAffinity cuda, SplitCpus(allowed, 1));
    LLM_RETURN_IF_ERROR(PinThisThread(cuda.other_cpus));
    cpu = !model::CudaBackendStatus().ok();
  }
  LLM_ASSIGN_OR_RETURN(ComputeAffinity split, SplitCpus(allowed, cpu ? threads : 1));
  LLM_RETURN_IF_ERROR(PinThisThread(split.other_cpus));
  return split;
}

int Main() {
  const std::string path = absl::GetFlag(FLAGS_model);
  if (path.empty()) {
    std::fprintf(stderr, "model_server: --model is required (see --help)\n");
    return 2;
  }
  // Each numeric flag and its rule: a bad value is named with its own rule.
  const struct {
    const absl::CommandLineFlag& flag;
    bool ok;
    const char* rule;
  } checks[] = {
      {absl::GetFlagReflectionHandle(FLAGS_threads), absl::GetFlag(FLAGS_threads) >= 0, ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_max_batch_tokens),
       absl::GetFlag(FLAGS_max_batch_tokens) >= 1, ">= 1"},
      {absl::GetFlagReflectionHandle(FLAGS_prefill_step_tokens),
       absl::GetFlag(FLAGS_prefill_step_tokens) >= -1, ">= -1"},
      {absl::GetFlagReflectionHandle(FLAGS_max_sessions), absl::GetFlag(FLAGS_max_sessions) >= 1,
       ">= 1"},
      {absl::GetFlagReflectionHandle(FLAGS_max_context), absl::GetFlag(FLAGS_max_context) >= 0,
       ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_session_ttl),
       absl::GetFlag(FLAGS_session_ttl) > absl::ZeroDuration(), "> 0"},
      {absl::GetFlagReflectionHandle(FLAGS_max_message_bytes),
       absl::GetFlag(FLAGS_max_message_bytes) >= 1, ">= 1"},
      {absl::GetFlagReflectionHandle(FLAGS_kv_cache_mb), absl::GetFlag(FLAGS_kv_cache_mb) >= 1,
       ">= 1"},
      {absl::GetFlagReflectionHandle(FLAGS_drain_seconds), absl::GetFlag(FLAGS_drain_seconds) >= 0,
       ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_step_watchdog_seconds),
       absl::GetFlag(FLAGS_step_watchdog_seconds) >= 0, ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_max_streams), absl::GetFlag(FLAGS_max_streams) >= 0,
       ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_session_checkpoint_seconds),
       absl::GetFlag(FLAGS_session_checkpoint_seconds) >= 0, ">= 0"},
      {absl::GetFlagReflectionHandle(FLAGS_kv_spill_quota_mb),
       absl::GetFlag(FLAGS_kv_spill_quota_mb) >= 0 &&
           absl::GetFlag(FLAGS_kv_spill_quota_mb) <= (int64_t{1} << 30),
       "0 to 2^30"},
      {absl::GetFlagReflectionHandle(FLAGS_migrate_parallel),
       absl::GetFlag(FLAGS_migrate_parallel) >= 1, ">= 1"},
  };
  for (const auto& check : checks) {
    if (!check.ok) {
      std::fprintf(stderr, "model_server: --%s must be %s, got %s\n",
                   std::string(check.flag.Name()).c_str(), check.rule,
                   check.flag.CurrentValue().c_str());
      return 2;
    }
  }
  // The checkpoints remove the files of the sessions the engine no longer
  // holds, which in one directory would be the spilled ones.
  const auto same_dir = [](const std::string& a, const std::string& b) {
    std::error_code ec;  // a path that cannot be resolved is compared as written
    auto resolved = [&ec](const std::string& p) {
      std::filesystem::path r = std::filesystem::weakly_canonical(p, ec);
      return ec ? std::filesystem::path(p).lexically_normal() : r;
    };
    return !a.empty() && !b.empty() && resolved(a) == resolved(b);
  };
  if (same_dir(absl::GetFlag(FLAGS_kv_spill_dir), absl::GetFlag(FLAGS_session_dir))) {
    std::fprintf(stderr, "model_server: --kv_spill_dir and --session_dir must differ\n");
    return 2;
  }
  // First: no thread has started yet.
  std::optional<ComputeAffinity> pinned;
  if (absl::GetFlag(FLAGS_pin_threads)) {
    absl::StatusOr<ComputeAffinity> split =
        absl::GetFlag(FLAGS_threads) == 0
            ? absl::FailedPreconditionError("--pin_threads needs --threads, below the CPU count")
            : PinMainThread(absl::GetFlag(FLAGS_backend), absl::GetFlag(FLAGS_threads));
    if (!split.ok()) {
      PrintError(split.status());
      return split.status().code() == absl::StatusCode::kFailedPrecondition ? 2 : 1;
    }
    pinned = *std::move(split);
  }
  const absl::StatusOr<std::string> pod = PodName();
  if (!pod.ok()) {
    PrintError(pod.status());
    return 2;
  }
  if (absl::Status s = CheckSessionIdChars("--session_prefix", absl::GetFlag(FLAGS_session_prefix));
      !s.ok()) {
    PrintError(s);
    return 2;
  }
  const absl::StatusOr<LogLevel> log_level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!log_level.ok()) {
    PrintError(log_level.status());
    return 2;
  }
  SetLogLevel(*log_level);

  // The header and configuration: fast, and a bad file fails before the port line.
  std::fprintf(stderr, "model_server: loading %s\n", path.c_str());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<gguf::File>> opened = gguf::File::Open(path);
  if (!opened.ok()) {
    PrintError(opened.status());
    return 1;
  }
  std::shared_ptr<const gguf::File> file = std::move(*opened);
  absl::StatusOr<model::ModelConfig> config = model::ModelConfig::FromGguf(*file);
  if (!config.ok()) {
    PrintError(config.status());
    return 1;
  }
  engine::LoadOptions load;
  llm::engine::ApplyBackendFlags(&load);
  load.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  load.kv_block_size = kKvBlockSize;
  const absl::StatusOr<model::KvCacheShape> shape = engine::KvPoolShape(*config, load);
  if (!shape.ok()) {
    PrintError(shape.status());
    return 2;
  }

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)});
  absl::StatusOr<std::string> token = ReadTokenFile(absl::GetFlag(FLAGS_auth_token_file));
  for (const absl::Status& s : {credentials.status(), token.status()}) {
    if (!s.ok()) {
      PrintError(s);
      return 2;
    }
  }
  std::unique_ptr<BearerAuth> auth;
  if (!token->empty()) auth = std::make_unique<BearerAuth>(*token);
  absl::StatusOr<std::unique_ptr<client::ModelPool>> peers = PeerPool(*token);
  if (!peers.ok()) {
    PrintError(peers.status());
    return 2;
  }

  std::unique_ptr<MetricsHttp> metrics_http;
  std::unique_ptr<ModelMetrics> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    absl::StatusOr<std::unique_ptr<MetricsHttp>> m =
        MetricsHttp::Start(absl::GetFlag(FLAGS_metrics_listen));
    if (!m.ok()) {
      PrintError(m.status());
      return 1;
    }
    metrics_http = std::move(*m);
    std::string served_name = absl::GetFlag(FLAGS_served_model_name);
    if (served_name.empty()) served_name = gateway::ModelIdFromFileName(path);
    metrics = std::make_unique<ModelMetrics>(metrics_http->registry(),
                                             VllmLabels{served_name, kKvBlockSize});
    metrics_http->Add(metrics->engine_collectable());
  }

  // The server first, so that health checks answer (NOT_SERVING) while loading.
  ModelServiceImpl service;
  service.SetMetrics(metrics.get());
  service.SetAuth(auth.get());
  ServerOptions server_options;
  server_options.listen = absl::GetFlag(FLAGS_listen);
  // The service checks --max_message_bytes itself (answering and counting);
  // gRPC's own limit, twice that, bounds the memory a request may take.
  server_options.max_receive_bytes = static_cast<int>(
      std::min<int64_t>(int64_t{2} * absl::GetFlag(FLAGS_max_message_bytes), INT32_MAX));
  server_options.max_send_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  server_options.credentials = *credentials;
  absl::StatusOr<std::unique_ptr<ServerRunner>> started =
      ServerRunner::Start(server_options, {&service});
  if (!started.ok()) {
    PrintError(started.status());
    return 1;
  }
  std::unique_ptr<ServerRunner> runner = std::move(*started);
  // Tests and scripts read this line to learn the port.
  std::printf("model_server: listening on %s\n", runner->endpoint().c_str());
  if (metrics_http != nullptr) {
    std::printf("model_server: metrics on port %d\n", metrics_http->port());
  }
  std::fflush(stdout);

  // Signals are taken by their own thread while this one loads the weights;
  // one that comes during the load takes effect when the load returns.
  std::atomic<bool> stop{false};
  int signal_number = 0;
  std::thread signals([&] {
    signal_number = runner->WaitForTerminationSignal();
    stop.store(true);
  });

  load.model_path = path;
  load.threads = absl::GetFlag(FLAGS_threads);
  if (pinned.has_value()) {
    load.compute_cpus = pinned->compute_cpus;
    load.callback_cpus = pinned->all_cpus;  // compute_affinity.h says why
  }
  load.backend = absl::GetFlag(FLAGS_backend);
  load.engine.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  load.engine.prefill_step_tokens = absl::GetFlag(FLAGS_prefill_step_tokens);
  load.engine.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  load.engine.session_ttl = absl::GetFlag(FLAGS_session_ttl);
  load.engine.max_context = absl::GetFlag(FLAGS_max_context);
  load.engine.prefix_cache = absl::GetFlag(FLAGS_prefix_cache);
  if (const std::string dir = absl::GetFlag(FLAGS_kv_spill_dir); !dir.empty()) {
    load.engine.spill =
        std::make_shared<SpillDir>(dir, absl::GetFlag(FLAGS_kv_spill_quota_mb) << 20);
  }
  const std::string replica_id = ReplicaId(absl::GetFlag(FLAGS_session_prefix), *pod, start);
  load.engine.session_prefix = StrCat(replica_id, ".");
  absl::StatusOr<std::unique_ptr<engine::Engine>> loaded = engine::LoadEngine(load);
  if (loaded.ok() && pinned.has_value()) {
    // The CPU backend's threads are all compute threads; another backend's
    // step loop drives its device alone.
    std::fprintf(stderr, "model_server: %d compute threads on CPUs %s, the other threads on %s\n",
                 (*loaded)->backend_name() == "cpu" ? absl::GetFlag(FLAGS_threads) : 1,
                 absl::StrJoin(pinned->compute_cpus, ",").c_str(),
                 absl::StrJoin(pinned->other_cpus, ",").c_str());
  }
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<StepWatchdog> watchdog;
  std::unique_ptr<SessionCheckpointer> checkpointer;
  int exit_code = 0;
  if (loaded.ok()) {
    engine = std::move(*loaded);
    const model::ModelConfig& c = engine->config();
    const std::string name = c.name.empty() ? path.substr(path.rfind('/') + 1) : c.name;
    std::fprintf(stderr, "model_server: loaded %s (%lld layers, %s) on %s in %.1f s\n",
                 name.c_str(), static_cast<long long>(c.block_count), DescribeParams(*file).c_str(),
                 engine->backend_description().c_str(), absl::ToDoubleSeconds(absl::Now() - start));
    const std::string prefill_target =
        engine->prefill_step_tokens() > 0
            ? absl::StrCat("a new prompt while under ", engine->prefill_step_tokens(),
                           " prefill tokens")
            : "prompts fill it";
    std::fprintf(stderr,
                 "model_server: context %lld tokens, KV cache %d blocks of %d (%.1f MiB), "
                 "%lld tokens per step (%s), %lld sessions, prefix cache %s\n",
                 static_cast<long long>(engine->max_context()),
                 static_cast<int>(engine->Stats().kv_blocks_total), kKvBlockSize,
                 engine->Stats().kv_blocks_total * static_cast<double>(shape->block_bytes()) /
                     (1024.0 * 1024.0),
                 static_cast<long long>(absl::GetFlag(FLAGS_max_batch_tokens)),
                 prefill_target.c_str(), static_cast<long long>(absl::GetFlag(FLAGS_max_sessions)),
                 absl::GetFlag(FLAGS_prefix_cache) ? "on" : "off");
    std::fprintf(stderr, "model_server: replica %s\n", replica_id.c_str());
    ModelServiceOptions service_options;
    service_options.kv_block_size = kKvBlockSize;
    service_options.replica_id = replica_id;
    service_options.file_name = path.substr(path.rfind('/') + 1);
    service_options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
    service_options.max_streams = absl::GetFlag(FLAGS_max_streams);
    if (const std::string dir = absl::GetFlag(FLAGS_session_dir); !dir.empty()) {
      const SessionDirCounts restored = RestoreSessions(*engine, dir);
      ReportSessionDir("restored", dir, restored.restored, restored.skipped, metrics.get());
      if (const double every = absl::GetFlag(FLAGS_session_checkpoint_seconds); every > 0) {
        checkpointer = std::make_unique<SessionCheckpointer>(
            engine.get(), dir, absl::Seconds(every), [m = metrics.get()](int64_t n) {
              if (m != nullptr) m->CountSessionDir("checkpointed", n);
            });
      }
    }
    service.SetEngine(engine.get(), service_options);
    if (metrics != nullptr) metrics->SetEngine(engine.get());
    if (!stop.load()) runner->SetServing(true);
    if (absl::GetFlag(FLAGS_step_watchdog_seconds) > 0) {
      watchdog =
          std::make_unique<StepWatchdog>([e = engine.get()] { return e->Stats(); },
                                         [&runner, &stop](bool serving) {
                                           if (!stop.load()) runner->SetServing(serving);
                                         },
                                         absl::Seconds(absl::GetFlag(FLAGS_step_watchdog_seconds)));
      watchdog->Start(absl::Milliseconds(500));
    }
  } else if (!stop.load()) {
    PrintError(loaded.status());
    exit_code = 1;
    kill(getpid(), SIGTERM);  // ends the signal thread (SIGTERM is blocked everywhere else)
  }
  signals.join();
  if (watchdog != nullptr) watchdog->Stop();  // before the drain: it must not say SERVING again
  // The drain: no new sessions, the rest goes on while any call is in flight.
  service.StartDrain();  // first: nothing new is admitted once health says NOT_SERVING
  runner->SetServing(false);
  const absl::Time drain_end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_drain_seconds));
  if (exit_code == 0) {
    std::fprintf(stderr, "model_server: signal %d, draining (%lld calls in flight, up to %.1f s)\n",
                 signal_number, static_cast<long long>(service.calls_in_flight()),
                 absl::GetFlag(FLAGS_drain_seconds));
    if (engine != nullptr && *peers != nullptr) {
      MigrateSessions(*engine, **peers, service, metrics.get(), replica_id, drain_end);
    }
    while (engine != nullptr && service.calls_in_flight() > 0 && absl::Now() < drain_end) {
      absl::SleepFor(kDrainPoll);
    }
    std::fprintf(stderr, "model_server: shutting down (%lld calls cancelled)\n",
                 static_cast<long long>(service.calls_in_flight()));
  }
  if (engine != nullptr) engine->StopAdmission();
  runner->Shutdown(absl::ZeroDuration());  // cancels what is still in flight
  runner.reset();
  if (checkpointer != nullptr) checkpointer->Stop();  // the drain's save writes them all
  // No gRPC call is left: the sessions are as the clients last saw them.
  if (const std::string dir = absl::GetFlag(FLAGS_session_dir); engine != nullptr && !dir.empty()) {
    const SessionDirCounts saved = SaveSessions(*engine, dir);
    ReportSessionDir("saved", dir, saved.saved, saved.skipped, metrics.get());
  }
  if (metrics != nullptr) metrics->SetEngine(nullptr);  // a scrape no longer reads the engine
  metrics_http.reset();  // stops the HTTP server before the engine goes
  engine.reset();        // every call has ended: no engine callback is pending
  return exit_code;
}

}  // namespace
}  // namespace llm

int main(int argc, char** argv) {
  llm::BlockTerminationSignals();
  llm::ParseFlags(
      argc, argv,
      "Serves the llm.v1.Model gRPC service (sessions with persistent KV caches, Prefill, "
      "Decode, DecodeStream) for one GGUF model (llama, qwen2, qwen3, gemma3 or phi3 family) on "
      "the CPU or CUDA backend (--backend).\n"
      "Usage: model_server --model PATH.gguf [--listen 127.0.0.1:50052] [--kv_cache_mb 512]\n"
      "Health (grpc.health.v1) is NOT_SERVING until the weights are loaded; the port line is "
      "printed on stdout as soon as the server listens.");
  return llm::Main();
}
