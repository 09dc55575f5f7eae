#include "gateway/logprobs_json.h"

#include <cstdio>

#include "client/generate/utf8_text.h"

namespace llm::gateway {
namespace {

using nlohmann::json;

json Bytes(const std::string& text) {
  json out = json::array();
  for (const char c : text) out.push_back(static_cast<uint8_t>(c));
  return out;
}

}  // namespace

std::string TokenString(std::string_view bytes) {
  if (client::IsValidUtf8(bytes)) return std::string(bytes);
  // As Python's repr of bytes writes the inside of b'...'.
  std::string out = "bytes:";
  for (const char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (b >= 0x20 && b < 0x7f) {
      out += c;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", b);
      out += hex;
    }
  }
  return out;
}

nlohmann::json ChatLogprobEntry(const TokenScore& score) {
  json top = json::array();
  for (const auto& [text, logprob] : score.top) {
    top.push_back({{"token", TokenString(text)}, {"logprob", logprob}, {"bytes", Bytes(text)}});
  }
  return json{{"token", TokenString(score.text)},
              {"logprob", score.logprob.has_value() ? json(*score.logprob) : json()},
              {"bytes", Bytes(score.text)},
              {"top_logprobs", std::move(top)}};
}

nlohmann::json ChatLogprobs(nlohmann::json entries) {
  return json{{"content", std::move(entries)}, {"refusal", nullptr}};
}

void CompletionLogprobs::Add(const TokenScore& score, std::optional<int64_t> text_bytes) {
  const std::string token = TokenString(score.text);
  token_logprobs_.push_back(score.logprob.has_value() ? json(*score.logprob) : json());
  if (!score.logprob.has_value()) {
    top_logprobs_.push_back(nullptr);
  } else {
    json top = json::object();
    // A text two tokens share keeps the more likely one's logprob.
    for (const auto& [text, logprob] : score.top) {
      const std::string key = TokenString(text);
      if (!top.contains(key)) top[key] = logprob;
    }
    if (!top.contains(token)) top[token] = *score.logprob;  // the token itself, when not there
    top_logprobs_.push_back(std::move(top));
  }
  tokens_.push_back(token);
  text_offset_.push_back(offset_);
  offset_ += text_bytes.value_or(static_cast<int64_t>(score.text.size()));
}

nlohmann::json CompletionLogprobs::ToJson() const {
  return json{{"tokens", tokens_},
              {"token_logprobs", token_logprobs_},
              {"top_logprobs", top_logprobs_},
              {"text_offset", text_offset_}};
}

nlohmann::json CompletionLogprobs::Take() {
  json out{{"tokens", std::move(tokens_)},
           {"token_logprobs", std::move(token_logprobs_)},
           {"top_logprobs", std::move(top_logprobs_)},
           {"text_offset", std::move(text_offset_)}};
  tokens_ = json::array();
  token_logprobs_ = json::array();
  top_logprobs_ = json::array();
  text_offset_ = json::array();
  return out;
}

}  // namespace llm::gateway
