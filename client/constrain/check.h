// Checking texts against a constraint, token by token, with a real
// vocabulary's tokenizer: what `llm constrain --check` does (and the JSON
// Schema conformance test, through the same functions).
//
// Threads: the functions are reentrant; a Constraint and a Tokenizer may be
// shared. Cost: one mask (FillMask) per token plus one at the end, each timed.
#ifndef LLM_CLIENT_CONSTRAIN_CHECK_H_
#define LLM_CLIENT_CONSTRAIN_CHECK_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/constrain/constraint.h"
#include "tokenizer_svc/tokenizer.h"
#include "tokenizer_svc/vocab.h"

namespace llm::constrain {

// A tokenizer vocabulary as the grammar engine takes it: every token's bytes,
// the end ids (EOS, EOT), and the control, unknown and unused tokens as
// special (never allowed).
Vocabulary VocabularyOf(const tok::Vocab& vocab);

struct InstanceCheck {
  bool accepted = false;
  int tokens = 0;  // tokens of the text
  // The first token the constraint refused, tokens when the constraint
  // cannot end after the last one, -1 when accepted.
  int refused_at = -1;
};

// Feeds `ids` to a fresh Matcher of `constraint`: accepted iff the mask
// before each token allows it (and Accept takes it) and an end is allowed
// after the last. Appends each FillMask's time, in microseconds, to *mask_us
// (if not null). Internal when the mask and Accept disagree.
absl::StatusOr<InstanceCheck> CheckTokens(std::shared_ptr<const Constraint> constraint,
                                          std::span<const uint32_t> ids,
                                          std::vector<double>* mask_us);

// Tokenizes `text` as ordinary text (no special tokens; no SentencePiece
// space prefix: the vocabulary's tokenizer should be created without it, as
// TokenizerForChecks does) and checks the tokens. The tokenizer's errors (a
// byte it has no token for) are returned.
absl::StatusOr<InstanceCheck> CheckText(std::shared_ptr<const Constraint> constraint,
                                        const tok::Tokenizer& tokenizer, std::string_view text,
                                        std::vector<double>* mask_us);

// The tokenizer of `vocab` for CheckText: a SentencePiece vocabulary's space
// prefix is off, so that the tokens spell the text exactly, as a model's
// output tokens do.
absl::StatusOr<std::unique_ptr<tok::Tokenizer>> TokenizerForChecks(tok::Vocab vocab);

// A vocabulary file's tokenizer and constraint compiler, loaded once, and the
// checks of `llm constrain`: a spec compiled, then each instance checked.
class ConstraintChecker {
 public:
  // Loads a .gguf or .tiktoken vocabulary (its errors returned).
  static absl::StatusOr<std::unique_ptr<ConstraintChecker>> Load(
      const std::string& vocab_path, const CompilerOptions& options = {});

  struct Instance {
    bool accepted = false;
    std::string error;  // the tokenizer's, for a text it cannot tokenize
  };
  struct Report {
    bool compiled = false;
    std::string error;  // why not compiled
    double compile_ms = 0;
    std::vector<Instance> instances;
    std::vector<double> mask_us;  // every mask of every instance
  };
  // Compiles `spec` (timed: from the cache when seen before) and checks each
  // instance. Internal when the engine contradicts itself (CheckTokens).
  absl::StatusOr<Report> Run(const Spec& spec, const std::vector<std::string>& instances);

  Compiler& compiler() { return *compiler_; }
  const tok::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  ConstraintChecker(std::unique_ptr<tok::Tokenizer> tokenizer, std::unique_ptr<Compiler> compiler)
      : tokenizer_(std::move(tokenizer)), compiler_(std::move(compiler)) {}
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::unique_ptr<Compiler> compiler_;
};

// The p-th percentile (0..100, nearest rank) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_CHECK_H_
