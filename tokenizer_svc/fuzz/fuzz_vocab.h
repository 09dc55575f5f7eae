// Shared by the tokenizer fuzzers: real vocabularies from ../shared, found
// through LLM_SHARED_DIR or LLM_SOURCE_DIR (set by the ctest entry).
#ifndef LLM_TOKENIZER_SVC_FUZZ_FUZZ_VOCAB_H_
#define LLM_TOKENIZER_SVC_FUZZ_FUZZ_VOCAB_H_

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tokenizer_svc/tokenizer.h"

namespace llm::tok::fuzz {

inline std::string SharedDir() {
  if (const char* s = std::getenv("LLM_SHARED_DIR")) return s;
  if (const char* s = std::getenv("LLM_SOURCE_DIR")) return std::string(s) + "/../shared";
  return "../shared";
}

// Loads a vocabulary once; aborts the fuzzer (not a finding) if it is missing.
inline const Tokenizer& LoadOnce(const std::string& relative) {
  auto tok = Tokenizer::Load({.path = SharedDir() + "/" + relative});
  if (!tok.ok()) {
    std::fprintf(stderr, "fuzzer setup: %s\n", std::string(tok.status().message()).c_str());
    std::exit(2);
  }
  return *tok->release();
}

}  // namespace llm::tok::fuzz

#endif  // LLM_TOKENIZER_SVC_FUZZ_FUZZ_VOCAB_H_
