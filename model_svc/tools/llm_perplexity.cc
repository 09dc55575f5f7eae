// llm-perplexity: perplexity of a model on a text file, computed the way
// llama.cpp's llama-perplexity computes it.
//
// Method: the whole file is tokenized with the model's own vocabulary (BOS
// first when the vocabulary asks for it). The tokens are cut into
// non-overlapping windows of --ctx tokens (a trailing partial window is
// dropped); when the vocabulary adds BOS, each window's first token is
// replaced by BOS. Each window is evaluated from an empty cache, and only its
// second half is scored: for positions j in [ctx/2, ctx - 1), the negative
// log-likelihood of token j+1 under the logits at j. Perplexity is
// exp(mean NLL) over every scored token of every window. --score_from 0
// scores every token after the window's first, and --token_logprobs prints
// each one's log-probability (logit - log-sum-exp, in float, as the model
// service's prompt scores), to check another path scores alike.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "common/gguf/gguf.h"
#include "common/mapped_file.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/backend_flags.h"
#include "model_svc/engine/loader.h"
#include "nlohmann/json.hpp"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/tokenizer.h"

ABSL_FLAG(std::string, model, "", "Path to a GGUF model (required).");
ABSL_FLAG(std::string, file, "", "UTF-8 text to score (required).");
ABSL_FLAG(int, ctx, 512, "Window length in tokens.");
ABSL_FLAG(int, threads, 0, "CPU threads; 0: every core the process may use.");
ABSL_FLAG(std::string, backend, "cpu",
          "cpu, cuda, or auto (CUDA when this build has it and a GPU is present, else CPU).");
ABSL_FLAG(int, max_windows, 0, "Score at most this many windows (0: all).");
ABSL_FLAG(int, score_from, -1,
          "Score positions j in [score_from, ctx - 1) of each window (-1: ctx/2, as "
          "llama-perplexity; 0: every token after the window's first).");
ABSL_FLAG(bool, token_logprobs, false,
          "Also print \"token_logprobs\": log p(token j+1) of every scored position, in order.");
ABSL_FLAG(std::string, tokens_out, "",
          "Also write the text's token ids (before BOS replaces each window's first) "
          "to this file as a JSON array, to check another tool tokenizes alike.");

namespace {

constexpr char kUsage[] =
    "llm-perplexity --model PATH --file TEXT [--ctx 512] [--threads N] [--kv_cache_type "
    "f16|f32|q8_0]\n"
    "               [--kv_cache_type_k f16|q8_0] [--kv_cache_type_v f16|q8_0]\n"
    "               [--score_from J] [--token_logprobs]\n"
    "Prints one JSON line {\"perplexity\", \"tokens\" (scored), \"windows\", \"ctx\"}.\n"
    "Method (llama-perplexity's): non-overlapping windows of --ctx tokens, each\n"
    "from an empty cache (first token replaced by BOS when the vocabulary adds\n"
    "BOS); the second half of each window is scored: NLL of token j+1 given the\n"
    "logits at j, for j in [ctx/2, ctx-1); perplexity = exp(mean NLL).";

[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "llm-perplexity: %s\n", message.c_str());
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv, kUsage);
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string text_path = absl::GetFlag(FLAGS_file);
  const int ctx = absl::GetFlag(FLAGS_ctx);
  if (model_path.empty() || text_path.empty())
    Fail(std::string("--model and --file are required\n") + kUsage);
  if (ctx < 4) Fail("--ctx must be at least 4");
  const int score_from =
      absl::GetFlag(FLAGS_score_from) < 0 ? ctx / 2 : absl::GetFlag(FLAGS_score_from);
  if (score_from >= ctx - 1) Fail("--score_from must be less than --ctx - 1");

  auto text = llm::ReadFileToString(text_path);
  if (!text.ok()) Fail(std::string(text.status().message()));
  auto file = llm::gguf::File::Open(model_path);
  if (!file.ok()) Fail(std::string(file.status().message()));
  auto vocab = llm::tok::VocabFromGguf(**file, std::nullopt);
  if (!vocab.ok()) Fail(std::string(vocab.status().message()));
  const bool add_bos = vocab->add_bos && vocab->bos_id.has_value();
  const uint32_t bos = vocab->bos_id.value_or(0);
  auto tokenizer = llm::tok::Tokenizer::Create(*std::move(vocab));
  if (!tokenizer.ok()) Fail(std::string(tokenizer.status().message()));
  llm::tok::EncodeOptions encode;
  encode.add_bos = add_bos;
  auto ids = (*tokenizer)->Encode(*text, encode);
  if (!ids.ok()) Fail(std::string(ids.status().message()));
  if (const std::string path = absl::GetFlag(FLAGS_tokens_out); !path.empty()) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) Fail("cannot write " + path);
    std::fprintf(f, "%s\n", nlohmann::json(*ids).dump().c_str());
    std::fclose(f);
  }

  llm::engine::LoadOptions options;
  options.model_path = model_path;
  options.threads = absl::GetFlag(FLAGS_threads);
  options.backend = absl::GetFlag(FLAGS_backend);
  llm::engine::ApplyBackendFlags(&options);
  options.engine.max_batch_tokens = std::max(ctx, 512);
  options.engine.max_context = ctx;
  options.kv_cache_mb = 64;
  auto engine = llm::engine::LoadEngine(options);
  if (!engine.ok()) Fail(std::string(engine.status().message()));
  if (ctx > (*engine)->max_context()) Fail("--ctx is longer than the model's context");

  int64_t windows = static_cast<int64_t>(ids->size()) / ctx;
  if (absl::GetFlag(FLAGS_max_windows) > 0)
    windows = std::min<int64_t>(windows, absl::GetFlag(FLAGS_max_windows));
  if (windows == 0) Fail("the text has fewer tokens than one window of --ctx");
  double nll = 0;
  int64_t scored = 0;
  std::vector<float> token_logprobs;
  const absl::Time start = absl::Now();
  for (int64_t w = 0; w < windows; ++w) {
    llm::engine::AppendRequest r;
    r.tokens.assign(ids->begin() + w * ctx, ids->begin() + (w + 1) * ctx);
    if (add_bos) r.tokens[0] = static_cast<int32_t>(bos);
    r.all_logits = true;
    auto result = (*engine)->Append(r);
    if (!result.ok()) Fail(std::string(result.status().message()));
    for (int j = score_from; j < ctx - 1; ++j) {
      const llm::model::Logits& l = result->logits[j];
      const float logprob = l.values[r.tokens[j + 1]] - l.log_sum_exp;
      nll -= logprob;
      ++scored;
      if (absl::GetFlag(FLAGS_token_logprobs)) token_logprobs.push_back(logprob);
    }
    (void)(*engine)->Release(result->session_id);
    std::fprintf(stderr, "\rllm-perplexity: window %lld/%lld, running perplexity %.4f",
                 static_cast<long long>(w + 1), static_cast<long long>(windows),
                 std::exp(nll / scored));
  }
  std::fprintf(stderr, " (%.1f s)\n", absl::ToDoubleSeconds(absl::Now() - start));
  nlohmann::json out;
  out["perplexity"] = std::exp(nll / scored);
  out["tokens"] = scored;
  out["windows"] = windows;
  out["ctx"] = ctx;
  if (absl::GetFlag(FLAGS_token_logprobs)) out["token_logprobs"] = token_logprobs;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
