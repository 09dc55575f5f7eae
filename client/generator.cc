#include "client/generator.h"

#include <utility>

#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {
namespace {

LoopOptions LoopOptionsOf(const ClientOptions& options) {
  LoopOptions loop;
  loop.logits = options.logits;
  loop.lookahead = options.lookahead;
  return loop;
}

}  // namespace

Generator::Generator(std::shared_ptr<Services> services)
    : services_(std::move(services)),
      loop_(services_->tokenizer(), services_->model(), LoopOptionsOf(services_->options())) {}

Generator::~Generator() = default;

absl::StatusOr<PrefillResult> Generator::Score(std::span<const int32_t> tokens, int32_t top_n) {
  if (top_n < 0 || top_n > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        StrCat("top_n must be in [0, ", kMaxTopLogprobs, "], got ", top_n));
  }
  StepOptions options;
  options.logits.set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  options.logits.set_top_n(1);
  options.prompt_logprobs = top_n;
  Session session;
  const std::atomic<bool> never{false};
  int32_t rebuilds = 0;
  ModelPort& model = services_->model();
  absl::StatusOr<PrefillResult> result = model.Prefill(session, tokens, options, never, &rebuilds);
  if (!session.id.empty()) model.Release(session).IgnoreError();
  return result;
}

}  // namespace llm::client
