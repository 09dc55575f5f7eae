#include "model_svc/engine/fingerprint.h"

#include <algorithm>
#include <string_view>

#include "model_svc/snapshot/snapshot.h"

namespace llm::engine {
namespace {

// Folds a value's bytes into h.
template <typename T>
uint64_t Fold(uint64_t h, const T& v) {
  return snapshot::Checksum64(std::string_view(reinterpret_cast<const char*>(&v), sizeof(T)), h);
}
uint64_t Fold(uint64_t h, std::string_view s) { return snapshot::Checksum64(s, h); }

uint64_t FoldValue(uint64_t h, const gguf::Value& v) {
  h = Fold(Fold(h, v.key()), static_cast<uint32_t>(v.type()));
  switch (v.type()) {
    case gguf::ValueType::kString:
      return Fold(h, v.AsString().value_or(""));
    case gguf::ValueType::kFloat32:
    case gguf::ValueType::kFloat64:
      return Fold(h, v.AsFloat().value_or(0));
    case gguf::ValueType::kBool:
      return Fold(h, v.AsBool().value_or(false));
    case gguf::ValueType::kArray: {
      h = Fold(Fold(h, static_cast<uint32_t>(v.array_type())), v.array_size());
      if (auto strings = v.AsStringArray(); strings.ok()) {
        for (std::string_view s : *strings) h = Fold(h, s);
      } else if (auto ints = v.AsIntArray(); ints.ok()) {
        h = Fold(h,
                 std::string_view(reinterpret_cast<const char*>(ints->data()), ints->size() * 8));
      } else if (auto floats = v.AsFloatArray(); floats.ok()) {
        h = Fold(
            h, std::string_view(reinterpret_cast<const char*>(floats->data()), floats->size() * 4));
      }
      return h;
    }
    default:  // integers
      if (auto i = v.AsInt(); i.ok()) return Fold(h, *i);
      return Fold(h, v.AsUint().value_or(0));
  }
}

}  // namespace

uint64_t ModelFingerprint(const gguf::File& file) {
  uint64_t h = Fold(0, file.version());
  for (const gguf::Value& v : file.metadata()) h = FoldValue(h, v);
  for (const gguf::TensorInfo& t : file.tensors()) {
    h = Fold(Fold(Fold(Fold(h, t.name), t.ne), t.ggml_type), t.offset);
    const size_t sample = static_cast<size_t>(std::min<uint64_t>(t.size_bytes, 256));
    if (t.data != nullptr)
      h = Fold(h, std::string_view(reinterpret_cast<const char*>(t.data), sample));
  }
  return h;
}

}  // namespace llm::engine
