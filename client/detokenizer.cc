#include "client/detokenizer.h"

#include "client/utf8_text.h"
#include "common/strings.h"

namespace llm::client {

absl::StatusOr<const std::string*> TokenBytesCache::Get(int32_t id) {
  if (id < 0) return absl::InvalidArgumentError(StrCat("token id ", id, " is negative"));
  const size_t i = static_cast<size_t>(id);
  if (i < known_.size() && known_[i]) return &bytes_[i];
  absl::StatusOr<std::string> fetched = fetch_(id);
  ++fetches_;
  if (!fetched.ok()) return fetched.status();
  if (i >= known_.size()) {
    known_.resize(i + 1, false);
    bytes_.resize(i + 1);
  }
  bytes_[i] = *std::move(fetched);
  known_[i] = true;
  return &bytes_[i];
}

absl::StatusOr<std::string> Detokenizer::Add(int32_t id) {
  absl::StatusOr<const std::string*> bytes = cache_.Get(id);
  if (!bytes.ok()) return bytes.status();
  held_ += **bytes;
  const size_t complete = CompleteUtf8Prefix(held_);
  std::string out = SanitizeUtf8(std::string_view(held_).substr(0, complete));
  held_.erase(0, complete);
  return out;
}

std::string Detokenizer::Flush() {
  std::string out = SanitizeUtf8(held_);
  held_.clear();
  return out;
}

}  // namespace llm::client
