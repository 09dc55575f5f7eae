#include "client/generate/chat_file.h"

#include <cstring>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {
namespace {

constexpr std::string_view kMagic("LLMCHAT\0", 8);

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutString32(std::string* out, std::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// Reads the fields of an untrusted file, each checked against what is left.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  size_t left() const { return in_.size(); }

  absl::StatusOr<uint64_t> Uint(int bytes, std::string_view what) {
    if (in_.size() < static_cast<size_t>(bytes)) return PastEnd(what);
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(in_[i])} << (8 * i);
    in_.remove_prefix(bytes);
    return v;
  }
  absl::StatusOr<std::string> Bytes(uint64_t n, std::string_view what) {
    if (n > in_.size()) return PastEnd(what);
    std::string out(in_.substr(0, n));
    in_.remove_prefix(n);
    return out;
  }
  absl::StatusOr<std::string> String32(std::string_view what) {
    absl::StatusOr<uint64_t> n = Uint(4, what);
    if (!n.ok()) return n.status();
    return Bytes(*n, what);
  }

 private:
  static absl::Status PastEnd(std::string_view what) {
    return absl::InvalidArgumentError(
        StrCat("chat file: ", what, " runs past the end of the file"));
  }
  std::string_view in_;
};

}  // namespace

std::string EncodeChatFile(const ChatFile& file) {
  std::string out(kMagic);
  PutU32(&out, kChatFileVersion);
  PutU32(&out, static_cast<uint32_t>(file.messages.size()));
  for (const ChatMessage& m : file.messages) {
    PutString32(&out, m.role);
    PutString32(&out, m.content);
  }
  PutString32(&out, file.text);
  PutU32(&out, static_cast<uint32_t>(file.tokens.size()));
  for (int32_t t : file.tokens) PutU32(&out, static_cast<uint32_t>(t));
  PutU64(&out, file.snapshot.size());
  out.append(file.snapshot);
  return out;
}

absl::StatusOr<ChatFile> DecodeChatFile(std::string_view bytes) {
  if (!bytes.starts_with(kMagic)) {
    return absl::InvalidArgumentError("not a chat file (llm chat --save writes them)");
  }
  Reader r(bytes.substr(kMagic.size()));
  LLM_ASSIGN_OR_RETURN(auto version, r.Uint(4, "the version"));
  if (version != kChatFileVersion) {
    return absl::InvalidArgumentError(
        StrCat("chat file of version ", version, "; this llm reads version ", kChatFileVersion));
  }
  ChatFile file;
  LLM_ASSIGN_OR_RETURN(auto messages, r.Uint(4, "the message count"));
  // Each message takes at least its two lengths.
  if (messages > r.left() / 8) {
    return absl::InvalidArgumentError(
        StrCat("chat file: ", messages, " messages do not fit in its ", bytes.size(), " bytes"));
  }
  for (uint64_t i = 0; i < messages; ++i) {
    LLM_ASSIGN_OR_RETURN(auto role, r.String32(StrCat("message ", i, "'s role")));
    LLM_ASSIGN_OR_RETURN(auto content, r.String32(StrCat("message ", i, "'s content")));
    file.messages.push_back({.role = std::move(role), .content = std::move(content)});
  }
  LLM_ASSIGN_OR_RETURN(auto text, r.String32("the template text"));
  file.text = std::move(text);
  LLM_ASSIGN_OR_RETURN(auto tokens, r.Uint(4, "the token count"));
  if (tokens > r.left() / 4) {
    return absl::InvalidArgumentError(
        StrCat("chat file: ", tokens, " tokens run past the end of the file"));
  }
  file.tokens.reserve(tokens);
  for (uint64_t i = 0; i < tokens; ++i) {
    LLM_ASSIGN_OR_RETURN(auto t, r.Uint(4, "a token"));
    const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(t));
    if (id < 0) return absl::InvalidArgumentError(StrCat("chat file: token ", i, " is negative"));
    file.tokens.push_back(id);
  }
  LLM_ASSIGN_OR_RETURN(auto snapshot_bytes, r.Uint(8, "the snapshot's length"));
  LLM_ASSIGN_OR_RETURN(auto snapshot, r.Bytes(snapshot_bytes, "the snapshot"));
  file.snapshot = std::move(snapshot);
  if (r.left() != 0) {
    return absl::InvalidArgumentError(StrCat("chat file: ", r.left(), " bytes after the snapshot"));
  }
  return file;
}

}  // namespace llm::client
