/* The grammar engine (constraint.h, matcher.h) behind a C interface, for
 * other languages: the shared library libllm_constrain.so (build/bin), which
 * the Python client loads with ctypes (clients/python/llm_client/
 * constrain.py). Only the llm_constrain_* functions are exported.
 *
 *   LlmConstrainCompiler* compiler;
 *   char* error;
 *   llm_constrain_compiler_create(bytes, offsets, n, ends, 1, specials, k, vocab_size,
 *                                 &compiler, &error);
 *   LlmConstrainConstraint* c;
 *   if (llm_constrain_compile(compiler, LLM_CONSTRAIN_JSON_SCHEMA, schema, len, NULL, NULL,
 *                             0, 0, 20, &c, &error) != 0) {
 *     puts(error);                 // "unsupported JSON Schema keyword 'not' at /"
 *     llm_constrain_free_error(error);
 *   }
 *   LlmConstrainMatcher* m;
 *   llm_constrain_matcher_create(c, &m, &error);
 *   llm_constrain_matcher_fill_mask(m, words, num_words, &error);  // before each step
 *   llm_constrain_matcher_accept(m, token);                        // after each draw
 *
 * Status: a function that can fail returns 0 (OK) or the absl::StatusCode of
 * its error: 3 (INVALID_ARGUMENT: a bad argument, a spec that does not
 * compile), 8 (RESOURCE_EXHAUSTED: out of memory), 9 (FAILED_PRECONDITION:
 * the matcher has terminated), 13 (INTERNAL: the engine failed). When
 * `error` is not NULL, *error is then a message (NUL-terminated, UTF-8)
 * that the caller frees with llm_constrain_free_error, and NULL on success.
 * No C++ exception crosses this interface.
 *
 * Ownership: every handle a function returns is the caller's, freed with
 * its *_free function (which accepts NULL). A constraint handle shares the
 * compiled constraint: freeing it (or the compiler) leaves the matchers made
 * from it valid.
 *
 * Threads: a compiler and a constraint may be used from any threads at once;
 * a matcher by one thread at a time. Cost: as constraint.h and matcher.h say
 * (a compile takes milliseconds to seconds, or microseconds from the
 * compiler's cache; a mask microseconds).
 */
#ifndef LLM_CLIENT_CONSTRAIN_C_API_H_
#define LLM_CLIENT_CONSTRAIN_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Changes whenever a declaration below changes. */
#define LLM_CONSTRAIN_ABI_VERSION 1

typedef struct LlmConstrainCompiler LlmConstrainCompiler;
typedef struct LlmConstrainConstraint LlmConstrainConstraint;
typedef struct LlmConstrainMatcher LlmConstrainMatcher;

/* Constraint kinds (constrain::Kind). */
enum {
  LLM_CONSTRAIN_JSON_SCHEMA = 0,
  LLM_CONSTRAIN_JSON_OBJECT = 1,
  LLM_CONSTRAIN_REGEX = 2,
  LLM_CONSTRAIN_GRAMMAR = 3,
  LLM_CONSTRAIN_CHOICE = 4,
};

/* Options of a compile (constrain::Spec), or-ed together. */
enum {
  LLM_CONSTRAIN_STRICT = 1,       /* Spec::strict */
  LLM_CONSTRAIN_COMPACT_JSON = 2, /* Spec::any_whitespace = false */
  LLM_CONSTRAIN_ANY_ORDER = 4,    /* Spec::any_order */
  LLM_CONSTRAIN_LENIENT = 8,      /* Spec::lenient */
};

/* The wire encodings of a mask (llm.v1.TokenMask; common/token_mask.h). */
enum {
  LLM_CONSTRAIN_MASK_BITSET = 0,
  LLM_CONSTRAIN_MASK_ALLOWED = 1,
  LLM_CONSTRAIN_MASK_DISALLOWED = 2,
};

/* LLM_CONSTRAIN_ABI_VERSION of the library (a caller checks it first). */
int32_t llm_constrain_abi_version(void);

/* Frees a message from a failed call. */
void llm_constrain_free_error(char* error);

/* A compiler for a vocabulary (constrain::Compiler::Create): token i's bytes
 * are bytes[offsets[i] .. offsets[i + 1]) for i < num_tokens (offsets has
 * num_tokens + 1 entries, non-decreasing); end_ids end a generation (allowed
 * where the grammar is complete); special_ids are never allowed; vocab_size
 * is the number of logits (and of mask bits), >= num_tokens (0: num_tokens).
 * Copies what it needs. INVALID_ARGUMENT for bad offsets, an empty
 * vocabulary, an id out of range. */
int llm_constrain_compiler_create(const char* bytes, const int64_t* offsets, int32_t num_tokens,
                                  const int32_t* end_ids, int32_t num_end_ids,
                                  const int32_t* special_ids, int32_t num_special_ids,
                                  int32_t vocab_size, LlmConstrainCompiler** out, char** error);
void llm_constrain_compiler_free(LlmConstrainCompiler* compiler);

/* Compiles a constraint (constrain::Compiler::Compile; cached by the
 * compiler): `kind` one of LLM_CONSTRAIN_JSON_SCHEMA..CHOICE; text (text_len
 * bytes) the schema, regex or grammar (unused for JSON_OBJECT and CHOICE);
 * for CHOICE, choice i is choice_bytes[choice_offsets[i] ..
 * choice_offsets[i + 1]) for i < num_choices; flags LLM_CONSTRAIN_STRICT | ...;
 * max_whitespace as Spec::max_whitespace. INVALID_ARGUMENT naming what is
 * wrong or unsupported for a spec that does not compile. */
int llm_constrain_compile(LlmConstrainCompiler* compiler, int32_t kind, const char* text,
                          size_t text_len, const char* choice_bytes, const int64_t* choice_offsets,
                          int32_t num_choices, uint32_t flags, int32_t max_whitespace,
                          LlmConstrainConstraint** out, char** error);
void llm_constrain_constraint_free(LlmConstrainConstraint* constraint);
/* The number of mask bits (the compiler's vocab_size). */
int32_t llm_constrain_constraint_vocab_size(const LlmConstrainConstraint* constraint);
/* The time the first compile of this spec took, in milliseconds. */
double llm_constrain_constraint_compile_ms(const LlmConstrainConstraint* constraint);

/* A matcher at the start of the constraint (one per generation). */
int llm_constrain_matcher_create(const LlmConstrainConstraint* constraint,
                                 LlmConstrainMatcher** out, char** error);
void llm_constrain_matcher_free(LlmConstrainMatcher* matcher);

/* Writes the tokens allowed next (Matcher::FillMask): bit id % 32 of
 * words[id / 32]; num_words must be (vocab_size + 31) / 32. */
int llm_constrain_matcher_fill_mask(LlmConstrainMatcher* matcher, uint32_t* words,
                                    int32_t num_words, char** error);

/* The tokens allowed next in the cheapest of the wire's three encodings
 * (common/token_mask.h's CheapestTokenMaskEncoding, as the C++ client sends
 * them): *encoding is LLM_CONSTRAIN_MASK_BITSET, with *data the bitset's
 * bytes (bit i of byte i / 8) and *size their number (ceil(vocab_size / 8)),
 * or LLM_CONSTRAIN_MASK_ALLOWED / _DISALLOWED, with *data *size uint32 ids
 * in increasing order. *data points into the matcher, valid until its next
 * call. */
int llm_constrain_matcher_wire_mask(LlmConstrainMatcher* matcher, int32_t* encoding,
                                    const void** data, int64_t* size, char** error);

/* 1 when the grammar allows `id` next (and the matcher advanced), else 0
 * (nothing changed). */
int llm_constrain_matcher_accept(LlmConstrainMatcher* matcher, int32_t id);

/* Undoes the last n accepted tokens. INVALID_ARGUMENT for n < 0 or more than
 * were accepted. */
int llm_constrain_matcher_rollback(LlmConstrainMatcher* matcher, int32_t n, char** error);

/* The tokens the grammar forces from here (Matcher::ForcedTokens): returns
 * how many, and writes the first min(that, capacity) of them to ids. The
 * matcher does not change (accept each to use them). */
int32_t llm_constrain_matcher_forced_tokens(LlmConstrainMatcher* matcher, int32_t* ids,
                                            int32_t capacity);

/* 1 when an end id is allowed next (the grammar is complete), else 0. */
int llm_constrain_matcher_can_end(const LlmConstrainMatcher* matcher);
/* 1 once an end id was accepted, else 0. */
int llm_constrain_matcher_is_terminated(const LlmConstrainMatcher* matcher);
/* Tokens accepted since the start (less those rolled back). */
int32_t llm_constrain_matcher_accepted(const LlmConstrainMatcher* matcher);
/* Back to the start. */
void llm_constrain_matcher_reset(LlmConstrainMatcher* matcher);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif /* LLM_CLIENT_CONSTRAIN_C_API_H_ */
