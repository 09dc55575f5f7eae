// Test support: reads ../shared/tokenizer/vectors/*.jsonl, lines of
// {"text": "...", "ids": [...]} with tiktoken's reference ids.
#ifndef LLM_TOKENIZER_SVC_TESTING_VECTORS_H_
#define LLM_TOKENIZER_SVC_TESTING_VECTORS_H_

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace llm::testing {

struct Vector {
  std::string text;
  std::vector<uint32_t> ids;
};

inline std::vector<Vector> ReadVectors(const std::string& path) {
  std::vector<Vector> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<uint32_t>>()});
  }
  return out;
}

}  // namespace llm::testing

#endif  // LLM_TOKENIZER_SVC_TESTING_VECTORS_H_
