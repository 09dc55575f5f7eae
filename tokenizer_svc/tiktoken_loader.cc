#include "tokenizer_svc/tiktoken_loader.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/mapped_file.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "tokenizer_svc/hash_bytes.h"

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
  // Pass 1: each line's syntax, up to the first bad line. Entry i is the i-th
  // token line; its bytes, rank and line number.
  std::vector<std::string> bytes_of;
  std::vector<uint32_t> rank_of;
  std::vector<uint32_t> line_of;
  {
    // The file holds at most this many lines.
    const size_t lines =
        static_cast<size_t>(std::count(contents.begin(), contents.end(), '\n')) + 1;
    bytes_of.reserve(lines);
    rank_of.reserve(lines);
    line_of.reserve(lines);
  }
  absl::Status syntax = absl::OkStatus();  // the first bad line's error
  bool sequential = true;                  // rank_of[i] == i for every i so far
  uint32_t max_rank = 0;
  size_t line_no = 0;
  while (!contents.empty()) {
    ++line_no;
    const size_t eol = contents.find('\n');
    std::string_view line = contents.substr(0, eol);
    contents.remove_prefix(eol == std::string_view::npos ? contents.size() : eol + 1);
    if (line.empty()) continue;
    const auto fail = [&](std::string_view what) { syntax = LineError(source, line_no, what); };
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      fail("expected '<base64> <rank>'");
      break;
    }
    const std::string_view b64 = line.substr(0, space);
    const std::string_view rank_text = line.substr(space + 1);
    if (b64.empty() || b64.size() > kMaxTokenBase64) {
      fail(llm::StrCat("token of ", b64.size(), " base64 characters is out of range"));
      break;
    }
    if (!std::all_of(b64.begin(), b64.end(), IsBase64Char)) {
      fail("bad base64");
      break;
    }
    std::string bytes;
    if (!absl::Base64Unescape(ToAbsl(b64), &bytes) || bytes.empty()) {
      fail("bad base64");
      break;
    }
    uint32_t rank = 0;
    if (!absl::SimpleAtoi(ToAbsl(rank_text), &rank) || rank_text.empty() || rank_text[0] == '+' ||
        rank_text[0] == '-') {
      fail(llm::StrCat("rank '", rank_text, "' is not a number"));
      break;
    }
    if (rank >= kMaxId) {
      fail(llm::StrCat("rank ", rank, " is absurdly large"));
      break;
    }
    sequential = sequential && rank == rank_of.size();
    max_rank = std::max(max_rank, rank);
    bytes_of.push_back(std::move(bytes));
    rank_of.push_back(rank);
    line_of.push_back(static_cast<uint32_t>(line_no));
  }
  const size_t n = bytes_of.size();

  // Pass 2: duplicates among the lines before the first bad one. The error is
  // the one on the earliest line, as if each line were checked in turn.
  // Entries in rank order (only needed when the ranks are not 0, 1, 2, ...).
  std::vector<uint32_t> by_rank;
  size_t first_error = n;  // entry index
  absl::Status error;
  if (!sequential) {
    by_rank.resize(n);
    for (uint32_t i = 0; i < n; ++i) by_rank[i] = i;
    std::sort(by_rank.begin(), by_rank.end(), [&](uint32_t a, uint32_t b) {
      return rank_of[a] != rank_of[b] ? rank_of[a] < rank_of[b] : a < b;
    });
    for (size_t k = 1; k < n; ++k) {
      const uint32_t first = by_rank[k - 1];
      const uint32_t again = by_rank[k];
      if (rank_of[first] != rank_of[again] || again >= first_error) continue;
      // `first` is the earliest entry of this rank when k - 1 starts the run.
      uint32_t earliest = first;
      for (size_t j = k - 1; j > 0 && rank_of[by_rank[j - 1]] == rank_of[again]; --j) {
        earliest = by_rank[j - 1];
      }
      first_error = again;
      error = LineError(source, line_of[again],
                        llm::StrCat("duplicate rank ", rank_of[again], " (first on line ",
                                    line_of[earliest], ")"));
    }
  }
  {
    // Token bytes: an open-addressing set of entry indices, filled in line
    // order, so the first repeat found is the earliest.
    size_t capacity = 16;
    while (capacity < 2 * n) capacity *= 2;
    std::vector<uint32_t> slots(capacity, UINT32_MAX);
    const size_t mask = capacity - 1;
    for (uint32_t i = 0; i < n && i < first_error; ++i) {
      size_t at = HashBytes(bytes_of[i]) & mask;
      for (; slots[at] != UINT32_MAX; at = (at + 1) & mask) {
        if (bytes_of[slots[at]] == bytes_of[i]) break;
      }
      if (slots[at] == UINT32_MAX) {
        slots[at] = i;
        continue;
      }
      first_error = i;  // before any duplicate rank (i < first_error)
      error = LineError(source, line_of[i],
                        llm::StrCat("duplicate token bytes (also rank ", rank_of[slots[at]], ")"));
      break;
    }
  }
  if (first_error < n) return error;  // before the bad line, if any
  if (!syntax.ok()) return syntax;
  if (n == 0) return absl::InvalidArgumentError(llm::StrCat(source, ": no tokens"));

  // The entry of `rank`, or -1.
  const auto entry_of_rank = [&](uint32_t rank) -> int64_t {
    if (sequential) return rank < n ? static_cast<int64_t>(rank) : -1;
    auto it = std::lower_bound(by_rank.begin(), by_rank.end(), rank,
                               [&](uint32_t e, uint32_t r) { return rank_of[e] < r; });
    return it != by_rank.end() && rank_of[*it] == rank ? static_cast<int64_t>(*it) : -1;
  };
  uint32_t size = max_rank + 1;
  absl::flat_hash_map<uint32_t, std::string> specials;
  for (const auto& [text, id] : options.special_tokens) {
    if (text.empty()) {
      return absl::InvalidArgumentError(llm::StrCat(source, ": empty special token"));
    }
    if (const int64_t e = entry_of_rank(id); e >= 0) {
      return absl::InvalidArgumentError(llm::StrCat(source, ": special token '", text, "' id ", id,
                                                    " is also the rank on line ", line_of[e]));
    }
    specials[id] = text;
    size = std::max(size, id + 1);
  }
  // Only now, with every rank proven present, allocate per id.
  if (!sequential) {
    uint32_t expect = 0;  // the next rank not yet seen
    for (const uint32_t e : by_rank) {
      for (; expect < rank_of[e]; ++expect) {
        if (!specials.contains(expect)) {
          return absl::InvalidArgumentError(llm::StrCat(
              source, ": rank ", expect, " is missing (ranks must run from 0 to ", max_rank, ")"));
        }
      }
      expect = rank_of[e] + 1;
    }
  }
  Vocab v;
  v.source = std::string(source);
  v.format = "tiktoken";
  if (sequential) {
    v.token_bytes = std::move(bytes_of);
    v.token_bytes.resize(size);
    v.token_types.assign(size, TokenType::kHole);
    std::fill(v.token_types.begin(), v.token_types.begin() + static_cast<ptrdiff_t>(n),
              TokenType::kNormal);
  } else {
    v.token_bytes.resize(size);
    v.token_types.assign(size, TokenType::kHole);
    for (size_t i = 0; i < n; ++i) {
      v.token_bytes[rank_of[i]] = std::move(bytes_of[i]);
      v.token_types[rank_of[i]] = TokenType::kNormal;
    }
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
