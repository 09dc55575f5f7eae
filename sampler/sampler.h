// The client-side sampler: picks the next token from one position's logits.
//
//   Sampler sampler;                  // one per generation: holds scratch buffers
//   Rng rng(params.seed);             // explicit state: the run is reproducible
//   LLM_RETURN_IF_ERROR(Validate(params));
//   LLM_ASSIGN_OR_RETURN(Sample s, sampler.SampleToken(LogitsInput::Full(logits),
//                                                      params, history, rng));
//
// Order of operations (the seed's, with the usual extensions; docs/sampler.md):
//   1. logit_bias is added, then the penalties are applied to the tokens of the
//      last penalty_last_n entries of `history`: repetition (llama.cpp / CTRL:
//      a positive logit is divided by repetition_penalty, a negative one
//      multiplied by it), then frequency and presence (OpenAI: subtract
//      count * frequency_penalty + presence_penalty, count = occurrences in
//      the window).
//   2. temperature == 0: greedy, the largest logit (ties: the lowest id). The
//      filters below are skipped (they would all keep that token) and the Rng
//      is not used.
//   3. Divide by temperature and softmax.
//   4. top-k: keep the k most probable tokens (ties: lower ids first).
//   5. top-p: keep the smallest set of most probable tokens whose probability
//      sum is >= top_p, measured on what top-k kept (renormalized), as
//      llama.cpp and Hugging Face do. Ties at the boundary: lower ids first.
//   6. min-p: keep the tokens with p >= min_p * p_max.
//   7. Renormalize what is left and draw one token with one rng.Uniform().
// Tokens whose probability is exactly 0 (a -inf bias, or underflow at a very
// low temperature) are never drawn and not counted as candidates.
//
// Numbers: logits are float; probabilities are computed in float with the
// sampler's own exp (relative error ~2e-7, see kernels.h), sums in double. The
// draws of a seeded run are identical on every x86-64 CPU (AVX2 or not).
//
// Threads: a Sampler is not thread-safe (its scratch buffers are reused);
// distinct Samplers may run concurrently. The free functions are thread-safe.
#ifndef LLM_SAMPLER_SAMPLER_H_
#define LLM_SAMPLER_SAMPLER_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sampler/rng.h"

namespace llm::sampler {

namespace internal {
struct Kernels;
struct Candidate {  // one token of a candidate list
  float logit;      // after bias and penalties
  float raw;        // as the model sent it
  int32_t id;
  bool modified;  // bias or a penalty changed it
};
struct Patch {  // bias and penalty of one id
  int32_t id;
  int32_t count;  // occurrences in the penalty window
  double bias;    // sum of its logit_bias entries
};
}  // namespace internal

struct LogitBias {
  int32_t id = 0;
  // Added to the token's logit before the penalties. Finite, or -inf to ban
  // the token. Several entries for one id add up.
  float bias = 0.0f;
};

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy; otherwise finite and > 0
  int32_t top_k = 0;                // 0 = off; a k >= the vocabulary is also off
  float top_p = 1.0f;               // in (0, 1]; 1 = off
  float min_p = 0.0f;               // in [0, 1]; 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off; > 1 discourages repeats
  float presence_penalty = 0.0f;    // finite; 0 = off
  float frequency_penalty = 0.0f;   // finite; 0 = off
  // How many of the most recent history tokens the penalties look at:
  // 0 = none (penalties off), -1 = the whole history.
  int32_t penalty_last_n = 64;
  std::vector<LogitBias> logit_bias;
  // Not read by the sampler: the caller seeds its Rng with it (Rng rng(seed)).
  uint64_t seed = 0;
};

// InvalidArgument, naming the field and its value, for: temperature negative or
// not finite; top_k negative; top_p outside (0, 1]; min_p outside [0, 1];
// repetition_penalty not finite or <= 0; presence or frequency penalty not
// finite; penalty_last_n < -1; a logit_bias entry with a negative id, a NaN or
// a +inf bias. (Ids beyond the vocabulary are caught by SampleToken.)
absl::Status Validate(const SamplingParams& params);

// A non-owning view of one position's logits in either form the model service
// sends. The spans must stay valid while the view is used.
class LogitsInput {
 public:
  // One logit per vocabulary id (float32, or float16 decoded by the caller).
  static LogitsInput Full(std::span<const float> logits) {
    return LogitsInput(false, {}, logits, 0.0f, static_cast<int64_t>(logits.size()));
  }
  // The N largest logits of the vocabulary (ids[i] has logits[i]; any order,
  // distinct ids) and log(sum(exp(logit))) over the whole vocabulary of
  // vocab_size tokens. Exactness rules: see "Top-N input" below.
  static LogitsInput TopN(std::span<const int32_t> ids, std::span<const float> logits,
                          float log_sum_exp, int64_t vocab_size) {
    return LogitsInput(true, ids, logits, log_sum_exp, vocab_size);
  }

  bool is_top_n() const { return top_n_; }
  std::span<const int32_t> ids() const { return ids_; }  // empty for Full
  std::span<const float> logits() const { return logits_; }
  float log_sum_exp() const { return log_sum_exp_; }  // TopN only
  int64_t vocab_size() const { return vocab_size_; }

 private:
  LogitsInput(bool top_n, std::span<const int32_t> ids, std::span<const float> logits,
              float log_sum_exp, int64_t vocab_size)
      : top_n_(top_n),
        ids_(ids),
        logits_(logits),
        log_sum_exp_(log_sum_exp),
        vocab_size_(vocab_size) {}

  bool top_n_;
  std::span<const int32_t> ids_;
  std::span<const float> logits_;
  float log_sum_exp_;
  int64_t vocab_size_;
};

struct Sample {
  int32_t id = 0;
  // log p(id) under the model's own distribution: log_softmax of the raw
  // logits, before bias, penalties, temperature and filters. Exact for full
  // logits; logit - log_sum_exp for top-N input (also exact).
  float logprob = 0.0f;
  // Tokens left after the filters (with a nonzero probability); 1 for greedy.
  int32_t num_candidates = 0;
  // True when the token was drawn from exactly the distribution that full
  // logits would have given. Always true for full logits; for top-N input, see
  // below (a false is conservative: the result may still be exact).
  bool exact = true;
};

// Top-N input. The sampler knows the N candidates; of the rest of the
// vocabulary (the "tail") it knows only that every tail logit is <= the
// smallest candidate's (the N must really be the largest, ties to lower ids,
// as the model service sends them) and, through log_sum_exp, the tail's total
// probability at temperature 1. It treats the tail as absent and renormalizes
// over the candidates, except that top-p without top-k at temperature 1 counts
// the tail's probability in its total. The draw is exact (Sample::exact) when
// the filters provably keep only candidates:
//   - greedy: always;
//   - top-k with k <= N, whatever top-p and min-p do after it;
//   - top-p without top-k, at temperature 1: when the candidates' cumulative
//     probability reaches top_p (at other temperatures the tail's mass is
//     unknown: not exact, unless min-p decides);
//   - min-p: when the smallest candidate's p < min_p * p_max (no tail token
//     passes) and min-p, not top-p, decides the final set;
//   - no filter: only if N is the whole vocabulary.
// Bias and penalties can reorder candidates and tail. "Always" and "k <= N"
// then need enough candidates that provably outrank every tail token.
// Lowering ones (repetition_penalty >= 1, presence and frequency penalties
// >= 0, biases <= 0) never lift a tail token, so max(k, 1) + penalty_last_n +
// (number of negative biases) candidates always suffice (RecommendedTopN).
// A lifting one (repetition_penalty < 1, a negative presence or frequency
// penalty, a positive bias) on a tail token leaves only an upper bound on its
// logit (the change applied to the smallest candidate's logit), which the
// exactness check uses; a top-p total that needs the tail's mass is then not
// exact either.

// Whether top-N input with n candidates gives exactly the full-logits result
// for every logits vector, judging from the parameters alone: greedy or top-k,
// with n >= RecommendedTopN(params) > 0.
bool IsExactForTopN(const SamplingParams& params, int64_t n);

// The smallest N for which top-N input is always exact (see above), or 0 when
// no N is (sampling without top-k, lifting bias or penalties, or
// penalty_last_n == -1 with penalties on): then ask for full logits. Greedy
// without bias or penalties gives 1; top-k alone gives k. A top-N candidate
// costs 8 bytes and a full logit 4, so full logits are cheaper when 2 * N >= the
// vocabulary size.
int64_t RecommendedTopN(const SamplingParams& params);

// Whether the sampler always picks the largest logit of its input (ties: the
// lowest id), whatever the logits: greedy with no bias and no penalties. A
// client may then tell the model service (DecodeTokenRequest.lookahead) that
// its next token is the argmax.
bool PicksArgmax(const SamplingParams& params);

// Holds the scratch buffers of one generation (a few vocabulary-sized
// vectors); after the first call with a given vocabulary size, SampleToken
// allocates nothing.
class Sampler {
 public:
  Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Picks a token. `history` is the sequence so far (prompt and generated
  // tokens, oldest first); only its last penalty_last_n entries are read, and
  // they must be ids inside the vocabulary. Uses exactly one rng.Uniform() when
  // temperature > 0 and none for greedy.
  //
  // Full logits may hold -inf for tokens a token mask disallowed (they are
  // never drawn, and the logprob is over the others: the model's
  // distribution restricted to the allowed tokens).
  //
  // InvalidArgument: Validate(params) fails; a logit is NaN or +inf, or every
  // one is -inf (a top-N input: any non-finite logit); an empty
  // input; a bias or history id outside the vocabulary; top-N input with ids
  // and logits of different lengths, repeated or out-of-range ids, N larger
  // than vocab_size, or a log_sum_exp that is not finite or below the largest
  // logit; every token banned by -inf biases.
  //
  // Cost for a vocabulary of V and a penalty window of W: O(V) in vectorized
  // passes, never a sort of the vocabulary. Greedy and top-k: three passes
  // (plus O(k log k)); min-p or no filter: four; top-p without top-k: about
  // seven, the last ones over a shrinking band, plus a sort of at most a few
  // hundred tokens. Bias and penalties add a copy of the logits, a pass and
  // O(W log W). Top-N input: O(N log N). See docs/sampler.md for timings.
  absl::StatusOr<Sample> SampleToken(const LogitsInput& input, const SamplingParams& params,
                                     std::span<const int32_t> history, Rng& rng);

  // For tests: the same sampler on a given kernel set.
  explicit Sampler(const internal::Kernels& kernels);

 private:
  absl::StatusOr<Sample> SampleFull(std::span<const float> logits, const SamplingParams& params,
                                    std::span<const int32_t> history, Rng& rng);
  absl::StatusOr<Sample> SampleTopN(const LogitsInput& input, const SamplingParams& params,
                                    std::span<const int32_t> history, Rng& rng);
  absl::Status BuildPatches(const SamplingParams& params, std::span<const int32_t> history,
                            int64_t vocab_size);
  // candidates_ = the k best of `logits` (ties: lower ids), unordered.
  void HeapTopK(std::span<const float> logits, std::span<const float> raw, int64_t k);
  // Top-p over probs_ (whose sum is `total`): returns (tau, quota), meaning the
  // tokens with p > tau plus the `quota` lowest ids with p == tau (kAllTies:
  // all of them).
  std::pair<float, int64_t> TopPCut(double total, double top_p);

  // What a filtered list of candidates left, for the top-N exactness rules.
  struct ListResult {
    int32_t id = 0;
    float raw = 0.0f;
    int32_t num_candidates = 0;
    int64_t kept_by_top_p = 0;  // candidates after top-k and top-p
    bool top_p_closed = false;  // top-p reached its target inside the list
    int64_t kept_by_min_p = 0;  // candidates with p >= min_p * p_max (all if off)
  };
  // Steps 3-7 over candidates_ (temperature > 0). tail_mass: probability mass
  // outside the list, in units of the best candidate's (top-p only).
  ListResult SampleList(const SamplingParams& params, double tail_mass, Rng& rng);

  const internal::Kernels* kernels_;
  std::vector<float> work_;           // patched logits
  std::vector<float> probs_;          // exp((logit - max) / temperature)
  std::vector<int32_t> band_idx_[2];  // TopPCut's compacted bands (ping-pong)
  std::vector<float> band_val_[2];
  std::vector<std::pair<float, int32_t>> pairs_;
  std::vector<internal::Candidate> candidates_;
  std::vector<float> list_logits_;
  std::vector<float> list_probs_;
  std::vector<int32_t> window_;
  std::vector<internal::Patch> patches_;
  std::vector<std::pair<int32_t, int32_t>> index_;  // top-N: (id, position), by id
};

// One call on a temporary Sampler (allocates its scratch buffers each time).
absl::StatusOr<Sample> SampleToken(const LogitsInput& input, const SamplingParams& params,
                                   std::span<const int32_t> history, Rng& rng);

}  // namespace llm::sampler

#endif  // LLM_SAMPLER_SAMPLER_H_
