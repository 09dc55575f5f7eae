// A generating request's choices: each prompt's n choices in turn on one
// Generator, each in a new model session released at its end (or, for a
// conversation, in the conversation's session, which keeps the answer),
// written through a ChoiceWriter, streamed as server-sent events or
// gathered for one response; and the request's usage.
//
// Seeds: choice i samples with seed + i (the request's seed, or a random
// one), so a request with a seed gives the same choices every time.
// max_tokens: the request's, or the rest of the context, cut to what fits
// after each prompt; 0 with echo scores the prompt (Generator::Score) and
// generates nothing.
//
// Threads: one request's. Ownership: borrows everything.
#ifndef LLM_GATEWAY_CHOICES_H_
#define LLM_GATEWAY_CHOICES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/generator.h"
#include "gateway/choice_writer.h"
#include "gateway/event_stream.h"
#include "gateway/openai_api.h"

namespace llm::gateway {

// A prompt's ids and its text (what a completions echo shows).
struct PromptIds {
  std::vector<int32_t> ids;
  std::string text;
};

// The tokens a request used, as OpenAI's usage reports them.
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // The prompt tokens not computed for this request: held by the
  // conversation's named session, or found in the model server's prefix
  // cache.
  int64_t cached_tokens = 0;
  int64_t kept_tokens = 0;      // of them, held by the conversation's named session
  int64_t proposed_tokens = 0;  // speculation
  int64_t accepted_tokens = 0;
  int64_t forced_tokens = 0;  // structured output: tokens a grammar forced (not drawn)
  // Model sessions lost and re-prefilled, and found moved to another replica
  // (live migration) instead, during the request (GenerateResult's).
  int64_t session_rebuilds = 0;
  int64_t session_relocations = 0;

  // `response` (a response or a usage chunk) with usage.prompt_tokens_details
  // and, when the request speculated or a grammar forced tokens,
  // usage.completion_tokens_details.
  nlohmann::json Annotate(nlohmann::json response) const;
};

struct ChoicesOutcome {
  absl::Status error;      // a failed choice: the request's answer is this error
  bool cancelled = false;  // by the gateway's shutdown, or the stream's client going away
  Usage usage;
};

struct ChoicesRun {
  client::Generator* generator = nullptr;
  GenerationRequest* request = nullptr;  // its params' seed and max_tokens are set per choice
  const std::vector<PromptIds>* prompts = nullptr;
  ChoiceWriter* writer = nullptr;
  EventStream* stream = nullptr;                // streamed: events go here; null: gathered
  client::Session* conversation = nullptr;      // one prompt, n = 1: generate in this session
  int64_t context_length = 0;                   // the model's
  const std::atomic<bool>* stopping = nullptr;  // set: cancel at the next token
  std::function<void()> on_first_token;         // once, at the request's first token
};

// Runs every choice; stops at the first failure, a cancellation, or a
// stream whose client is gone.
ChoicesOutcome RunChoices(const ChoicesRun& run);

}  // namespace llm::gateway

#endif  // LLM_GATEWAY_CHOICES_H_
