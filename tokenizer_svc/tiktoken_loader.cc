#include "tokenizer_svc/tiktoken_loader.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/mapped_file.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::tok {
namespace {

constexpr uint32_t kMaxId = 1u << 24;
constexpr size_t kMaxTokenBase64 = 4096 * 4 / 3 + 4;

absl::Status LineError(std::string_view source, size_t line, std::string_view what) {
  return absl::InvalidArgumentError(llm::StrCat(source, ":", line, ": ", what));
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/' || c == '=';
}

}  // namespace

absl::Status ParseTiktokenSidecar(std::string_view json, std::string_view source,
                                  TiktokenOptions* options) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(llm::StrCat(source, ": not a JSON object"));
  }
  if (!options->pattern.has_value()) {
    auto it = doc.find("pat_str");
    if (it != doc.end()) {
      if (!it->is_string()) {
        return absl::InvalidArgumentError(llm::StrCat(source, ": pat_str is not a string"));
      }
      options->pattern = it->get<std::string>();
    }
  }
  if (!options->name.has_value()) {
    auto it = doc.find("name");
    if (it != doc.end() && it->is_string()) options->name = it->get<std::string>();
  }
  auto it = doc.find("special_tokens");
  if (it != doc.end()) {
    if (!it->is_object()) {
      return absl::InvalidArgumentError(llm::StrCat(source, ": special_tokens is not an object"));
    }
    for (const auto& [text, id] : it->items()) {
      if (!id.is_number_unsigned() || id.get<uint64_t>() >= kMaxId) {
        return absl::InvalidArgumentError(
            llm::StrCat(source, ": special token '", text, "' has an invalid id"));
      }
      options->special_tokens.emplace_back(text, id.get<uint32_t>());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Vocab> ParseTiktoken(std::string_view contents, std::string_view source,
                                    const TiktokenOptions& options) {
  if (!options.pattern.has_value()) {
    return absl::InvalidArgumentError(
        llm::StrCat(source,
                    ": no pre-tokenizer pattern: put a JSON sidecar with \"pat_str\" beside the "
                    "file or pass --pattern"));
  }
  std::vector<std::pair<uint32_t, std::string>> entries;
  absl::flat_hash_map<std::string, uint32_t> rank_of_bytes;
  absl::flat_hash_map<uint32_t, size_t> line_of_rank;
  uint32_t max_rank = 0;
  size_t line_no = 0;
  while (!contents.empty()) {
    ++line_no;
    const size_t eol = contents.find('\n');
    std::string_view line = contents.substr(0, eol);
    contents.remove_prefix(eol == std::string_view::npos ? contents.size() : eol + 1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      return LineError(source, line_no, "expected '<base64> <rank>'");
    }
    const std::string_view b64 = line.substr(0, space);
    const std::string_view rank_text = line.substr(space + 1);
    if (b64.empty() || b64.size() > kMaxTokenBase64) {
      return LineError(source, line_no,
                       llm::StrCat("token of ", b64.size(), " base64 characters is out of range"));
    }
    for (char c : b64) {
      if (!IsBase64Char(c)) return LineError(source, line_no, "bad base64");
    }
    std::string bytes;
    if (!absl::Base64Unescape(ToAbsl(b64), &bytes) || bytes.empty()) {
      return LineError(source, line_no, "bad base64");
    }
    uint32_t rank = 0;
    if (!absl::SimpleAtoi(ToAbsl(rank_text), &rank) || rank_text.empty() || rank_text[0] == '+' ||
        rank_text[0] == '-') {
      return LineError(source, line_no, llm::StrCat("rank '", rank_text, "' is not a number"));
    }
    if (rank >= kMaxId) {
      return LineError(source, line_no, llm::StrCat("rank ", rank, " is absurdly large"));
    }
    if (auto [it, fresh] = line_of_rank.emplace(rank, line_no); !fresh) {
      return LineError(source, line_no,
                       llm::StrCat("duplicate rank ", rank, " (first on line ", it->second, ")"));
    }
    if (auto [it, fresh] = rank_of_bytes.emplace(bytes, rank); !fresh) {
      return LineError(source, line_no,
                       llm::StrCat("duplicate token bytes (also rank ", it->second, ")"));
    }
    max_rank = std::max(max_rank, rank);
    entries.emplace_back(rank, std::move(bytes));
  }
  if (entries.empty()) return absl::InvalidArgumentError(llm::StrCat(source, ": no tokens"));

  uint32_t size = max_rank + 1;
  absl::flat_hash_map<uint32_t, std::string> specials;
  for (const auto& [text, id] : options.special_tokens) {
    if (text.empty()) {
      return absl::InvalidArgumentError(llm::StrCat(source, ": empty special token"));
    }
    if (line_of_rank.contains(id)) {
      return absl::InvalidArgumentError(llm::StrCat(source, ": special token '", text, "' id ", id,
                                                    " is also the rank on line ",
                                                    line_of_rank[id]));
    }
    specials[id] = text;
    size = std::max(size, id + 1);
  }
  // Only now, with every rank proven present, allocate per id.
  for (uint32_t r = 0; r <= max_rank; ++r) {
    if (!line_of_rank.contains(r) && !specials.contains(r)) {
      return absl::InvalidArgumentError(llm::StrCat(
          source, ": rank ", r, " is missing (ranks must run from 0 to ", max_rank, ")"));
    }
  }
  Vocab v;
  v.source = std::string(source);
  v.format = "tiktoken";
  v.token_bytes.resize(size);
  v.token_types.assign(size, TokenType::kHole);
  for (auto& [rank, bytes] : entries) {
    v.token_bytes[rank] = std::move(bytes);
    v.token_types[rank] = TokenType::kNormal;
  }
  for (auto& [id, text] : specials) {
    v.token_bytes[id] = text;
    v.token_types[id] = TokenType::kControl;
    if (text == "<|endoftext|>") v.eos_id = id;
  }
  v.merge_rule = MergeRule::kConcatenationRank;
  v.whole_piece_shortcut = true;
  v.pretokenizer = options.name.value_or("custom");
  v.pre_regexes = {*options.pattern};
  return v;
}

absl::StatusOr<Vocab> LoadTiktokenVocab(const std::string& path, const TiktokenOptions& options) {
  TiktokenOptions merged = options;
  std::string stem = path;
  if (stem.ends_with(".tiktoken")) stem.resize(stem.size() - 9);
  const std::string sidecar = stem + ".json";
  if (std::filesystem::exists(sidecar)) {
    LLM_ASSIGN_OR_RETURN(std::string json, ReadFileToString(sidecar));
    LLM_RETURN_IF_ERROR(ParseTiktokenSidecar(json, sidecar, &merged));
  }
  if (!merged.name.has_value()) merged.name = std::filesystem::path(stem).filename().string();
  LLM_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  const auto bytes = file.bytes();
  return ParseTiktoken(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                       path, merged);
}

}  // namespace llm::tok
