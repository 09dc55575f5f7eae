// TokenizerClient::PrefetchTokenBytes: the whole vocabulary's token bytes in
// a few Decode calls with pieces.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "client/transport/tokenizer_client.h"

namespace llm::client {
namespace {

// Bytes of a DecodeRequest besides its packed ids (tags, lengths, pieces).
constexpr uint64_t kDecodeRequestOverhead = 16;
// Failed prefetch calls split in two before the rest is left to the per-id
// fetch (a .tiktoken vocabulary's gaps take a few dozen).
constexpr int kMaxPrefetchSplits = 256;

}  // namespace

void TokenizerClient::PrefetchTokenBytes() {
  const uint32_t n = info_.vocab_size();
  if (n == 0 || n > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) return;
  // Ids per call within the server's request limit (gRPC's default 4 MiB
  // when Info does not say): each packed id takes as many bytes as the
  // largest one, plus a few bytes of tags and lengths.
  const uint64_t max_request =
      info_.max_request_bytes() > 0 ? info_.max_request_bytes() : uint64_t{4} << 20;
  uint64_t bytes_per_id = 1;
  for (uint64_t v = n - 1; v >= 0x80; v >>= 7) ++bytes_per_id;
  const uint32_t per_call = static_cast<uint32_t>(std::clamp<uint64_t>(
      (max_request - std::min<uint64_t>(max_request, kDecodeRequestOverhead)) / bytes_per_id, 1,
      n));
  // Ranges [begin, end) still to fetch, the lowest last (taken first).
  std::vector<std::pair<uint32_t, uint32_t>> todo;
  for (uint32_t end = n; end > 0;) {
    const uint32_t begin = end - std::min(end, per_call);
    todo.emplace_back(begin, end);
    end = begin;
  }
  int splits = 0;
  while (!todo.empty()) {
    const auto [begin, end] = todo.back();
    todo.pop_back();
    v1::DecodeRequest request;
    request.mutable_ids()->Reserve(static_cast<int>(end - begin));
    for (uint32_t id = begin; id < end; ++id) request.add_ids(id);
    request.set_pieces(true);
    v1::DecodeResponse response;
    auto context = NewContext();
    const grpc::Status s = stub_->Decode(context.get(), request, &response);
    if (s.ok()) {
      // Fewer pieces than ids: a server that predates pieces (it answered text).
      if (response.pieces_size() != static_cast<int>(end - begin)) return;
      std::vector<std::string> pieces;
      pieces.reserve(end - begin);
      for (std::string& piece : *response.mutable_pieces()) pieces.push_back(std::move(piece));
      if (!token_bytes_.Preload(static_cast<int32_t>(begin), pieces).ok()) return;
      continue;
    }
    // An id that names no token (the gaps of a .tiktoken vocabulary), or an
    // answer over a size limit: halve the range, down to single ids. A bad
    // single id is left out (its per-id fetch fails as it always did), and so
    // is a failing range once kMaxPrefetchSplits halvings are spent.
    if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
        s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      return;
    }
    if (end - begin == 1 || splits >= kMaxPrefetchSplits) continue;
    ++splits;
    const uint32_t mid = begin + (end - begin) / 2;
    todo.emplace_back(mid, end);
    todo.emplace_back(begin, mid);
  }
}

}  // namespace llm::client
