#include "client/generate/generate_loop.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "client/constrain/matcher.h"
#include "client/generate/stop_strings.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "sampler/rng.h"

namespace llm::client {
namespace {

// The most bytes of logits a speculative step may ask for (ProposalRoom).
constexpr int64_t kMaxSpeculativeResponseBytes = 8 << 20;

// A session-losing failure of a step: the session is gone (NOT_FOUND) or its
// server went away or is restarting (UNAVAILABLE; a server shutting down
// cancels its streams, CANCELLED, which this client never causes on its own).
bool IsRecoverable(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsUnavailable(s) || absl::IsCancelled(s);
}

}  // namespace

// One generation: the state shared by its steps.
class GenerateLoop::Run {
 public:
  Run(GenerateLoop& loop, Session& session, const GenerateParams& params,
      const TokenCallback& on_token)
      : loop_(loop),
        model_(loop.model_),
        session_(session),
        params_(params),
        on_token_(on_token),
        matcher_(params.stop) {}

  // Prefills `new_tokens` (after the pending ones) and decodes until a stop.
  absl::StatusOr<GenerateResult> PrefillAndDecode(std::span<const int32_t> new_tokens);

 private:
  // What the request that follows the tokens generated so far asks for.
  // Lookahead: the next token is the argmax of its logits, and another
  // request will follow that token (it is not the last).
  StepOptions NextStep() const {
    StepOptions step;
    step.logits = result_.logits;
    // With speculation, only on a step that proposes nothing (SendStep): a
    // guess after proposals is wasted whenever one is rejected, and a
    // request that finds a wasted guess running waits for its step.
    step.lookahead = loop_.options_.lookahead && sampler::PicksArgmax(params_.sampling) &&
                     static_cast<int64_t>(result_.tokens.size()) + 1 < params_.max_tokens;
    return step;
  }
  bool IsEnd(int32_t id) const {
    const std::span<const int32_t> ends = loop_.tokenizer_.end_ids();
    return std::find(ends.begin(), ends.end(), id) != ends.end();
  }
  // Whether the model session is full: one more token would grow it past
  // context_length (0: not known; then the OUT_OF_RANGE of the step that
  // overflows tells, AwaitStep).
  bool ContextFull() const {
    const int64_t n = model_.context_length();
    return n > 0 && static_cast<int64_t>(session_.tokens.size()) >= n;
  }
  // Prefills `tokens` (a rebuild when session_.id is empty): the logits
  // after them, and with `score` the scores params_.prompt_logprobs asks for.
  absl::StatusOr<PrefillResult> Prefill(std::span<const int32_t> tokens, bool score = false) {
    StepOptions step = NextStep();
    if (score) step.prompt_logprobs = params_.prompt_logprobs;
    if (grammar_ != nullptr) {
      LLM_RETURN_IF_ERROR(FillMask(mask_));
      step.mask = &mask_;
    }
    return model_.Prefill(session_, tokens, step, loop_.cancel_, &result_.session_rebuilds);
  }
  // Sends `token` on the step stream (opening it if needed), with the
  // proposals that follow `history` (which ends with it) when speculating,
  // and a rollback of the session's overhang. A failure is left for
  // AwaitStep to handle.
  absl::Status SendStep(int32_t token, std::span<const int32_t> history);
  // How many tokens the next step may propose: GenerateParams::speculate
  // (or kMaxProposedTokens for `forced` tokens), within max_tokens and the
  // context.
  int32_t ProposalRoom(bool forced = false) const;
  // Decodes the logits after the i-th proposal of the last step.
  absl::Status DecodeProposedRow(size_t i);
  // Completes the step of `token`: on success the token joins the session
  // and, when need_logits, its logits are decoded. A lost session is rebuilt
  // (when need_logits) or left for the next call to rebuild.
  absl::Status AwaitStep(int32_t token, bool need_logits);
  // Detokenizes one token: the complete UTF-8 text it adds.
  absl::StatusOr<std::string> Detokenize(int32_t token);
  // Ends both streams; returns the text still held.
  absl::StatusOr<std::string> CloseStreams();
  void Emit(std::string_view text, int32_t token, float logprob,
            std::span<const TopLogprob> top = {});

  GenerateLoop& loop_;
  ModelPort& model_;
  Session& session_;
  const GenerateParams& params_;
  const TokenCallback& on_token_;
  StopStringMatcher matcher_;
  GenerateResult result_;
  DecodedLogits logits_;
  std::unique_ptr<DecodeSteps> steps_;
  bool context_ended_ = false;  // a step answered OUT_OF_RANGE
  std::unique_ptr<TextStream> text_;
  std::vector<TopLogprob> top_;  // the current position's, for TokenEvent::top
  bool emitted_ = false;         // an event was sent
  // Speculation: the proposals of the last step sent, and how many of them
  // have been accepted so far (a rejection clears them).
  std::vector<int32_t> proposed_;
  size_t accepted_ = 0;
  bool speculation_unsupported_ = false;  // the server ignored proposals
  int relocations_ = 0;                   // AwaitStep's Relocate calls

  // Structured generation (GenerateParams::constraint).
  // The grammar's state after every token generated so far (and after the
  // forced tokens of the step in flight); null without a constraint.
  std::unique_ptr<constrain::Matcher> grammar_;
  TokenMask mask_;       // the next logits' allowed tokens
  TokenMask allow_all_;  // rows whose logits are not drawn from
  // The proposals' rows: the first proposed_.size() are this step's; never
  // shrunk, so that each keeps its buffer from step to step.
  std::vector<TokenMask> proposed_masks_;
  // The last step fed these tokens after its token as proposals that the
  // grammar forced: they join the output without a draw.
  bool forced_step_ = false;
  // Fills `mask` with the tokens the grammar allows now.
  absl::Status FillMask(TokenMask& mask);
  // A token drawn or fed: the grammar takes it (a token it does not allow
  // means the model service did not apply the mask).
  absl::Status AcceptToken(int32_t token);
  // The tokens the grammar forces now, at most `room`.
  std::vector<int32_t> Forced(int64_t room) const;
  // Sets up the masks of a step that feeds `proposed_` after its token:
  // forced ones (accepted into the grammar) or speculative ones (the
  // grammar's state after each, then rolled back; cut at the first it does
  // not allow).
  absl::Status MaskProposals(StepOptions& step);
  // Emits the forced tokens the step fed (in the model session now): their
  // text, one event each (logprob 0: the grammar allows nothing else).
  // Sets *stop at a stop string, max_tokens or a cancel.
  absl::Status EmitForced(std::span<const int32_t> forced, std::optional<StopReason>& stop);
};

absl::Status GenerateLoop::Run::FillMask(TokenMask& mask) {
  const int64_t vocab = model_.vocab_size();
  if (mask.vocab_size() != vocab) mask = TokenMask::AllowNone(vocab);
  std::span<uint64_t> words = mask.mutable_words();
  // The matcher writes 32-bit words, the same bits on a little-endian host.
  return grammar_->FillMask(
      std::span<uint32_t>(reinterpret_cast<uint32_t*>(words.data()), grammar_->mask_words()));
}

absl::Status GenerateLoop::Run::AcceptToken(int32_t token) {
  if (grammar_ == nullptr || grammar_->Accept(token)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      StrCat("the model service returned logits that allow token ", token,
             ", which the constraint does not (did it apply the token mask?)"));
}

std::vector<int32_t> GenerateLoop::Run::Forced(int64_t room) const {
  std::vector<int32_t> forced;
  if (grammar_ == nullptr || room <= 0 || grammar_->IsTerminated()) return forced;
  forced = grammar_->ForcedTokens();
  if (static_cast<int64_t>(forced.size()) > room) forced.resize(static_cast<size_t>(room));
  return forced;
}

absl::Status GenerateLoop::Run::MaskProposals(StepOptions& step) {
  if (proposed_masks_.size() < proposed_.size()) proposed_masks_.resize(proposed_.size());
  if (forced_step_) {
    // Only the last row is drawn from; the others' tokens are forced.
    for (int32_t f : proposed_) LLM_RETURN_IF_ERROR(AcceptToken(f));
    if (allow_all_.vocab_size() != model_.vocab_size()) {
      allow_all_ = TokenMask::AllowAll(model_.vocab_size());
    }
    for (size_t i = 0; i + 1 < proposed_.size(); ++i) proposed_masks_[i] = allow_all_;
    LLM_RETURN_IF_ERROR(FillMask(proposed_masks_[proposed_.size() - 1]));
    step.mask = &allow_all_;
  } else {
    LLM_RETURN_IF_ERROR(FillMask(mask_));
    step.mask = &mask_;
    size_t kept = 0;
    while (kept < proposed_.size() && grammar_->Accept(proposed_[kept])) {
      if (grammar_->IsTerminated()) {  // an end token: nothing after it
        LLM_RETURN_IF_ERROR(grammar_->Rollback(1));
        break;
      }
      LLM_RETURN_IF_ERROR(FillMask(proposed_masks_[kept]));
      ++kept;
    }
    LLM_RETURN_IF_ERROR(grammar_->Rollback(static_cast<int>(kept)));
    proposed_.resize(kept);
  }
  step.proposed = proposed_;
  step.proposed_masks = std::span<const TokenMask>(proposed_masks_).first(proposed_.size());
  return absl::OkStatus();
}

absl::Status GenerateLoop::Run::EmitForced(std::span<const int32_t> forced,
                                           std::optional<StopReason>& stop) {
  for (int32_t token : forced) {
    ++result_.forced_tokens;
    result_.tokens.push_back(token);
    LLM_ASSIGN_OR_RETURN(std::string text, Detokenize(token));
    const StopStringMatcher::Step step = matcher_.Feed(text);
    top_.assign(params_.top_logprobs > 0 ? 1 : 0, TopLogprob{token, 0.0f});
    Emit(step.released, token, 0.0f, top_);
    if (step.stopped) {
      stop = StopReason::kStopString;
    } else if (static_cast<int32_t>(result_.tokens.size()) >= params_.max_tokens) {
      stop = StopReason::kMaxTokens;
    } else if (loop_.cancel_requested()) {
      stop = StopReason::kCancelled;
    }
    if (stop) return absl::OkStatus();
  }
  return absl::OkStatus();
}

void GenerateLoop::Run::Emit(std::string_view text, int32_t token, float logprob,
                             std::span<const TopLogprob> top) {
  result_.text.append(text);
  if (!on_token_) return;
  TokenEvent event{text, token, logprob, top, {}};
  if (!emitted_) event.prompt_logprobs = result_.prompt_logprobs;
  emitted_ = true;
  on_token_(event);
}

int32_t GenerateLoop::Run::ProposalRoom(bool forced) const {
  // Proposals become tokens after the one sent: within max_tokens, and
  // within the context together with it.
  if (speculation_unsupported_) return 0;
  int64_t room =
      std::min<int64_t>(forced ? kMaxProposedTokens : params_.speculate,
                        params_.max_tokens - static_cast<int64_t>(result_.tokens.size()));
  if (const int64_t n = model_.context_length(); n > 0) {
    room = std::min<int64_t>(room, n - static_cast<int64_t>(session_.tokens.size()) - 1);
  }
  // Full logits rows: the response (1 + room rows) stays within 8 MiB, half
  // the model server's default --max_message_bytes (17 float32 rows of a
  // 262k vocabulary would be 17 MiB).
  const int64_t row_bytes =
      result_.logits.encoding() == v1::LogitsOptions::LOGITS_FLOAT32   ? 4 * model_.vocab_size()
      : result_.logits.encoding() == v1::LogitsOptions::LOGITS_FLOAT16 ? 2 * model_.vocab_size()
                                                                       : 0;
  if (row_bytes > 0) room = std::min<int64_t>(room, kMaxSpeculativeResponseBytes / row_bytes - 1);
  return static_cast<int32_t>(std::max<int64_t>(room, 0));
}

absl::Status GenerateLoop::Run::SendStep(int32_t token, std::span<const int32_t> history) {
  if (steps_ == nullptr) steps_ = model_.OpenSteps(session_, params_.max_tokens);
  StepOptions step = NextStep();
  proposed_.clear();
  accepted_ = 0;
  forced_step_ = false;
  // Tokens the grammar forces after this one are fed in this step, as
  // proposals that are sure to be kept (within the room proposals have).
  if (grammar_ != nullptr) {
    proposed_ = Forced(ProposalRoom(/*forced=*/true));
    forced_step_ = !proposed_.empty();
  }
  if (const int32_t room = ProposalRoom(); room > 0 && !forced_step_) {
    if (loop_.options_.propose) {
      loop_.options_.propose(history, room, &proposed_);
      if (static_cast<int32_t>(proposed_.size()) > room) proposed_.resize(room);
    } else {
      ProposeByNgram(history, room, loop_.options_.min_ngram, &proposed_);
    }
  }
  if (grammar_ != nullptr) LLM_RETURN_IF_ERROR(MaskProposals(step));
  step.proposed = proposed_;
  if (forced_step_) {
    // Forced tokens are sure to be kept: the guess follows the last of them
    // (the argmax of its masked row, the next draw), when a request will
    // follow that draw. Without it the model service would start the next
    // forward only when the next request arrives.
    step.lookahead =
        step.lookahead &&
        static_cast<int64_t>(result_.tokens.size() + proposed_.size()) + 1 < params_.max_tokens;
  } else if (!proposed_.empty()) {
    step.lookahead = false;  // speculation: a rejected proposal would waste the guess
  }
  if (session_.overhang) step.truncate_to = static_cast<int64_t>(session_.tokens.size());
  steps_->Send(token, step);
  return absl::OkStatus();
}

absl::Status GenerateLoop::Run::DecodeProposedRow(size_t i) {
  const auto& rows = steps_->proposed_logits();
  if (i >= static_cast<size_t>(rows.size())) {
    return absl::InternalError("a proposed token's logits are missing");
  }
  return logits_.Decode(rows[static_cast<int>(i)], model_.vocab_size());
}

absl::Status GenerateLoop::Run::AwaitStep(int32_t token, bool need_logits) {
  absl::StatusOr<const v1::Logits*> logits = steps_->Await();
  if (logits.ok()) {
    session_.tokens.push_back(token);
    // The proposals are in the model session too, until accepted or rolled
    // back.
    if (!proposed_.empty() && steps_->proposed_logits().empty()) {
      // A server that predates speculation ignored the proposals (and
      // appended the token alone): go on without. (Forced tokens cannot:
      // the logits of this row were not masked.)
      if (forced_step_) {
        return absl::FailedPreconditionError(
            "the model service ignored the tokens a constraint forced (it predates "
            "speculation)");
      }
      proposed_.clear();
      speculation_unsupported_ = true;
    }
    session_.overhang = !proposed_.empty();
    if (!forced_step_) result_.proposed_tokens += static_cast<int64_t>(proposed_.size());
    if (steps_->proposed_logits().size() != static_cast<int>(proposed_.size())) {
      return absl::FailedPreconditionError(
          StrCat("the model service answered ", steps_->proposed_logits().size(),
                 " proposed tokens' logits for ", proposed_.size(), " proposed tokens"));
    }
    if (!need_logits) return absl::OkStatus();
    return logits_.Decode(**logits, model_.vocab_size());
  }
  // The request changed nothing (or left the session unsynced, below): the
  // forced tokens it carried are not in the session.
  if (forced_step_) LLM_RETURN_IF_ERROR(grammar_->Rollback(static_cast<int>(proposed_.size())));
  forced_step_ = false;
  proposed_.clear();
  accepted_ = 0;
  steps_.reset();  // a failed step ends the stream
  const absl::Status s = logits.status();
  if (absl::IsOutOfRange(s)) {
    // The session is full (its server's context is shorter than
    // context_length said, or it said none): the end of the generation, not
    // a failure. The token was not fed.
    session_.pending.push_back(token);
    context_ended_ = true;
    return absl::OkStatus();
  }
  if (!IsRecoverable(s) || result_.session_rebuilds >= kMaxRebuildsPerCall) {
    session_.pending.push_back(token);
    session_.unsynced = !session_.id.empty();
    return s;
  }
  // The session moved to another replica (a drain migrated it): go on there,
  // rolled back to what this client knows (ModelPort::Relocate).
  if (relocations_++ < kMaxRebuildsPerCall && model_.Relocate(session_)) {
    if (!need_logits) {
      session_.pending.push_back(token);  // the next call feeds it there
      return absl::OkStatus();
    }
    const int32_t one[] = {token};
    LLM_ASSIGN_OR_RETURN(PrefillResult moved, Prefill(one));
    return logits_.Decode(moved.logits, model_.vocab_size());
  }
  // The session is lost, or may be half-updated on a server that came back:
  // drop it (best effort) and rebuild from the history (a named one keeps
  // its name: the next Prefill syncs the history).
  if (!absl::IsNotFound(s) && !session_.named) {
    Session old;
    old.id = session_.id;
    model_.Release(old).IgnoreError();
  }
  if (!session_.named) session_.id.clear();
  session_.overhang = false;
  if (!need_logits) {
    session_.pending.push_back(token);  // the next call rebuilds
    return absl::OkStatus();
  }
  ++result_.session_rebuilds;
  const int32_t one[] = {token};
  LLM_ASSIGN_OR_RETURN(PrefillResult rebuilt, Prefill(one));
  return logits_.Decode(rebuilt.logits, model_.vocab_size());
}

absl::StatusOr<std::string> GenerateLoop::Run::Detokenize(int32_t token) {
  if (text_ == nullptr) {
    LLM_ASSIGN_OR_RETURN(text_, loop_.tokenizer_.OpenText(params_.max_tokens));
  }
  return text_->Add(token);
}

absl::StatusOr<std::string> GenerateLoop::Run::CloseStreams() {
  // No step is in flight: the close status is informative only.
  if (steps_ != nullptr) steps_->Close().IgnoreError();
  steps_.reset();
  std::string held;
  if (text_ != nullptr) {
    LLM_ASSIGN_OR_RETURN(held, text_->Finish());
    text_.reset();
  }
  return held;
}

absl::StatusOr<GenerateResult> GenerateLoop::Run::PrefillAndDecode(
    std::span<const int32_t> new_tokens) {
  const absl::Time start = absl::Now();
  result_.logits =
      ChooseLogitsOptions(loop_.options_.logits, params_.sampling, model_.vocab_size());
  if (result_.logits.encoding() == v1::LogitsOptions::LOGITS_TOP_N &&
      result_.logits.top_n() < static_cast<uint32_t>(params_.top_logprobs)) {
    result_.logits.set_top_n(
        static_cast<uint32_t>(std::min<int64_t>(params_.top_logprobs, model_.vocab_size())));
  }
  if (session_.unsynced && !session_.named) {  // a cancelled call left the model's length unknown
    Session old;
    old.id = session_.id;
    model_.Release(old).IgnoreError();
    session_.id.clear();
    session_.unsynced = false;
    session_.overhang = false;
  }
  std::vector<int32_t> append = session_.pending;
  append.insert(append.end(), new_tokens.begin(), new_tokens.end());
  if (append.empty()) return absl::InvalidArgumentError("nothing to prefill: no new tokens");
  const int64_t prompt_tokens = static_cast<int64_t>(append.size());
  // The tokens a constraint forces at the start (a schema's `{"name": "`)
  // are prefilled with the prompt (not when the prompt is scored).
  std::vector<int32_t> forced;
  if (params_.constraint != nullptr) {
    grammar_ = std::make_unique<constrain::Matcher>(params_.constraint);
    if (grammar_->vocab_size() != model_.vocab_size()) {
      return absl::InvalidArgumentError(StrCat("the constraint was compiled for a vocabulary of ",
                                               grammar_->vocab_size(), " tokens, the model has ",
                                               model_.vocab_size()));
    }
    if (params_.prompt_logprobs < 0) {
      int64_t room = params_.max_tokens;
      if (const int64_t n = model_.context_length(); n > 0) {
        room = std::min<int64_t>(
            room, n - static_cast<int64_t>(session_.tokens.size()) - prompt_tokens - 1);
      }
      forced = Forced(room);
      for (int32_t f : forced) LLM_RETURN_IF_ERROR(AcceptToken(f));
      append.insert(append.end(), forced.begin(), forced.end());
    }
  }
  LLM_ASSIGN_OR_RETURN(PrefillResult prefill,
                       Prefill(append, /*score=*/params_.prompt_logprobs >= 0));
  session_.pending.clear();
  result_.prompt_tokens = prompt_tokens;
  result_.prompt_logprobs = std::move(prefill.prompt_logprobs);
  result_.cached_tokens = std::min<int64_t>(prefill.cached_tokens, result_.prompt_tokens);
  result_.kept_tokens = std::min<int64_t>(prefill.kept_tokens, result_.prompt_tokens);
  LLM_RETURN_IF_ERROR(logits_.Decode(prefill.logits, model_.vocab_size()));

  std::vector<int32_t> history = session_.tokens;  // for the penalties
  sampler::Rng rng(params_.sampling.seed);
  absl::Time first_token, last_token;
  std::optional<StopReason> stop;
  if (!forced.empty()) {
    first_token = last_token = absl::Now();
    result_.time_to_first_token = first_token - start;
    if (absl::Status s = EmitForced(forced, stop); !s.ok()) {
      CloseStreams().IgnoreError();
      return s;
    }
  }
  while (!stop) {
    absl::StatusOr<sampler::Sample> sample =
        loop_.sampler_.SampleToken(logits_.input(), params_.sampling, history, rng);
    if (!sample.ok()) {
      CloseStreams().IgnoreError();
      return sample.status();
    }
    if (!sample->exact) ++result_.inexact_samples;
    const int32_t token = sample->id;
    if (absl::Status s = AcceptToken(token); !s.ok()) {
      CloseStreams().IgnoreError();
      return s;
    }
    // Speculation: the last step fed proposed_[accepted_] after the token
    // before this one, whose row this was. Drawing it accepts it (already
    // in the model session); any other draw rejects it and the rest.
    bool fed = false;
    if (accepted_ < proposed_.size()) {
      fed = token == proposed_[accepted_];
      if (fed) {
        ++accepted_;
      } else {
        proposed_.clear();  // still in the model: the next step rolls them back
        accepted_ = 0;
      }
    }
    if (!params_.ignore_eos && IsEnd(token)) {
      stop = StopReason::kEos;  // a fed EOS stays in the overhang
      break;
    }
    if (fed) {
      ++result_.accepted_tokens;
      session_.tokens.push_back(token);
      if (accepted_ == proposed_.size()) session_.overhang = false;
    }
    last_token = absl::Now();
    if (result_.tokens.empty()) {
      first_token = last_token;
      result_.time_to_first_token = first_token - start;
    }
    result_.tokens.push_back(token);
    history.push_back(token);
    const bool last = static_cast<int32_t>(result_.tokens.size()) >= params_.max_tokens;
    // No room in the model session for this token: it is the last one.
    const bool full = !fed && ContextFull();
    // The model computes the next logits while the token is detokenized (a
    // fed token's are here already).
    const bool send = !fed && !last && !full;
    if (send) {
      if (absl::Status s = SendStep(token, history); !s.ok()) {
        CloseStreams().IgnoreError();
        return s;
      }
    }
    absl::StatusOr<std::string> text = Detokenize(token);
    if (!text.ok()) {
      if (send) AwaitStep(token, /*need_logits=*/false).IgnoreError();
      CloseStreams().IgnoreError();
      return text.status();
    }
    const StopStringMatcher::Step step = matcher_.Feed(*text);
    if (params_.top_logprobs > 0) TopLogprobs(logits_.input(), params_.top_logprobs, &top_);
    Emit(step.released, token, sample->logprob, top_);
    if (step.stopped) {
      stop = StopReason::kStopString;
    } else if (last) {
      stop = StopReason::kMaxTokens;
    } else if (full) {
      stop = StopReason::kContext;
    } else if (loop_.cancel_requested()) {
      stop = StopReason::kCancelled;
    }
    if (fed) {
      // The next row is the logits after this proposal.
      if (!stop) {
        if (absl::Status s = DecodeProposedRow(accepted_ - 1); !s.ok()) {
          CloseStreams().IgnoreError();
          return s;
        }
      }
      continue;
    }
    if (last || full) {
      session_.pending.push_back(token);  // sampled, never fed
    } else {
      absl::Status s = AwaitStep(token, /*need_logits=*/!stop.has_value());
      if (!s.ok()) {
        CloseStreams().IgnoreError();
        return s;
      }
      if (context_ended_ && !stop) stop = StopReason::kContext;
      if (forced_step_ && !stop) {
        // The grammar's forced tokens followed the token in this step: they
        // are output without a draw, and the logits after the last are the
        // next to draw from.
        const std::vector<int32_t> fed_forced = std::exchange(proposed_, {});
        forced_step_ = false;
        const size_t before = result_.tokens.size();
        if (absl::Status e = EmitForced(fed_forced, stop); !e.ok()) {
          CloseStreams().IgnoreError();
          return e;
        }
        const size_t emitted = result_.tokens.size() - before;
        history.insert(history.end(), fed_forced.begin(), fed_forced.begin() + emitted);
        session_.tokens.insert(session_.tokens.end(), fed_forced.begin(),
                               fed_forced.begin() + emitted);
        session_.overhang = emitted < fed_forced.size();  // a stop inside them
        last_token = absl::Now();
        if (!stop) {
          if (absl::Status e =
                  logits_.Decode(steps_->proposed_logits()[static_cast<int>(fed_forced.size()) - 1],
                                 model_.vocab_size());
              !e.ok()) {
            CloseStreams().IgnoreError();
            return e;
          }
        }
      }
    }
  }
  if (!result_.tokens.empty()) result_.decode_time = last_token - first_token;
  result_.stop_reason = *stop;
  result_.stop_string = matcher_.matched();
  absl::StatusOr<std::string> held = CloseStreams();
  if (!held.ok()) return held.status();
  if (*stop != StopReason::kStopString) {
    std::string tail = matcher_.Feed(*held).released;
    if (matcher_.stopped()) {
      result_.stop_reason = StopReason::kStopString;
      result_.stop_string = matcher_.matched();
    } else {
      tail += matcher_.Finish();
    }
    if (!tail.empty()) Emit(tail, -1, 0.0f);
  }
  return std::move(result_);
}

absl::StatusOr<GenerateResult> GenerateLoop::Generate(Session& session,
                                                      std::span<const int32_t> new_tokens,
                                                      const GenerateParams& params,
                                                      const TokenCallback& on_token) {
  LLM_RETURN_IF_ERROR(ValidateParams(params));
  // One generation at a time: a second one at once would share the
  // sampler's scratch and draw wrong tokens (silently, now and then).
  if (running_.exchange(true, std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        "a generation is already running on this loop: one at a time (a Generator per thread, "
        "over shared Services)");
  }
  absl::Cleanup done = [this] { running_.store(false, std::memory_order_release); };
  Run run(*this, session, params, on_token);
  const int64_t relocations = session.relocations;
  absl::StatusOr<GenerateResult> result = run.PrefillAndDecode(new_tokens);
  if (result.ok()) {
    result->session_relocations = static_cast<int32_t>(session.relocations - relocations);
  }
  return result;
}

}  // namespace llm::client
