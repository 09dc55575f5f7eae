#include "client/generate/stop_strings.h"

#include <algorithm>
#include <utility>

namespace llm::client {

absl::Status ValidateStopStrings(const std::vector<std::string>& stop) {
  for (const std::string& s : stop) {
    if (s.empty()) return absl::InvalidArgumentError("a stop string must not be empty");
  }
  return absl::OkStatus();
}

std::string ProcessEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    switch (text[i + 1]) {
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case '\\':
      case '"':
      case '\'':
        out.push_back(text[i + 1]);
        break;
      default:  // not an escape: both characters as they are
        out.push_back('\\');
        out.push_back(text[i + 1]);
        break;
    }
    ++i;
  }
  return out;
}

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop) {
  for (std::string& s : stop) {
    if (!s.empty()) stop_.push_back(std::move(s));
  }
}

StopStringMatcher::Step StopStringMatcher::Feed(std::string_view delta) {
  Step step;
  if (stopped_) return step;
  held_.append(delta);
  // The earliest stop string occurrence in the unreleased text.
  size_t first = std::string::npos;
  for (const std::string& s : stop_) {
    const size_t at = held_.find(s);
    if (at < first) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    step.released = held_.substr(0, first);
    step.stopped = stopped_ = true;
    held_.clear();
    return step;
  }
  // Keep the longest suffix that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const std::string& s : stop_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (std::string_view(held_).substr(held_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  step.released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return step;
}

std::string StopStringMatcher::Finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace llm::client
