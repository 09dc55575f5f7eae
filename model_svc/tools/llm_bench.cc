// llm-bench: prompt-processing and generation throughput of the engine,
// measured the way llama.cpp's llama-bench measures pp512 and tg128.
//
//   pp: one request of N random tokens on a fresh session (a batched prefill,
//       chunked by --max_batch_tokens), tokens / second.
//   tg: M single-token decode steps on a fresh session, tokens / second.
// Each test runs once as a warm-up, then --repetitions times; the figure is
// the mean of the repetitions' rates (llama-bench's avg_ts), with the
// standard deviation beside it.
//   sessions (--sessions 1,4,16): K sessions decode M tokens each at once
//       through the step loop, each session's next token submitted from the
//       engine's completion callback of its last one (as the model server's
//       stream reactors do; --session_threads: from one blocking thread per
//       session instead); aggregate tokens / second, and the speedup over one
//       session. The counts' repetitions take turns (1, 4, 16, 16, 4, 1, ...)
//       so that the machine's drift weighs on all of them alike. With -d,
//       each session first holds d random tokens of its own (untimed), so
//       that each step's attention reads K KV caches, as a server's does.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/marshalling.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/gguf/gguf.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#include "model_svc/engine/backend_flags.h"
#include "model_svc/engine/loader.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, model, "", "Path to a GGUF model (required).");
ABSL_FLAG(int, threads, 0, "CPU threads; 0: every core the process may use.");
ABSL_FLAG(std::string, backend, "cpu",
          "cpu, cuda, or auto (CUDA when this build has it and a GPU is present, else CPU).");
ABSL_FLAG(int, p, 512, "Prompt tokens for the prefill test (0 skips it).");
ABSL_FLAG(int, n, 128, "Generated tokens for the decode test (0 skips it).");
ABSL_FLAG(int, d, 0,
          "Context depth of the prefill and decode tests (llama-bench's -d): each repetition "
          "first prefills these many random tokens (the same ones each time, untimed; the "
          "prefix cache keeps their full blocks), then prefills -p tokens or decodes -n "
          "tokens after them. With --sessions, each session first holds -d random tokens of "
          "its own (untimed, no two alike: concurrent conversations, whose attention reads "
          "a KV cache each).");
ABSL_FLAG(int, repetitions, 5, "Timed repetitions of each test (after one warm-up).");
ABSL_FLAG(std::vector<std::string>, sessions, {},
          "Also measure aggregate decode throughput with these numbers of concurrent "
          "sessions (comma-separated, e.g. 1,4,16): each session decodes -n tokens, "
          "all at once, through the step loop (a warm-up each, then --repetitions rounds "
          "in which the counts take turns); with 1 in the list, aggregate_speedup gives "
          "each count's rate over one session's.");
ABSL_FLAG(bool, session_threads, false,
          "--sessions: drive each session from a thread of its own that blocks on each "
          "decode, instead of submitting its next token from the engine's completion "
          "callback (the default, as the model server's streams do). On a machine with few "
          "cores the threads' wake-ups between steps cost the step loop time.");
ABSL_FLAG(int, max_batch_tokens, 512, "Tokens per engine step.");
ABSL_FLAG(bool, measure_bandwidth, false,
          "Measure this machine's memory read bandwidth with --threads threads (the best of 5 "
          "passes over 1 GiB) before the model loads and again after the decode runs, and "
          "print the decode rate's share of the larger reading (a VM's bandwidth can change "
          "between the two: both are printed).");
ABSL_FLAG(double, roofline_gb_s, 0,
          "Memory bandwidth in GB/s (e.g. 4800 for an H200): also print the decode rate's "
          "share of the bandwidth roofline (weight bytes read per token x tokens/s).");
ABSL_FLAG(int64_t, kv_cache_mb, 256, "KV cache size in MiB.");

namespace {

constexpr char kUsage[] =
    "llm-bench --model PATH [--threads N] [-p 512] [-n 128] [-d 0] [--repetitions 5]\n"
    "          [--kv_cache_type f16|f32|q8_0] [--kv_cache_type_k ...] [--kv_cache_type_v ...]\n"
    "          [--sessions 1,4,16]\n"
    "Prints one JSON line: prefill_tok_s (pp), decode_tok_s (tg), their standard\n"
    "deviations, the model and the threads. Method: llama-bench's pp and tg tests.";

struct Rate {
  double mean = 0, stddev = 0;
};

Rate Summarize(const std::vector<double>& rates) {
  Rate r;
  for (double x : rates) r.mean += x;
  r.mean /= rates.size();
  for (double x : rates) r.stddev += (x - r.mean) * (x - r.mean);
  r.stddev = rates.size() > 1 ? std::sqrt(r.stddev / (rates.size() - 1)) : 0;
  return r;
}

// Bytes of weights one decode token reads: every matrix except the
// embedding table (one row of it is read), which counts when it doubles as
// the LM head. On the CUDA backend Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K
// matrices are held as they are, the other quantized types as fp16.
int64_t DecodeWeightBytes(const llm::gguf::File& file, bool cuda) {
  using llm::gguf::TensorType;
  const bool tied = file.FindTensor("output.weight") == nullptr;
  int64_t bytes = 0;
  for (const llm::gguf::TensorInfo& t : file.tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    const auto type = static_cast<TensorType>(t.ggml_type);
    // The CUDA backend keeps these as they are (with
    // --cuda_quantized_weights; cuda/quant_upload.h, QuantKindOf) and holds
    // every other quantized type as fp16.
    const bool kept = type == TensorType::kQ8_0 || type == TensorType::kQ4_0 ||
                      type == TensorType::kQ4_1 || type == TensorType::kQ4_K ||
                      type == TensorType::kQ5_K || type == TensorType::kQ6_K;
    if (!cuda || (kept && absl::GetFlag(FLAGS_cuda_quantized_weights))) {
      bytes += static_cast<int64_t>(t.size_bytes);
    } else {
      bytes += t.elements() * (type == TensorType::kF32 ? 4 : 2);
    }
  }
  return bytes;
}

// Memory read bandwidth in GB/s with `threads` threads: each sums its slice
// of a 1 GiB buffer (on huge pages, touched first), all at once; the best of
// 5 passes. The decode roofline of a machine without a published figure.
double MeasureReadBandwidth(int threads) {
  constexpr size_t kBytes = size_t{1} << 30;
  constexpr size_t kWords = kBytes / sizeof(uint64_t);
  void* p = std::aligned_alloc(size_t{2} << 20, kBytes);
  if (p == nullptr) return 0;
  madvise(p, kBytes, MADV_HUGEPAGE);
  auto* words = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < kWords; ++i) words[i] = i;
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const absl::Time start = absl::Now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const size_t begin = kWords * t / threads, end = kWords * (t + 1) / threads;
        uint64_t a = 0, b = 0, c = 0,
                 d = 0;  // independent chains: the loads, not the adds, bound it
        for (size_t i = begin; i + 4 <= end; i += 4) {
          a += words[i], b += words[i + 1], c += words[i + 2], d += words[i + 3];
        }
        sink += a + b + c + d;
      });
    }
    for (std::thread& t : pool) t.join();
    best = std::max(best, kBytes / absl::ToDoubleSeconds(absl::Now() - start) / 1e9);
  }
  std::free(p);
  return sink.load() == 1 ? -best : best;  // keeps the sums (never 1)
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "llm-bench: %s\n", std::string(s.message()).c_str());
    std::exit(1);
  }
}

// Decodes tokens[s] on session ids[s] (a new one where it is ""), for every
// s at once: each session's first token is submitted here, each next one
// from the engine's completion callback of the one before (on the step-loop
// thread). Returns when all are done; releases the sessions.
void DecodeFromCallbacks(llm::engine::Engine& engine, const std::vector<std::string>& ids,
                         const std::vector<std::vector<int32_t>>& tokens) {
  struct Session {
    std::string id;
    size_t next = 0;
  };
  std::vector<Session> sessions(tokens.size());
  for (size_t s = 0; s < tokens.size(); ++s) sessions[s].id = ids[s];
  std::atomic<size_t> running{tokens.size()};
  // Shared with the callbacks: the last one may still be inside set_value
  // when this function returns.
  auto all_done = std::make_shared<std::promise<void>>();
  std::future<void> finished = all_done->get_future();
  // Submits the next token of session s (a function object that refers to
  // itself through `submit`).
  std::function<void(size_t)> submit = [&](size_t s) {
    llm::engine::AppendRequest r;
    r.session_id = sessions[s].id;
    r.tokens = {tokens[s][sessions[s].next++]};
    r.decode = true;
    engine.Submit(std::move(r), [&, s, all_done](absl::StatusOr<llm::engine::AppendResult> result) {
      Check(result.status());
      sessions[s].id = result->session_id;
      if (sessions[s].next < tokens[s].size()) {
        submit(s);
        return;
      }
      if (running.fetch_sub(1) == 1) all_done->set_value();
    });
  };
  for (size_t s = 0; s < tokens.size(); ++s) submit(s);
  finished.wait();
  for (const Session& s : sessions) Check(engine.Release(s.id));
}

// The mean forward step in milliseconds (3 decimals), from a time spent in
// `steps` steps.
double MeanStepMs(absl::Duration step_time, int64_t steps) {
  return std::round(absl::ToDoubleMilliseconds(step_time) / std::max<int64_t>(steps, 1) * 1000) /
         1000;
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv, kUsage);
  llm::engine::LoadOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  if (options.model_path.empty()) {
    std::fprintf(stderr, "llm-bench: --model is required\n%s\n", kUsage);
    return 2;
  }
  options.threads = absl::GetFlag(FLAGS_threads);
  options.backend = absl::GetFlag(FLAGS_backend);
  llm::engine::ApplyBackendFlags(&options);
  options.kv_cache_mb = absl::GetFlag(FLAGS_kv_cache_mb);
  options.engine.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  // Before the model is loaded, so that its threads are idle.
  const int probe_threads = options.threads > 0 ? options.threads : llm::cpu::AvailableCores();
  const double read_gb_s =
      absl::GetFlag(FLAGS_measure_bandwidth) ? MeasureReadBandwidth(probe_threads) : 0;
  auto engine = llm::engine::LoadEngine(options);
  Check(engine.status());
  const int64_t vocab = (*engine)->config().vocab_size;
  std::mt19937 rng(42);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (int32_t& id : t) id = static_cast<int32_t>(rng() % vocab);
    return t;
  };
  const int depth = absl::GetFlag(FLAGS_d);
  const std::vector<int32_t> depth_tokens = random_tokens(depth);
  // A new session holding the depth tokens (untimed), or "" when -d is 0.
  // With `own`, a session of depth random tokens of its own instead.
  auto depth_session = [&](bool own = false) -> std::string {
    if (depth == 0) return "";
    llm::engine::AppendRequest r;
    r.tokens = own ? random_tokens(depth) : depth_tokens;
    auto result = (*engine)->Append(std::move(r));
    Check(result.status());
    return result->session_id;
  };
  auto run_pp = [&](int n) -> double {
    llm::engine::AppendRequest r;
    r.session_id = depth_session();
    r.tokens = random_tokens(n);
    const absl::Time start = absl::Now();
    auto result = (*engine)->Append(std::move(r));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    Check(result.status());
    Check((*engine)->Release(result->session_id));
    return n / seconds;
  };
  // Decodes `tokens` one at a time on a fresh session (or on `session`),
  // then releases it.
  auto decode_all = [&](const std::vector<int32_t>& tokens, std::string session = "") {
    for (int32_t token : tokens) {
      llm::engine::AppendRequest r;
      r.session_id = session;
      r.tokens = {token};
      r.decode = true;
      auto result = (*engine)->Append(std::move(r));
      Check(result.status());
      session = result->session_id;
    }
    Check((*engine)->Release(session));
  };
  auto run_tg = [&](int n) -> double {
    const std::vector<int32_t> tokens = random_tokens(n);
    const std::string session = depth_session();
    const absl::Time start = absl::Now();
    decode_all(tokens, session);
    return n / absl::ToDoubleSeconds(absl::Now() - start);
  };
  const int reps = std::max(1, absl::GetFlag(FLAGS_repetitions));
  nlohmann::json out;
  const int p = absl::GetFlag(FLAGS_p), n = absl::GetFlag(FLAGS_n);
  // The --sessions counts, each once.
  std::vector<std::pair<std::string, int>> counts;
  for (const std::string& value : absl::GetFlag(FLAGS_sessions)) {
    const int count = std::atoi(value.c_str());
    const bool seen =
        std::any_of(counts.begin(), counts.end(), [&](const auto& c) { return c.first == value; });
    if (count >= 1 && n >= 1 && !seen) counts.emplace_back(value, count);
  }
  // With -d the sessions wait, idle, for the others' depth prefills: those
  // must all fit in the KV cache, or the engine evicts the first ones.
  const int64_t total_blocks = (*engine)->Stats().kv_blocks_total;
  for (const auto& [value, count] : counts) {
    const int64_t blocks =
        int64_t{count} * ((depth + n + options.kv_block_size - 1) / options.kv_block_size);
    if (depth > 0 && blocks > total_blocks) {
      std::fprintf(
          stderr,
          "llm-bench: --sessions %d with -d %d and -n %d needs %lld KV blocks; the "
          "cache has %lld (raise --kv_cache_mb to about %lld)\n",
          count, depth, n, static_cast<long long>(blocks), static_cast<long long>(total_blocks),
          static_cast<long long>(
              absl::GetFlag(FLAGS_kv_cache_mb) * blocks / std::max<int64_t>(total_blocks, 1) + 1));
      return 2;
    }
  }
  if (p > 0) {
    run_pp(p);
    std::vector<double> rates;
    for (int i = 0; i < reps; ++i) rates.push_back(run_pp(p));
    const Rate r = Summarize(rates);
    out["prefill_tok_s"] = std::round(r.mean * 100) / 100;
    out["prefill_tok_s_stddev"] = std::round(r.stddev * 100) / 100;
    out["p"] = p;
    out["d"] = depth;
  }
  if (n > 0) {
    run_tg(n);
    std::vector<double> rates;
    const llm::engine::EngineStats before = (*engine)->Stats();
    for (int i = 0; i < reps; ++i) rates.push_back(run_tg(n));
    const llm::engine::EngineStats after = (*engine)->Stats();
    const Rate r = Summarize(rates);
    out["decode_tok_s"] = std::round(r.mean * 100) / 100;
    out["decode_tok_s_stddev"] = std::round(r.stddev * 100) / 100;
    // The mean forward step alone; the rest of 1 / decode_tok_s is the time
    // between steps (the completion and the next request's admission).
    out["decode_step_ms"] =
        MeanStepMs(after.step_time - before.step_time, after.steps - before.steps);
    out["n"] = n;
    out["d"] = depth;
    auto file = llm::gguf::File::Open(options.model_path);
    Check(file.status());
    const bool cuda = (*engine)->backend_description().rfind("cuda", 0) == 0;
    const int64_t bytes = DecodeWeightBytes(**file, cuda);
    const double gb_s = r.mean * static_cast<double>(bytes) / 1e9;
    out["decode_weight_bytes"] = bytes;
    out["decode_gb_s"] = std::round(gb_s * 10) / 10;
    if (const double roof = absl::GetFlag(FLAGS_roofline_gb_s); roof > 0) {
      out["decode_roofline_fraction"] = std::round(gb_s / roof * 1000) / 1000;
    }
    if (read_gb_s > 0) {
      // Again, the engine's threads asleep (the step loop idles them after
      // each step): a probe reading that changed is a machine whose
      // bandwidth did, and the share is taken of the larger one.
      const double after = MeasureReadBandwidth(probe_threads);
      out["read_gb_s"] = std::round(read_gb_s * 10) / 10;
      out["read_gb_s_after"] = std::round(after * 10) / 10;
      out["decode_bandwidth_fraction"] =
          std::round(gb_s / std::max(read_gb_s, after) * 1000) / 1000;
    }
  }
  // Aggregate decode: `count` sessions decode n tokens each, all at once
  // (DecodeFromCallbacks, or a thread per session); a warm-up, then `reps`
  // timed runs taken in turns with the other counts (below; the mean, like
  // the others), the mean tokens per forward step (how well the step loop
  // batched them) and the mean forward step (the rest of the time per step is
  // spent between steps).
  struct SessionsRun {
    double rate;
    int64_t steps;
    absl::Duration step_time;
  };
  auto run_sessions = [&](int count) -> SessionsRun {
    std::vector<std::vector<int32_t>> tokens(count);
    for (auto& t : tokens) t = random_tokens(n);
    std::vector<std::string> ids(count);
    for (std::string& id : ids) id = depth_session(/*own=*/true);
    const llm::engine::EngineStats before = (*engine)->Stats();
    const absl::Time start = absl::Now();
    if (absl::GetFlag(FLAGS_session_threads)) {
      std::vector<std::thread> threads;
      for (int s = 0; s < count; ++s) {
        threads.emplace_back([&, s] { decode_all(tokens[s], ids[s]); });
      }
      for (std::thread& t : threads) t.join();
    } else {
      DecodeFromCallbacks(**engine, ids, tokens);
    }
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const llm::engine::EngineStats after = (*engine)->Stats();
    return {count * n / seconds, after.steps - before.steps, after.step_time - before.step_time};
  };
  // The counts take turns, round after round (forward, then backward: 1, 4,
  // 16, 16, 4, 1, ...), so that the machine's speed, which drifts by tens of
  // percent over a minute here, weighs on every count alike; one count's
  // repetitions in a row put a drift between counts straight into their
  // ratio.
  for (const auto& [value, count] : counts) run_sessions(count);  // warm-up
  std::vector<std::vector<SessionsRun>> runs(counts.size());      // per entry of counts
  for (int i = 0; i < reps; ++i) {
    for (size_t j = 0; j < counts.size(); ++j) {
      const size_t c = i % 2 == 0 ? j : counts.size() - 1 - j;
      runs[c].push_back(run_sessions(counts[c].second));
    }
  }
  for (size_t c = 0; c < counts.size(); ++c) {
    const auto& [value, count] = counts[c];
    std::vector<double> rates;
    int64_t steps = 0;
    absl::Duration step_time;
    for (const SessionsRun& run : runs[c]) {
      rates.push_back(run.rate);
      steps += run.steps;
      step_time += run.step_time;
    }
    const Rate r = Summarize(rates);
    out["aggregate_decode_tok_s"][value] = std::round(r.mean * 100) / 100;
    out["aggregate_decode_tok_s_stddev"][value] = std::round(r.stddev * 100) / 100;
    out["aggregate_tokens_per_step"][value] =
        std::round(10.0 * count * n * reps / std::max<int64_t>(steps, 1)) / 10;
    out["aggregate_step_ms"][value] = MeanStepMs(step_time, steps);
  }
  // The scaling figure: each count's aggregate rate over one session's.
  if (out.contains("aggregate_decode_tok_s") && out["aggregate_decode_tok_s"].contains("1")) {
    const double one = out["aggregate_decode_tok_s"]["1"].get<double>();
    for (const auto& [key, rate] : out["aggregate_decode_tok_s"].items()) {
      out["aggregate_speedup"][key] = std::round(rate.get<double>() / one * 100) / 100;
    }
  }
  out["model"] = options.model_path;
  out["threads"] = options.threads > 0 ? options.threads : llm::cpu::AvailableCores();
  out["backend"] = (*engine)->backend_description();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
