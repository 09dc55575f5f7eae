// libFuzzer target for the GGUF reader.
//
// Parses arbitrary bytes with File::FromBytes. When they parse, every
// metadata value is read through every accessor (type mismatches must come
// back as errors, never as out-of-bounds reads) and the first and last byte of
// every tensor's data range are read, so ASan catches any range that the
// parser let through outside the buffer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/gguf/gguf.h"

namespace {

volatile uint64_t sink;

template <typename T>
void Touch(const absl::StatusOr<T>& r) {
  sink = sink + (r.ok() ? 1 : 2);
}

void TouchValue(const llm::gguf::Value& v) {
  sink = sink + v.key().size() + static_cast<uint32_t>(v.type()) +
         static_cast<uint32_t>(v.array_type()) + v.array_size();
  Touch(v.AsUint());
  Touch(v.AsInt());
  Touch(v.AsFloat());
  Touch(v.AsBool());
  if (auto s = v.AsString(); s.ok() && !s->empty()) sink = sink + s->front() + s->back();
  if (auto a = v.AsStringArray(); a.ok()) {
    for (std::string_view e : *a) {
      if (!e.empty()) sink = sink + e.front() + e.back();
    }
  }
  if (auto a = v.AsIntArray(); a.ok()) {
    for (int64_t e : *a) sink = sink + static_cast<uint64_t>(e);
  }
  if (auto a = v.AsFloatArray(); a.ok()) {
    for (float e : *a) sink = sink + (e == e ? 1 : 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = llm::gguf::File::FromBytes(std::string(reinterpret_cast<const char*>(data), size),
                                         "fuzz.gguf");
  if (!file.ok()) return 0;
  const llm::gguf::File& f = **file;
  for (const llm::gguf::Value& v : f.metadata()) {
    TouchValue(v);
    if (f.Find(v.key()) != &v) __builtin_trap();  // keys are unique
    Touch(f.GetString(v.key()));
    Touch(f.GetUint(v.key()));
    Touch(f.GetFloat(v.key()));
    Touch(f.GetBool(v.key()));
  }
  for (const llm::gguf::TensorInfo& t : f.tensors()) {
    if (f.FindTensor(t.name) != &t) __builtin_trap();  // names are unique
    if (t.size_bytes == 0 || t.data == nullptr) __builtin_trap();
    sink = sink + t.data[0] + t.data[t.size_bytes - 1] + static_cast<uint64_t>(t.elements()) +
           static_cast<uint64_t>(t.rows());
  }
  return 0;
}
