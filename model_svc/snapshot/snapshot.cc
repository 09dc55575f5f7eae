#include "model_svc/snapshot/snapshot.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace llm::snapshot {
namespace {

using absl::StrCat;

constexpr char kMagic[8] = {'L', 'L', 'M', 'K', 'V', 'S', 'N', 'P'};
constexpr uint32_t kFlagZstd = 1;
constexpr int64_t kChecksumOffset = 72;
// Token counts past this are refused before any arithmetic on them.
constexpr uint64_t kMaxTokenCount = uint64_t{1} << 31;

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Store(std::string& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof(T));
}

uint64_t Mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

// Bytes of the raw payload for n tokens of `layout`; n and the layout are
// bounded by the caller (n < 2^31, the layout the replica's).
int64_t RawBytes(const SnapshotLayout& layout, int64_t n) {
  const int64_t blocks = (n + layout.block_size - 1) / layout.block_size;
  return n * 4 + blocks * layout.block_bytes();
}

absl::Status Mismatch(const char* what, uint64_t got, uint64_t want) {
  return absl::FailedPreconditionError(StrCat("the snapshot is of another ", what, " (", got,
                                              "; this model server's is ", want, ")"));
}

}  // namespace

std::string KvTypeName(uint32_t code) {
  auto name = [](uint32_t t) -> std::string {
    return t == kKvF16    ? "f16"
           : t == kKvF32  ? "f32"
           : t == kKvQ8_0 ? "q8_0"
                          : StrCat("unknown (", t, ")");
  };
  if (KeyType(code) == ValueType(code)) return name(code);
  return StrCat("k ", name(KeyType(code)), ", v ", name(ValueType(code)));
}

int64_t MaxEncodedBytes(const SnapshotLayout& layout, int64_t tokens) {
  SnapshotLayout bounded = layout;
  bounded.block_size = std::max<uint32_t>(layout.block_size, 1);
  return kHeaderBytes + RawBytes(bounded, tokens);
}

uint64_t Checksum64(std::string_view bytes, uint64_t seed) {
  uint64_t h = Mix(seed ^ 0x9e3779b97f4a7c15ULL ^ bytes.size());
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    h = (h ^ Load<uint64_t>(bytes.data() + i)) * 0x9e3779b97f4a7c15ULL;
    h = (h << 31) | (h >> 33);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  return Mix(h ^ tail);
}

absl::StatusOr<std::string> Encode(const Snapshot& s, bool compress) {
  const SnapshotLayout& l = s.layout;
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  if (l.block_size == 0 || static_cast<uint64_t>(n) >= kMaxTokenCount) {
    return absl::InvalidArgumentError("snapshot: a zero block size or too many tokens");
  }
  const int64_t blocks = (n + l.block_size - 1) / l.block_size;
  if (static_cast<int64_t>(s.kv.size()) != blocks * l.block_bytes()) {
    return absl::InvalidArgumentError(StrCat("snapshot: ", s.kv.size(), " KV bytes for ", n,
                                             " tokens; they need ", blocks * l.block_bytes()));
  }
  std::string raw(static_cast<size_t>(RawBytes(l, n)), '\0');
  if (n > 0) std::memcpy(raw.data(), s.tokens.data(), static_cast<size_t>(n) * 4);
  if (!s.kv.empty()) std::memcpy(raw.data() + n * 4, s.kv.data(), s.kv.size());

  std::string out(kHeaderBytes, '\0');
  uint32_t flags = 0;
  if (compress && !raw.empty()) {
    std::string z(ZSTD_compressBound(raw.size()), '\0');
    const size_t got = ZSTD_compress(z.data(), z.size(), raw.data(), raw.size(), 1);
    if (!ZSTD_isError(got) && got <= raw.size() - raw.size() / 16) {
      z.resize(got);
      raw = std::move(z);
      flags |= kFlagZstd;
    }
  }
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  Store<uint32_t>(out, 8, kVersion);
  Store<uint32_t>(out, 12, flags);
  Store<uint64_t>(out, 16, l.fingerprint);
  Store<uint32_t>(out, 24, l.kv_type);
  Store<uint32_t>(out, 28, l.kv_layout);
  Store<uint32_t>(out, 32, l.block_size);
  Store<uint32_t>(out, 36, l.layers);
  Store<uint64_t>(out, 40, l.kv_dim);
  Store<uint64_t>(out, 48, static_cast<uint64_t>(n));
  Store<uint64_t>(out, 56, static_cast<uint64_t>(RawBytes(l, n)));
  Store<uint64_t>(out, 64, raw.size());
  const uint64_t sum = Checksum64(raw, Checksum64(std::string_view(out).substr(0, 72), 0));
  Store<uint64_t>(out, kChecksumOffset, sum);
  out += raw;
  return out;
}

absl::StatusOr<Snapshot> Decode(std::string_view bytes, const SnapshotLayout& expect,
                                const DecodeLimits& limits) {
  if (static_cast<int64_t>(bytes.size()) < kHeaderBytes) {
    return absl::DataLossError(StrCat("the snapshot is truncated: ", bytes.size(),
                                      " bytes, less than its ", kHeaderBytes, "-byte header"));
  }
  const char* h = bytes.data();
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "not a session snapshot (its first 8 bytes are not LLMKVSNP)");
  }
  if (const uint32_t v = Load<uint32_t>(h + 8); v != kVersion) {
    return absl::FailedPreconditionError(
        StrCat("snapshot version ", v, " is not supported (this model server reads version ",
               kVersion, ")"));
  }
  const uint32_t flags = Load<uint32_t>(h + 12);
  if ((flags & ~kFlagZstd) != 0) {
    return absl::InvalidArgumentError(
        StrCat("the snapshot has unknown flags 0x", absl::Hex(flags)));
  }
  const uint64_t stored = Load<uint64_t>(h + 64);
  const uint64_t have = bytes.size() - kHeaderBytes;
  if (stored > have) {
    return absl::DataLossError(
        StrCat("the snapshot is truncated: ", have, " payload bytes, its header says ", stored));
  }
  if (stored < have) {
    return absl::InvalidArgumentError(
        StrCat("the snapshot has ", have - stored, " bytes past its payload of ", stored));
  }
  const std::string_view payload = bytes.substr(kHeaderBytes);
  const uint64_t sum = Checksum64(payload, Checksum64(bytes.substr(0, kChecksumOffset), 0));
  if (sum != Load<uint64_t>(h + kChecksumOffset)) {
    return absl::DataLossError("the snapshot's checksum does not match its bytes (corrupted)");
  }
  Snapshot s;
  SnapshotLayout& l = s.layout;
  l.fingerprint = Load<uint64_t>(h + 16);
  l.kv_type = Load<uint32_t>(h + 24);
  l.kv_layout = Load<uint32_t>(h + 28);
  l.block_size = Load<uint32_t>(h + 32);
  l.layers = Load<uint32_t>(h + 36);
  l.kv_dim = Load<uint64_t>(h + 40);
  if (l.fingerprint != expect.fingerprint) {
    return absl::FailedPreconditionError(
        StrCat("the snapshot is of another model (fingerprint ",
               absl::Hex(l.fingerprint, absl::kZeroPad16), "; this model server's is ",
               absl::Hex(expect.fingerprint, absl::kZeroPad16), ")"));
  }
  if (l.kv_type != expect.kv_type) {
    return absl::FailedPreconditionError(StrCat("the snapshot's KV cache type is ",
                                                KvTypeName(l.kv_type), "; this model server's is ",
                                                KvTypeName(expect.kv_type), " (--kv_cache_type)"));
  }
  if (l.kv_layout != expect.kv_layout) return Mismatch("KV layout", l.kv_layout, expect.kv_layout);
  if (l.block_size != expect.block_size)
    return Mismatch("KV block size", l.block_size, expect.block_size);
  if (l.layers != expect.layers) return Mismatch("layer count", l.layers, expect.layers);
  if (l.kv_dim != expect.kv_dim) return Mismatch("KV dimension", l.kv_dim, expect.kv_dim);
  if (expect.block_size == 0) return absl::InvalidArgumentError("snapshot: a zero block size");

  const uint64_t count = Load<uint64_t>(h + 48);
  if (count >= kMaxTokenCount) {
    return absl::InvalidArgumentError(
        StrCat("the snapshot claims ", count, " tokens, past any context (2^31)"));
  }
  const int64_t n = static_cast<int64_t>(count);
  if (n > limits.max_tokens) {
    return absl::OutOfRangeError(StrCat("the snapshot holds ", n,
                                        " tokens, past this model server's context length of ",
                                        limits.max_tokens));
  }
  const int64_t raw_bytes = RawBytes(l, n);
  if (Load<uint64_t>(h + 56) != static_cast<uint64_t>(raw_bytes)) {
    return absl::InvalidArgumentError(StrCat("the snapshot says ", Load<uint64_t>(h + 56),
                                             " raw payload bytes; ", n,
                                             " tokens of its layout take ", raw_bytes));
  }
  std::string decompressed;
  std::string_view raw = payload;
  if (flags & kFlagZstd) {
    const unsigned long long size = ZSTD_getFrameContentSize(payload.data(), payload.size());
    if (size != static_cast<unsigned long long>(raw_bytes)) {
      return absl::DataLossError(
          StrCat("the snapshot's zstd frame does not declare its ", raw_bytes, " raw bytes"));
    }
    decompressed.resize(static_cast<size_t>(raw_bytes));
    const size_t got =
        ZSTD_decompress(decompressed.data(), decompressed.size(), payload.data(), payload.size());
    if (ZSTD_isError(got) || got != decompressed.size()) {
      return absl::DataLossError(StrCat("the snapshot's zstd frame is corrupt: ",
                                        ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short"));
    }
    raw = decompressed;
  } else if (stored != static_cast<uint64_t>(raw_bytes)) {
    return absl::InvalidArgumentError(StrCat("the snapshot stores ", stored,
                                             " uncompressed payload bytes; its ", n,
                                             " tokens take ", raw_bytes));
  }
  s.tokens.resize(static_cast<size_t>(n));
  if (n > 0) std::memcpy(s.tokens.data(), raw.data(), static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    if (s.tokens[i] < 0 || s.tokens[i] >= limits.vocab_size) {
      return absl::InvalidArgumentError(StrCat("snapshot token ", i, " has id ", s.tokens[i],
                                               ", outside the vocabulary [0, ", limits.vocab_size,
                                               ")"));
    }
  }
  s.kv.assign(raw.substr(static_cast<size_t>(n) * 4));
  return s;
}

}  // namespace llm::snapshot
