// The state of one generation under a constraint (constraint.h): which
// tokens may come next, the tokens accepted so far, rollback, and the tokens
// the grammar forces.
//
//   Matcher m(constraint);
//   std::vector<uint32_t> mask(m.mask_words());
//   while (!m.IsTerminated()) {
//     LLM_RETURN_IF_ERROR(m.FillMask(mask));  // bit id % 32 of word id / 32
//     int32_t id = Sample(logits, mask);
//     if (!m.Accept(id)) ...;                 // cannot happen for a masked draw
//   }
//
// Threads: a Matcher belongs to one thread at a time (one generation); many
// Matchers may share a Constraint on any threads.
// Cost: FillMask is the per-step cost (microseconds: xgrammar reads most of
// the mask from its precomputed cache and checks only the tokens a state
// leaves open); Accept and Rollback are cheap (one token's bytes).
#ifndef LLM_CLIENT_CONSTRAIN_MATCHER_H_
#define LLM_CLIENT_CONSTRAIN_MATCHER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/constraint.h"

namespace llm::constrain {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Constraint> constraint);
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  int32_t vocab_size() const;
  // uint32 words of a mask: (vocab_size + 31) / 32.
  int32_t mask_words() const;

  // Writes the set of tokens allowed next: bit (id % 32) of mask[id / 32] is
  // set iff id is allowed (the end ids where the grammar is complete; bits
  // past vocab_size are clear). Never empty: InvalidArgument, naming the
  // state, where no token continues the output (an empty character class, a
  // character no token spells), and for a mask of another size;
  // FailedPrecondition once terminated. Cost: xgrammar's fill, then one pass
  // over the words.
  absl::Status FillMask(std::span<uint32_t> mask);

  // Accepts `id` when the grammar allows it next (true) and advances;
  // otherwise (false) nothing changes. An end id, accepted where the grammar
  // is complete, terminates the matcher. false once terminated and for an id
  // outside the vocabulary.
  bool Accept(int32_t id);

  // Undoes the last n accepted tokens (an accepted end id counts; rolling it
  // back un-terminates). InvalidArgument for n < 0 or n > accepted().
  absl::Status Rollback(int n);

  // The tokens the grammar forces from here (xgrammar's jump-forward
  // decoding): the continuation the grammar admits uniquely (`{"name": "`
  // after `{` in a schema with one required first key), cut into the longest
  // vocabulary tokens that spell it, greedily, leaving out a last token that
  // a longer token could extend and any end or special token. A model's own
  // tokenization of that text may differ (as any other tokenization it is
  // still accepted). Does not change the matcher: Accept each one to use
  // them. Empty when nothing is forced or once terminated.
  std::vector<int32_t> ForcedTokens() const;
  // The forced continuation as bytes (xgrammar's jump-forward string), for a
  // caller that tokenizes it itself.
  std::string ForcedText();

  // The grammar is complete here: an end id is allowed next.
  bool CanEnd() const;
  // An end id was accepted.
  bool IsTerminated() const;
  // Tokens accepted since construction or Reset (less those rolled back).
  int accepted() const { return accepted_; }
  // Back to the start, as constructed.
  void Reset();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int accepted_ = 0;
};

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_MATCHER_H_
