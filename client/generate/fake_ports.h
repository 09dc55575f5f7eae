// In-memory TokenizerPort and ModelPort for the loop's tests.
//
// The fake model is a chain: the logits after token t make t + 1 the argmax
// (greedy sampling follows 1 -> 2 -> 3 ...), unless `logits_after` says
// otherwise. Its sessions hold the tokens fed (proposed ones too, rolled
// back by truncate_to and a Prefill of a session with an overhang); a step
// can be made to fail (fail_step, fail_with), which for a lost session also
// drops it, and a test may drop sessions itself (a restarted server): a
// step on one is NOT_FOUND, and a Prefill rebuilds it from the history, as
// ModelClient does. Token masks (StepOptions::mask, proposed_masks) are
// applied as the model service applies them: -inf at the masked ids of the
// float32 rows. Every Send ("send T", "+P,Q" for proposals, "@N" for
// truncate_to) and text Add is logged, in order, unless the log is null.
//
// Threads: one test's. Ownership: the model owns its sessions; streams
// borrow the model.
#ifndef LLM_CLIENT_GENERATE_FAKE_PORTS_H_
#define LLM_CLIENT_GENERATE_FAKE_PORTS_H_

#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/generate/cached_text.h"
#include "client/generate/ports.h"
#include "common/strings.h"

namespace llm::client::testing {

// A float32 row with -inf where `mask` (if any) disallows a token.
inline v1::Logits Masked(v1::Logits logits, const TokenMask* mask) {
  if (mask == nullptr) return logits;
  std::string& bytes = *logits.mutable_float32();
  for (size_t i = 0; i * 4 < bytes.size(); ++i) {
    if (mask->allowed(static_cast<int64_t>(i))) continue;
    const float inf = -std::numeric_limits<float>::infinity();
    std::memcpy(bytes.data() + 4 * i, &inf, 4);
  }
  return logits;
}

inline constexpr int32_t kFakeVocab = 16;
inline constexpr int32_t kFakeEos = 9;

class FakeTokenizer : public TokenizerPort {
 public:
  explicit FakeTokenizer(std::vector<std::string>* log) : log_(log) {}
  std::vector<std::string> bytes = std::vector<std::string>(kFakeVocab, "x");  // by id

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view, const EncodeOptions&) override {
    return absl::UnimplementedError("not in the fake");
  }
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) override {
    std::string text;
    for (int32_t id : ids) text += bytes.at(id);
    return text;
  }
  absl::StatusOr<std::unique_ptr<TextStream>> OpenText(int32_t) override {
    class Logged : public CachedText {
     public:
      Logged(TokenBytesCache& cache, std::vector<std::string>* log)
          : CachedText(cache), log_(log) {}
      absl::StatusOr<std::string> Add(int32_t token) override {
        if (log_ != nullptr) log_->push_back(StrCat("text ", token));
        return CachedText::Add(token);
      }
      std::vector<std::string>* log_;
    };
    return std::make_unique<Logged>(cache_, log_);
  }
  std::span<const int32_t> end_ids() const override { return end_ids_; }
  bool add_bos() const override { return false; }

 private:
  std::vector<std::string>* log_;
  TokenBytesCache cache_{[this](int32_t id) { return Decode(std::span<const int32_t>(&id, 1)); }};
  std::vector<int32_t> end_ids_ = {kFakeEos};
};

class FakeModel : public ModelPort {
 public:
  explicit FakeModel(std::vector<std::string>* log) : log_(log) {}
  int64_t vocab = kFakeVocab;  // vocab_size()
  int64_t context = 0;         // context_length()
  int64_t capacity = 0;        // what a session really holds (0: no limit)
  bool speculates = true;      // false: steps ignore proposed and truncate_to (an old server)
  int fail_step = -1;          // the step (0-based, all streams) that fails
  absl::Status fail_with;      // ... with this; NOT_FOUND etc. drop the session
  std::map<std::string, std::vector<int32_t>> sessions;  // the model's side
  std::vector<std::vector<int32_t>> prefills;            // every Prefill's tokens sent
  std::vector<bool> step_lookahead;  // every step's StepOptions::lookahead, in order
  int steps = 0, closes = 0, releases = 0, truncates = 0, next_id = 0;
  absl::Status truncate_error;  // what Truncate answers for a session it holds (OK: truncates)
  // The logits after a token given the session's tokens up to it; null:
  // After(token).
  std::function<v1::Logits(const std::vector<int32_t>& held)> logits_after;

  v1::Logits LogitsAfter(const std::vector<int32_t>& held) const {
    return logits_after ? logits_after(held) : After(held.back());
  }

  int64_t vocab_size() const override { return vocab; }
  int64_t context_length() const override { return context; }
  absl::StatusOr<PrefillResult> Prefill(Session& session, std::span<const int32_t> tokens,
                                        const StepOptions& options, const std::atomic<bool>&,
                                        int32_t* rebuilds) override {
    if (session.named) return SyncHistory(session, tokens, options);
    if (!session.id.empty() && !sessions.contains(session.id)) {  // lost: rebuilt
      session.id.clear();
      ++*rebuilds;
    }
    for (int32_t t : tokens) {
      if (t < 0 || t >= vocab) return absl::InvalidArgumentError(StrCat("no token ", t));
    }
    std::vector<int32_t> sent(tokens.begin(), tokens.end());
    if (session.id.empty()) {
      session.id = StrCat("s", next_id++);
      sent.insert(sent.begin(), session.tokens.begin(), session.tokens.end());
    }
    prefills.push_back(sent);
    std::vector<int32_t>& held = sessions[session.id];
    if (session.overhang) held.resize(session.tokens.size());  // truncate_to
    session.overhang = false;
    held.insert(held.end(), sent.begin(), sent.end());
    session.tokens.insert(session.tokens.end(), tokens.begin(), tokens.end());
    PrefillResult result{Masked(LogitsAfter(held), options.mask), {}};
    if (options.prompt_logprobs >= 0) {  // token t scores -t / 100
      for (size_t i = 1; i < tokens.size(); ++i) {
        v1::TokenLogprob& score = result.prompt_logprobs.emplace_back();
        score.set_token(tokens[i]);
        score.set_logprob(-static_cast<float>(tokens[i]) / 100);
      }
    }
    return result;
  }
  // A named session's Prefill (sync_history): the whole history; keeps the
  // common prefix (all but the last token at most), as the model server does.
  absl::StatusOr<PrefillResult> SyncHistory(Session& session, std::span<const int32_t> tokens,
                                            const StepOptions& options) {
    std::vector<int32_t> history = session.tokens;
    history.insert(history.end(), tokens.begin(), tokens.end());
    std::vector<int32_t>& held = sessions[session.id];
    size_t keep = 0;
    while (keep < held.size() && keep + 1 < history.size() && held[keep] == history[keep]) ++keep;
    prefills.emplace_back(history.begin() + static_cast<ptrdiff_t>(keep), history.end());
    held = history;
    session.tokens = std::move(history);
    session.overhang = false;
    session.unsynced = false;
    PrefillResult result{Masked(LogitsAfter(held), options.mask), {}};
    result.kept_tokens = static_cast<int64_t>(keep);
    return result;
  }
  std::unique_ptr<DecodeSteps> OpenSteps(const Session& session, int32_t) override;
  absl::Status Release(Session& session) override {
    ++releases;
    sessions.erase(session.id);
    session = Session();
    return absl::OkStatus();
  }
  absl::Status Truncate(Session& session, int64_t n) override {
    if (n < 0 || n > static_cast<int64_t>(session.tokens.size())) {
      return absl::InvalidArgumentError("truncate past the session");
    }
    ++truncates;
    if (sessions.contains(session.id) && !truncate_error.ok()) return truncate_error;
    if (auto it = sessions.find(session.id); it != sessions.end()) {
      it->second.resize(static_cast<size_t>(n));
    } else {
      session.id.clear();
    }
    session.tokens.resize(static_cast<size_t>(n));
    session.pending.clear();
    session.unsynced = false;
    session.overhang = false;
    return absl::OkStatus();
  }

  // Logits whose argmax is token + 1.
  static v1::Logits After(int32_t token) {
    std::vector<float> values(kFakeVocab, 0.0f);
    values[(token + 1) % kFakeVocab] = 10.0f;
    v1::Logits logits;
    logits.set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
    logits.set_float32(
        std::string(reinterpret_cast<const char*>(values.data()), 4 * values.size()));
    return logits;
  }

  std::vector<std::string>* log_;
};

class FakeSteps : public DecodeSteps {
 public:
  FakeSteps(FakeModel& model, std::string id) : model_(model), id_(std::move(id)) {}
  void Send(int32_t token, const StepOptions& options) override {
    std::string line = StrCat("send ", token);
    for (size_t i = 0; i < options.proposed.size(); ++i) {
      line += StrCat(i == 0 ? " +" : ",", options.proposed[i]);
    }
    if (options.truncate_to >= 0) line += StrCat(" @", options.truncate_to);
    if (model_.log_ != nullptr) model_.log_->push_back(line);
    model_.step_lookahead.push_back(options.lookahead);
    token_ = token;
    options_ = options;
    // The masks are borrowed for the call only: keep copies.
    mask_.reset();
    if (options.mask != nullptr) mask_ = *options.mask;
    proposed_masks_.assign(options.proposed_masks.begin(), options.proposed_masks.end());
    if (!model_.speculates) {
      options_.proposed.clear();
      options_.truncate_to = -1;
    }
  }
  absl::StatusOr<const v1::Logits*> Await() override {
    if (model_.steps++ == model_.fail_step) {
      if (absl::IsNotFound(model_.fail_with) || absl::IsUnavailable(model_.fail_with)) {
        model_.sessions.erase(id_);
      }
      return model_.fail_with;
    }
    auto it = model_.sessions.find(id_);
    if (it == model_.sessions.end()) return absl::NotFoundError("the session is lost");
    if (token_ < 0 || token_ >= model_.vocab) return absl::InvalidArgumentError("no such token");
    std::vector<int32_t>& held = it->second;
    const int64_t kept =
        options_.truncate_to >= 0 ? options_.truncate_to : static_cast<int64_t>(held.size());
    if (kept > static_cast<int64_t>(held.size())) {
      return absl::InvalidArgumentError("truncate_to past the session's length");
    }
    if (model_.capacity > 0 &&
        kept + 1 + static_cast<int64_t>(options_.proposed.size()) > model_.capacity) {
      return absl::OutOfRangeError("the session is full");
    }
    held.resize(kept);
    held.push_back(token_);
    logits_ = Masked(model_.LogitsAfter(held), mask_ ? &*mask_ : nullptr);
    proposed_logits_.Clear();
    for (size_t i = 0; i < options_.proposed.size(); ++i) {
      held.push_back(options_.proposed[i]);
      *proposed_logits_.Add() = Masked(model_.LogitsAfter(held),
                                       i < proposed_masks_.size() ? &proposed_masks_[i] : nullptr);
    }
    return &logits_;
  }
  const google::protobuf::RepeatedPtrField<v1::Logits>& proposed_logits() const override {
    return proposed_logits_;
  }
  absl::Status Close() override {
    ++model_.closes;
    return absl::OkStatus();
  }

 private:
  FakeModel& model_;
  const std::string id_;
  int32_t token_ = -1;
  StepOptions options_;
  std::optional<TokenMask> mask_;
  std::vector<TokenMask> proposed_masks_;
  v1::Logits logits_;
  google::protobuf::RepeatedPtrField<v1::Logits> proposed_logits_;
};

inline std::unique_ptr<DecodeSteps> FakeModel::OpenSteps(const Session& session, int32_t) {
  return std::make_unique<FakeSteps>(*this, session.id);
}

}  // namespace llm::client::testing

#endif  // LLM_CLIENT_GENERATE_FAKE_PORTS_H_
