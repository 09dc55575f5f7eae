#include "gateway/choices.h"

#include <algorithm>
#include <random>
#include <span>

namespace llm::gateway {
namespace {

using nlohmann::json;

uint64_t RandomSeed() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// One choice: scored (max_tokens 0 with echo) or generated.
absl::StatusOr<client::GenerateResult> RunOne(const ChoicesRun& run, const PromptIds& prompt,
                                              int index, bool& first_token) {
  client::Generator& g = *run.generator;
  GenerationRequest& req = *run.request;
  if (req.params.max_tokens == 0) {  // echo only: score the prompt
    absl::StatusOr<client::PrefillResult> scored =
        g.Score(prompt.ids, std::max(req.params.prompt_logprobs, 0));
    if (!scored.ok()) return scored.status();
    client::GenerateResult r;
    r.prompt_logprobs = std::move(scored->prompt_logprobs);
    return r;
  }
  client::Session fresh;
  client::Session& session = run.conversation != nullptr ? *run.conversation : fresh;
  ChoiceWriter::Events events;
  const auto on_token = [&](const client::TokenEvent& e) {
    if (first_token) {
      if (run.on_first_token) run.on_first_token();
      first_token = false;
    }
    if (run.stopping != nullptr && run.stopping->load(std::memory_order_relaxed)) g.Cancel();
    run.writer->Token(index, e, &events);
    if (run.stream == nullptr) return;
    if (!run.stream->alive()) return;
    // Nothing to send: a comment, to notice a client gone.
    const bool alive = events.empty() ? run.stream->Ping() : run.stream->Send(events);
    if (!alive) g.Cancel();
  };
  absl::StatusOr<client::GenerateResult> result =
      g.Generate(session, prompt.ids, req.params, on_token);
  if (run.conversation == nullptr) g.Release(session).IgnoreError();
  return result;
}

}  // namespace

nlohmann::json Usage::Annotate(nlohmann::json response) const {
  if (response.contains("usage") && response["usage"].is_object()) {
    response["usage"]["prompt_tokens_details"] = {{"cached_tokens", cached_tokens}};
    // Speculation's proposals, in the fields OpenAI's predicted outputs use,
    // and the tokens a grammar forced (this gateway's own field).
    json details = json::object();
    if (proposed_tokens > 0) {
      details["accepted_prediction_tokens"] = accepted_tokens;
      details["rejected_prediction_tokens"] = proposed_tokens - accepted_tokens;
    }
    if (forced_tokens > 0) details["forced_tokens"] = forced_tokens;
    if (!details.empty()) response["usage"]["completion_tokens_details"] = std::move(details);
  }
  return response;
}

ChoicesOutcome RunChoices(const ChoicesRun& run) {
  GenerationRequest& req = *run.request;
  ChoicesOutcome out;
  for (const PromptIds& p : *run.prompts) {
    out.usage.prompt_tokens += static_cast<int64_t>(p.ids.size());
  }
  const int32_t max_tokens = req.params.max_tokens;  // 0: the rest of the context
  const uint64_t seed = req.has_seed ? req.params.sampling.seed : RandomSeed();
  bool first_token = true;
  ChoiceWriter::Events events;
  const auto alive = [&] { return run.stream == nullptr || run.stream->alive(); };
  for (size_t p = 0; p < run.prompts->size() && alive(); ++p) {
    const PromptIds& prompt = (*run.prompts)[p];
    const int32_t room = static_cast<int32_t>(run.context_length - prompt.ids.size());
    req.params.max_tokens =
        max_tokens == 0 && !req.has_max_tokens ? room : std::min(max_tokens, room);
    for (int j = 0; j < req.n && alive(); ++j) {
      const int index = static_cast<int>(p) * req.n + j;
      req.params.sampling.seed = seed + static_cast<uint64_t>(index);
      run.writer->Begin(index, {prompt.ids, prompt.text}, &events);
      if (run.stream != nullptr) run.stream->Send(events);
      absl::StatusOr<client::GenerateResult> result = RunOne(run, prompt, index, first_token);
      if (!result.ok()) {
        out.error = result.status();
        return out;
      }
      out.usage.completion_tokens += static_cast<int64_t>(result->tokens.size());
      if (j == 0) {  // the prompt counts once
        out.usage.cached_tokens += result->cached_tokens + result->kept_tokens;
        out.usage.kept_tokens += result->kept_tokens;
      }
      out.usage.proposed_tokens += result->proposed_tokens;
      out.usage.forced_tokens += result->forced_tokens;
      out.usage.session_rebuilds += result->session_rebuilds;
      out.usage.session_relocations += result->session_relocations;
      out.usage.accepted_tokens += result->accepted_tokens;
      if (result->stop_reason == client::StopReason::kCancelled) {
        out.cancelled = true;
        return out;
      }
      run.writer->End(index, *result, &events);
      if (run.stream != nullptr) run.stream->Send(events);
    }
  }
  out.cancelled = !alive();
  return out;
}

}  // namespace llm::gateway
