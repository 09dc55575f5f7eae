#include "gateway/conversations.h"

#include <cstdint>
#include <cstdio>

#include "common/rendezvous.h"
#include "common/strings.h"

namespace llm::gateway {

absl::Status CheckConversationId(std::string_view id) {
  if (id.empty() || id.size() > kMaxConversationIdBytes) {
    return absl::InvalidArgumentError(
        StrCat("X-Session-Id must have 1 to ", kMaxConversationIdBytes, " bytes, got ", id.size()));
  }
  for (const char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError("X-Session-Id may hold only letters, digits and . _ : -");
    }
  }
  return absl::OkStatus();
}

RunningConversations::Claim::~Claim() {
  if (owner_ == nullptr) return;
  absl::MutexLock lock(&owner_->mu_);
  owner_->running_.erase(id_);
}

absl::StatusOr<RunningConversations::Claim> RunningConversations::Start(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (!running_.insert(id).second) {
    return absl::AbortedError("another request of this conversation (X-Session-Id) is running");
  }
  return Claim(this, id);
}

std::string ConversationSessionName(std::string_view id) {
  if (id.find(':') == std::string_view::npos) return StrCat("conv-", id);
  // Two fixed 64-bit hashes (rendezvous.h's, under two salts): 128 bits.
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx",
                static_cast<unsigned long long>(RendezvousScore(id, "conversation-name-1")),
                static_cast<unsigned long long>(RendezvousScore(id, "conversation-name-2")));
  return StrCat("convh-", hex);
}

}  // namespace llm::gateway
