// `llm chat --save FILE` / `--resume FILE`: a conversation kept in one file
// across restarts of everything (the client, the model servers).
//
// The file holds the chat's messages (role and content), the text the
// written-out templates continue (ChatTurns::text()), the model session's
// tokens as the client keeps them (Session::tokens) and the model session's
// snapshot (ExportSession's bytes, model_svc/snapshot/snapshot.h; empty
// when the server could not export it). A resumed chat imports the snapshot
// into a new session (no prefill); when that fails (another model, a server
// without snapshots) it prefills the tokens again.
//
// Format (little-endian): the magic "LLMCHAT\0", a u32 version (1), a u32
// message count, per message a u32 length and the role, a u32 length and the
// content; a u32 length and the text; a u32 token count and the i32 tokens;
// a u64 length and the snapshot; nothing after it.
//
// DecodeChatFile treats its input as untrusted: every count and length is
// checked against the bytes left before use; INVALID_ARGUMENT naming the
// field for anything else than a file EncodeChatFile writes (bad magic, an
// unknown version, a field past the end, trailing bytes, a negative token).
#ifndef LLM_CLIENT_GENERATE_CHAT_FILE_H_
#define LLM_CLIENT_GENERATE_CHAT_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/generate/chat_template.h"

namespace llm::client {

inline constexpr uint32_t kChatFileVersion = 1;

struct ChatFile {
  std::vector<ChatMessage> messages;  // role and content only
  std::string text;
  std::vector<int32_t> tokens;
  std::string snapshot;
};

std::string EncodeChatFile(const ChatFile& file);
absl::StatusOr<ChatFile> DecodeChatFile(std::string_view bytes);

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_CHAT_FILE_H_
