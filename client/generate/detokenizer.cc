#include "client/generate/detokenizer.h"

#include <limits>

#include "client/generate/utf8_text.h"
#include "common/strings.h"

namespace llm::client {

absl::StatusOr<std::string> TokenBytesCache::Get(int32_t id) {
  if (id < 0) return absl::InvalidArgumentError(StrCat("token id ", id, " is negative"));
  const size_t i = static_cast<size_t>(id);
  {
    absl::ReaderMutexLock lock(&mu_);
    if (i < known_.size() && known_[i]) return bytes_[i];
  }
  absl::StatusOr<std::string> fetched = fetch_(id);
  fetches_.fetch_add(1, std::memory_order_relaxed);
  if (!fetched.ok()) return fetched.status();
  absl::MutexLock lock(&mu_);
  Grow(i);
  bytes_[i] = *fetched;
  known_[i] = true;
  return fetched;
}

absl::Status TokenBytesCache::Preload(int32_t first_id, std::span<std::string> bytes) {
  if (first_id < 0) {
    return absl::InvalidArgumentError(StrCat("token id ", first_id, " is negative"));
  }
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max() - first_id) + 1) {
    return absl::InvalidArgumentError(
        StrCat(bytes.size(), " tokens from id ", first_id, " pass the largest id"));
  }
  if (bytes.empty()) return absl::OkStatus();
  const size_t first = static_cast<size_t>(first_id);
  absl::MutexLock lock(&mu_);
  Grow(first + bytes.size() - 1);
  for (size_t k = 0; k < bytes.size(); ++k) {
    bytes_[first + k] = std::move(bytes[k]);
    known_[first + k] = true;
  }
  preloaded_.fetch_add(static_cast<int64_t>(bytes.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

void TokenBytesCache::Grow(size_t id) {
  if (id < known_.size()) return;
  known_.resize(id + 1, false);
  bytes_.resize(id + 1);
}

absl::StatusOr<std::string> Detokenizer::Add(int32_t id) {
  absl::StatusOr<std::string> bytes = cache_.Get(id);
  if (!bytes.ok()) return bytes.status();
  held_ += *bytes;
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
