// Prompt lookup decoding: the tokens a speculative decode step proposes,
// found in the conversation itself (no draft model).
//
// The proposal continues the most recent earlier occurrence of the
// conversation's last n tokens: for n = kMaxNgram (3) down to min_ngram, the
// latest position where those n tokens occurred before, and the k tokens
// that followed them there (when those reach the end of the conversation, the
// proposal goes on copying itself, as LZ77 does: a run that repeats with
// period p is proposed to go on repeating). A longer match is a more reliable
// predictor, so it is tried first; the first n that matches decides. Text
// that quotes or rewrites its input (code edits, summaries with quotations,
// extraction) repeats long runs of the prompt, and so do the model's own
// repetitions; free chat seldom does, and then nothing (or a poor guess) is
// proposed. min_ngram = 1 proposes after a single matching token: more
// proposals, lower acceptance (the model server computes every proposed
// row, accepted or not). The loop's default is 2 (kDefaultMinNgram): fewer,
// better proposals for the same accepted tokens (bench/README.md,
// "Measurements behind the code").
//
// Threads: a pure function. Cost: O(len(history) * kMaxNgram) per call, a
// scan back from the end that stops at the first match.
#ifndef LLM_CLIENT_GENERATE_NGRAM_PROPOSER_H_
#define LLM_CLIENT_GENERATE_NGRAM_PROPOSER_H_

#include <cstdint>
#include <span>
#include <vector>

namespace llm::client {

inline constexpr int kMaxNgram = 3;
// The shortest suffix the generation loop matches (LoopOptions::min_ngram):
// a bigram (see above).
inline constexpr int kDefaultMinNgram = 2;

// Replaces *out with `max_tokens` proposed continuations of `history`
// (oldest first): empty when no suffix of kMaxNgram..min_ngram tokens
// (min_ngram clamped to 1..kMaxNgram) occurred before.
void ProposeByNgram(std::span<const int32_t> history, int32_t max_tokens, int min_ngram,
                    std::vector<int32_t>* out);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_NGRAM_PROPOSER_H_
