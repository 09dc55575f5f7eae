// Structured generation's grammar engine: a constraint (a JSON schema, any
// JSON object, a regex, a GBNF grammar or a list of choices) compiled against
// a vocabulary, and a Matcher per generation that says, before each step,
// which tokens may come next (constraint_matcher.h).
//
//   LLM_ASSIGN_OR_RETURN(auto compiler, Compiler::Create(vocabulary));
//   LLM_ASSIGN_OR_RETURN(auto constraint, compiler->Compile(
//       {.kind = Kind::kJsonSchema, .text = schema}));
//   Matcher matcher(constraint);
//
// The engine is xgrammar's C++ core (cmake/xgrammar.cmake pins its version);
// no xgrammar type or exception crosses this interface.
//
// Errors: a constraint that cannot be compiled is InvalidArgument, with a
// message that names what is wrong or unsupported ("unsupported JSON Schema
// keyword 'not' at /properties/a", "regex: ...", "grammar: ..."). Never a
// crash or an exception.
//
// Bounds (CompilerOptions): the text of a constraint is at most
// max_text_bytes (256 KiB), its nesting (JSON brackets of a schema,
// parentheses of a regex or a grammar) at most max_nesting (64) levels, a
// choice list at most max_choices entries; beyond them InvalidArgument says
// which bound, before any compilation. Within them the compile time is
// bounded by compiling large grammars lazily (eager_compile_limit): xgrammar
// precomputes each grammar state's tokens, which costs the grammar's size
// times the vocabulary's; a large grammar has them computed on the first
// mask in each state instead. Measured figures: docs/structured_output.md.
//
// Threads: a Compiler is thread-safe; a Constraint is immutable and shared by
// any number of Matchers on any threads. Cost: the first Compile of a spec
// takes milliseconds to seconds; a spec seen before (same kind, text and
// options) comes from the compiler's LRU cache in microseconds, and two
// threads compiling the same spec at once compile it once.
#ifndef LLM_CLIENT_CONSTRAIN_CONSTRAINT_H_
#define LLM_CLIENT_CONSTRAIN_CONSTRAINT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::constrain {

enum class Kind : uint8_t {
  kJsonSchema,  // text: a JSON Schema (draft 2020-12; draft 7's array-form items too)
  kJsonObject,  // any JSON object (OpenAI's json_object mode); text unused
  kRegex,       // text: a regular expression the whole output must match
  kGrammar,     // text: a GBNF grammar (llama.cpp's format) with a rule named root
  kChoice,      // choices: the output is exactly one of them
  // text: an xgrammar structural tag (JSON): free text with tagged regions
  // (a tool call between its family's markers) whose contents follow their
  // schemas; client/tools/tool_constraint.h builds them.
  kStructuralTag,
};

// "json_schema", "json_object", "regex", "grammar", "choice", "structural_tag".
std::string_view KindName(Kind kind);

// What to compile.
struct Spec {
  Kind kind = Kind::kJsonSchema;
  std::string text;
  std::vector<std::string> choices;  // kChoice only: non-empty UTF-8 strings

  // JSON (kJsonSchema, kJsonObject) only.
  // Properties an object schema does not name, and array items past those a
  // schema lists, are refused (xgrammar's strict mode, OpenAI's "strict"),
  // although JSON Schema allows them; false follows JSON Schema.
  bool strict = false;
  // true: any whitespace between JSON tokens (spaces, tabs, newlines), at
  // most max_whitespace characters per gap (at least 20; a bound, so that a
  // model cannot loop on whitespace). false: exactly as Python's json.dumps
  // writes JSON by default, ", " and ": " between tokens and nothing else,
  // which leaves a generation fewer choices and more forced tokens.
  bool any_whitespace = true;
  int max_whitespace = 20;
  // Properties in any order. false: in the order of the schema's
  // "properties" (as a generation writes them, with fewer choices), which
  // JSON Schema does not require.
  bool any_order = false;
  // Keywords xgrammar ignores (xgrammar's own behaviour: "not", "if",
  // "uniqueItems", ... are dropped and the rest is enforced). false refuses
  // such a schema with InvalidArgument naming the keyword.
  bool lenient = false;
};

// The vocabulary a constraint is compiled for: every token's bytes by id.
struct Vocabulary {
  std::vector<std::string> token_bytes;  // id -> the token's exact bytes
  // The tokens that end a generation (EOS, EOT): allowed where the grammar is
  // complete, and only there.
  std::vector<int32_t> end_ids;
  // Tokens a grammar never allows (control tokens such as <|im_start|>,
  // whose bytes are not text): their bytes are ignored. A token with no
  // bytes is never allowed either.
  std::vector<int32_t> special_ids;
  // The number of logits (and of mask bits), >= token_bytes.size(); ids past
  // the token list are never allowed. 0: token_bytes.size().
  int32_t size = 0;
};

// Bounds and resources of a Compiler.
struct CompilerOptions {
  size_t max_text_bytes = 256 * 1024;
  int max_nesting = 64;
  size_t max_choices = 4096;
  int max_whitespace_limit = 1024;  // largest Spec::max_whitespace
  // The cache of compiled constraints (failures included): at most this many
  // entries and about this many bytes (xgrammar's estimate of each compiled
  // grammar plus its key), least recently used first out.
  size_t cache_entries = 256;
  size_t cache_bytes = 512u << 20;
  // Threads of one compilation (xgrammar's pool); 0: min(8, cores).
  int threads = 0;
  // A grammar whose size (its EBNF text, plus 16 bytes per repetition a
  // quantifier allows) times the vocabulary's size passes this is compiled
  // lazily: each grammar state's tokens are computed on the first mask that
  // needs them, not all before the first mask. 1e10 is about 40 KB of grammar
  // at a 262k vocabulary, 200 KB at 49k: a few seconds of eager compile.
  double eager_compile_limit = 1e10;
};

class Compiler;

// A compiled constraint: immutable, shared (std::shared_ptr) by the cache
// and every Matcher that uses it.
class Constraint {
 public:
  struct Impl;
  explicit Constraint(std::unique_ptr<Impl> impl);
  ~Constraint();
  Constraint(const Constraint&) = delete;
  Constraint& operator=(const Constraint&) = delete;

  Kind kind() const;
  int32_t vocab_size() const;  // bits of a mask
  // xgrammar's estimate of the compiled grammar's memory.
  size_t memory_bytes() const;
  // The time the first compilation took (a cached one keeps it).
  double compile_ms() const;
  // Compiled lazily (CompilerOptions::eager_compile_limit): the first mask in
  // each grammar state costs that state's share of the compile.
  bool lazy() const;

  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class Compiler {
 public:
  struct CacheStats {
    int64_t hits = 0;    // answered from the cache (or from a compilation in flight)
    int64_t misses = 0;  // compiled
    int64_t evictions = 0;
    size_t entries = 0;
    size_t bytes = 0;
  };

  // Prepares the vocabulary (sorts it, builds xgrammar's token trie: about
  // 0.1 s at 262k tokens). InvalidArgument for an empty vocabulary, an end or
  // special id out of range, a size below the token count.
  static absl::StatusOr<std::unique_ptr<Compiler>> Create(const Vocabulary& vocabulary,
                                                          const CompilerOptions& options = {});
  ~Compiler();

  // The compiled constraint of `spec`, from the cache when it was compiled
  // before (errors are cached too). InvalidArgument for a spec that breaks a
  // bound or does not compile; ResourceExhausted when memory runs out.
  absl::StatusOr<std::shared_ptr<const Constraint>> Compile(const Spec& spec);

  int32_t vocab_size() const;
  CacheStats cache_stats() const;

  struct Impl;

 private:
  explicit Compiler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_CONSTRAINT_H_
