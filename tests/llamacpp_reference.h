// Test support for the real models against llama.cpp's recorded outputs
// (tests/data/llamacpp_reference*.json, written by
// tests/data/llamacpp_reference.py): reading a reference, and the
// perplexity of a text from an engine's logits of every position.
#ifndef LLM_TESTS_LLAMACPP_REFERENCE_H_
#define LLM_TESTS_LLAMACPP_REFERENCE_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "common/test_paths.h"
#include "gtest/gtest.h"
#include "model_svc/core/logits.h"
#include "nlohmann/json.hpp"

namespace llm::testing {

// tests/data/`name` parsed (a failed read is a test failure and gives null).
inline nlohmann::json LlamaCppReference(const std::string& name) {
  auto text = ReadFileToString(SourceDir() + "/tests/data/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// exp(mean negative log-likelihood of tokens[1:]), logits[j] being the
// prediction after tokens[j] (full float32 logits with their log-sum-exp).
inline double Perplexity(const std::vector<model::Logits>& logits,
                         const std::vector<int32_t>& tokens) {
  double nll = 0;
  for (size_t j = 0; j + 1 < tokens.size(); ++j) {
    nll += logits[j].log_sum_exp - logits[j].values[tokens[j + 1]];
  }
  return std::exp(nll / static_cast<double>(tokens.size() - 1));
}

}  // namespace llm::testing

#endif  // LLM_TESTS_LLAMACPP_REFERENCE_H_
