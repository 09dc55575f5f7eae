// Test support for the structures built from a vocabulary (pair table, token
// index): a trie over token strings, and a real vocabulary's normal tokens.
#ifndef LLM_TOKENIZER_SVC_TESTING_TOKEN_TABLES_H_
#define LLM_TOKENIZER_SVC_TESTING_TOKEN_TABLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/test_paths.h"
#include "tokenizer_svc/tiktoken_loader.h"
#include "tokenizer_svc/trie.h"

namespace llm::tok::testing {

// A frozen trie mapping tokens[id] to id; empty strings are holes.
inline Trie MakeTrie(const std::vector<std::string>& tokens) {
  Trie t;
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    if (!tokens[id].empty()) t.Insert(tokens[id], id);
  }
  t.Freeze();
  return t;
}

// 0, 1, ..., tokens.size() - 1: every id takes part in TokenIndex::Build.
inline std::vector<uint32_t> AllIds(const std::vector<std::string>& tokens) {
  std::vector<uint32_t> ids(tokens.size());
  for (uint32_t id = 0; id < ids.size(); ++id) ids[id] = id;
  return ids;
}

// The token bytes of the .tiktoken file at `path` by id, with "" for
// special tokens.
inline absl::StatusOr<std::vector<std::string>> NormalTokens(const std::string& path) {
  auto vocab = LoadTiktokenVocab(path, {});
  if (!vocab.ok()) return vocab.status();
  std::vector<std::string> tokens;
  for (size_t id = 0; id < vocab->size(); ++id) {
    tokens.push_back(vocab->token_types[id] == TokenType::kNormal ? vocab->token_bytes[id] : "");
  }
  return tokens;
}

}  // namespace llm::tok::testing

#endif  // LLM_TOKENIZER_SVC_TESTING_TOKEN_TABLES_H_
