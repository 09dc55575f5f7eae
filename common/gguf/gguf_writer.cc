#include "common/gguf/gguf_writer.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <type_traits>
#include <utility>

#include "common/strings.h"

namespace llm::gguf::testing {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
// Larger alignments (which the reader rejects) are not used for the layout, so
// that a test asking for general.alignment = 2^31 does not build a 2 GiB file.
constexpr uint32_t kMaxLayoutAlignment = uint32_t{1} << 20;

// Appends `v` little-endian in sizeof(T) bytes.
template <typename T>
void PutLE(std::string& out, T v) {
  static_assert(std::is_arithmetic_v<T>);
  using U = std::conditional_t<
      sizeof(T) == 1, uint8_t,
      std::conditional_t<sizeof(T) == 2, uint16_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  U bits;
  if constexpr (std::is_same_v<T, bool>) {
    bits = v ? 1 : 0;
  } else {
    bits = std::bit_cast<U>(v);
  }
  for (size_t i = 0; i < sizeof(U); ++i) {
    out.push_back(static_cast<char>(static_cast<uint64_t>(bits) >> (8 * i)));
  }
}

void PutString(std::string& out, std::string_view s) {
  PutLE<uint64_t>(out, s.size());
  out.append(s);
}

void PadTo(std::string& out, uint64_t alignment) {
  while (out.size() % alignment != 0) out.push_back('\0');
}

}  // namespace

GgufBuilder& GgufBuilder::AddEntry(std::string key, ValueType type, std::string payload) {
  entries_.push_back({std::move(key), type, std::move(payload)});
  return *this;
}

template <typename T>
GgufBuilder& GgufBuilder::AddScalar(std::string key, ValueType type, T v) {
  std::string payload;
  PutLE<T>(payload, v);
  return AddEntry(std::move(key), type, std::move(payload));
}

template <typename T>
GgufBuilder& GgufBuilder::AddArray(std::string key, ValueType elem_type, const std::vector<T>& v) {
  std::string payload;
  PutLE<uint32_t>(payload, static_cast<uint32_t>(elem_type));
  PutLE<uint64_t>(payload, v.size());
  for (const T& x : v) {
    if constexpr (std::is_same_v<T, std::string>) {
      PutString(payload, x);
    } else {
      PutLE<T>(payload, x);
    }
  }
  return AddEntry(std::move(key), ValueType::kArray, std::move(payload));
}

GgufBuilder& GgufBuilder::AddUint8(std::string key, uint8_t v) {
  return AddScalar(std::move(key), ValueType::kUint8, v);
}
GgufBuilder& GgufBuilder::AddInt8(std::string key, int8_t v) {
  return AddScalar(std::move(key), ValueType::kInt8, v);
}
GgufBuilder& GgufBuilder::AddUint16(std::string key, uint16_t v) {
  return AddScalar(std::move(key), ValueType::kUint16, v);
}
GgufBuilder& GgufBuilder::AddInt16(std::string key, int16_t v) {
  return AddScalar(std::move(key), ValueType::kInt16, v);
}
GgufBuilder& GgufBuilder::AddUint32(std::string key, uint32_t v) {
  return AddScalar(std::move(key), ValueType::kUint32, v);
}
GgufBuilder& GgufBuilder::AddInt32(std::string key, int32_t v) {
  return AddScalar(std::move(key), ValueType::kInt32, v);
}
GgufBuilder& GgufBuilder::AddUint64(std::string key, uint64_t v) {
  return AddScalar(std::move(key), ValueType::kUint64, v);
}
GgufBuilder& GgufBuilder::AddInt64(std::string key, int64_t v) {
  return AddScalar(std::move(key), ValueType::kInt64, v);
}
GgufBuilder& GgufBuilder::AddFloat32(std::string key, float v) {
  return AddScalar(std::move(key), ValueType::kFloat32, v);
}
GgufBuilder& GgufBuilder::AddFloat64(std::string key, double v) {
  return AddScalar(std::move(key), ValueType::kFloat64, v);
}
GgufBuilder& GgufBuilder::AddBool(std::string key, bool v) {
  return AddScalar(std::move(key), ValueType::kBool, v);
}
GgufBuilder& GgufBuilder::AddString(std::string key, std::string_view v) {
  std::string payload;
  PutString(payload, v);
  return AddEntry(std::move(key), ValueType::kString, std::move(payload));
}

GgufBuilder& GgufBuilder::AddUint8Array(std::string key, const std::vector<uint8_t>& v) {
  return AddArray(std::move(key), ValueType::kUint8, v);
}
GgufBuilder& GgufBuilder::AddInt8Array(std::string key, const std::vector<int8_t>& v) {
  return AddArray(std::move(key), ValueType::kInt8, v);
}
GgufBuilder& GgufBuilder::AddUint16Array(std::string key, const std::vector<uint16_t>& v) {
  return AddArray(std::move(key), ValueType::kUint16, v);
}
GgufBuilder& GgufBuilder::AddInt16Array(std::string key, const std::vector<int16_t>& v) {
  return AddArray(std::move(key), ValueType::kInt16, v);
}
GgufBuilder& GgufBuilder::AddUint32Array(std::string key, const std::vector<uint32_t>& v) {
  return AddArray(std::move(key), ValueType::kUint32, v);
}
GgufBuilder& GgufBuilder::AddInt32Array(std::string key, const std::vector<int32_t>& v) {
  return AddArray(std::move(key), ValueType::kInt32, v);
}
GgufBuilder& GgufBuilder::AddUint64Array(std::string key, const std::vector<uint64_t>& v) {
  return AddArray(std::move(key), ValueType::kUint64, v);
}
GgufBuilder& GgufBuilder::AddInt64Array(std::string key, const std::vector<int64_t>& v) {
  return AddArray(std::move(key), ValueType::kInt64, v);
}
GgufBuilder& GgufBuilder::AddFloat32Array(std::string key, const std::vector<float>& v) {
  return AddArray(std::move(key), ValueType::kFloat32, v);
}
GgufBuilder& GgufBuilder::AddFloat64Array(std::string key, const std::vector<double>& v) {
  return AddArray(std::move(key), ValueType::kFloat64, v);
}
GgufBuilder& GgufBuilder::AddBoolArray(std::string key, const std::vector<bool>& v) {
  // std::vector<bool> has no addressable elements; copy to plain bools.
  std::vector<uint8_t> bytes(v.begin(), v.end());
  return AddArray(std::move(key), ValueType::kBool, bytes);
}
GgufBuilder& GgufBuilder::AddStringArray(std::string key, const std::vector<std::string>& v) {
  return AddArray(std::move(key), ValueType::kString, v);
}

GgufBuilder& GgufBuilder::SetAlignment(uint32_t alignment) {
  return AddUint32("general.alignment", alignment);
}

uint32_t GgufBuilder::alignment() const {
  for (const Entry& e : entries_) {
    if (e.key == "general.alignment" && e.type == ValueType::kUint32) {
      uint32_t a = 0;
      for (size_t i = 0; i < 4; ++i) {
        a |= static_cast<uint32_t>(static_cast<uint8_t>(e.payload[i])) << (8 * i);
      }
      if (a != 0 && (a & (a - 1)) == 0 && a <= kMaxLayoutAlignment) return a;
    }
  }
  return kDefaultAlignment;
}

uint64_t GgufBuilder::TensorBytes(TensorType type, const std::vector<int64_t>& ne) {
  const TensorTypeTraits* traits = FindTensorTypeTraits(static_cast<uint32_t>(type));
  if (traits == nullptr || ne.empty() || ne.size() > 4) return 0;
  for (int64_t n : ne) {
    if (n <= 0) return 0;
  }
  if (ne[0] % traits->block_elements != 0) return 0;
  uint64_t bytes = static_cast<uint64_t>(ne[0]) / traits->block_elements * traits->block_bytes;
  for (size_t j = 1; j < ne.size(); ++j) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(ne[j]), &bytes)) return 0;
  }
  return bytes;
}

GgufBuilder& GgufBuilder::AddTensor(std::string name, TensorType type, std::vector<int64_t> ne,
                                    std::string_view data) {
  return AddRawTensor(std::move(name), static_cast<uint32_t>(type), std::move(ne), data);
}

GgufBuilder& GgufBuilder::AddTensor(std::string name, TensorType type, std::vector<int64_t> ne) {
  const uint64_t bytes = TensorBytes(type, ne);
  tensors_.push_back(
      {std::move(name), static_cast<uint32_t>(type), std::move(ne), std::string(bytes, '\0')});
  return *this;
}

GgufBuilder& GgufBuilder::AddTensorF32(std::string name, std::vector<int64_t> ne,
                                       std::span<const float> values) {
  std::string data;
  data.reserve(values.size() * sizeof(float));
  for (float v : values) PutLE<float>(data, v);
  tensors_.push_back(
      {std::move(name), static_cast<uint32_t>(TensorType::kF32), std::move(ne), std::move(data)});
  return *this;
}

GgufBuilder& GgufBuilder::AddRawTensor(std::string name, uint32_t ggml_type,
                                       std::vector<int64_t> ne, std::string_view data) {
  tensors_.push_back({std::move(name), ggml_type, std::move(ne), std::string(data)});
  return *this;
}

std::string GgufBuilder::Serialize() const {
  const uint32_t align = alignment();
  std::string out = "GGUF";
  PutLE<uint32_t>(out, 3);
  PutLE<uint64_t>(out, tensors_.size());
  PutLE<uint64_t>(out, entries_.size());
  for (const Entry& e : entries_) {
    PutString(out, e.key);
    PutLE<uint32_t>(out, static_cast<uint32_t>(e.type));
    out.append(e.payload);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    PutLE<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) PutLE<int64_t>(out, n);
    PutLE<uint32_t>(out, t.ggml_type);
    PutLE<uint64_t>(out, offset);
    offset += (t.data.size() + align - 1) / align * align;
  }
  if (!tensors_.empty()) {
    PadTo(out, align);
    for (const Tensor& t : tensors_) {
      out.append(t.data);
      PadTo(out, align);
    }
  }
  return out;
}

absl::Status GgufBuilder::WriteTo(const std::string& path) const {
  const std::string bytes = Serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::InternalError(llm::StrCat("cannot create ", path));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::InternalError(llm::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace llm::gguf::testing
