// libFuzzer target for session snapshots (snapshot/snapshot.h): arbitrary
// bytes through Decode for a small layout; whatever decodes must encode
// again and decode to the same tokens and KV bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "model_svc/snapshot/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llm::snapshot::SnapshotLayout layout;
  layout.fingerprint = 0x5eed;
  layout.block_size = 4;
  layout.layers = 2;
  layout.kv_dim = 8;
  const llm::snapshot::DecodeLimits limits{64, 1000};
  auto s = llm::snapshot::Decode(std::string_view(reinterpret_cast<const char*>(data), size),
                                 layout, limits);
  if (!s.ok()) return 0;
  auto again = llm::snapshot::Encode(*s);
  if (!again.ok()) std::abort();
  auto back = llm::snapshot::Decode(*again, layout, limits);
  if (!back.ok() || back->tokens != s->tokens || back->kv != s->kv) std::abort();
  return 0;
}
