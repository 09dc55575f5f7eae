// Test support: builds GGUF v3 files in memory.
//
//   llm::gguf::testing::GgufBuilder b;
//   b.AddString("general.architecture", "llama")
//       .AddUint32("llama.block_count", 2)
//       .AddStringArray("tokenizer.ggml.tokens", {"a", "b"})
//       .AddFloat32Array("tokenizer.ggml.scores", {0.f, -1.f});
//   b.AddTensorF32("token_embd.weight", {4, 2}, values);
//   b.AddTensor("blk.0.attn_q.weight", TensorType::kQ8_0, {32, 4}, bytes);
//   std::string file = b.Serialize();
//
// Layout: metadata in insertion order, then tensor infos in insertion order,
// then (only when there are tensors) zero padding to the alignment and each
// tensor's bytes padded with zeros to the alignment, so offsets are contiguous
// in tensor order exactly as the reader requires. The alignment is the value
// of a UINT32 "general.alignment" entry when there is one and it is a power of
// two no larger than 1 MiB (SetAlignment adds it), else 32.
//
// The builder does not validate: empty or duplicate keys, bad alignments and
// tensor data of the wrong size are written as given, so tests can build
// malformed files. Further damage is done by patching the serialized bytes.
//
// Threads: not thread-safe; cheap to copy.
#ifndef LLM_COMMON_GGUF_GGUF_WRITER_H_
#define LLM_COMMON_GGUF_GGUF_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/gguf.h"

namespace llm::gguf::testing {

class GgufBuilder {
 public:
  GgufBuilder() = default;

  // Scalars.
  GgufBuilder& AddUint8(std::string key, uint8_t v);
  GgufBuilder& AddInt8(std::string key, int8_t v);
  GgufBuilder& AddUint16(std::string key, uint16_t v);
  GgufBuilder& AddInt16(std::string key, int16_t v);
  GgufBuilder& AddUint32(std::string key, uint32_t v);
  GgufBuilder& AddInt32(std::string key, int32_t v);
  GgufBuilder& AddUint64(std::string key, uint64_t v);
  GgufBuilder& AddInt64(std::string key, int64_t v);
  GgufBuilder& AddFloat32(std::string key, float v);
  GgufBuilder& AddFloat64(std::string key, double v);
  GgufBuilder& AddBool(std::string key, bool v);
  GgufBuilder& AddString(std::string key, std::string_view v);

  // Arrays (element type as named).
  GgufBuilder& AddUint8Array(std::string key, const std::vector<uint8_t>& v);
  GgufBuilder& AddInt8Array(std::string key, const std::vector<int8_t>& v);
  GgufBuilder& AddUint16Array(std::string key, const std::vector<uint16_t>& v);
  GgufBuilder& AddInt16Array(std::string key, const std::vector<int16_t>& v);
  GgufBuilder& AddUint32Array(std::string key, const std::vector<uint32_t>& v);
  GgufBuilder& AddInt32Array(std::string key, const std::vector<int32_t>& v);
  GgufBuilder& AddUint64Array(std::string key, const std::vector<uint64_t>& v);
  GgufBuilder& AddInt64Array(std::string key, const std::vector<int64_t>& v);
  GgufBuilder& AddFloat32Array(std::string key, const std::vector<float>& v);
  GgufBuilder& AddFloat64Array(std::string key, const std::vector<double>& v);
  GgufBuilder& AddBoolArray(std::string key, const std::vector<bool>& v);
  GgufBuilder& AddStringArray(std::string key, const std::vector<std::string>& v);

  // Adds a UINT32 "general.alignment" entry; the layout then uses `alignment`
  // if it is a power of two no larger than 1 MiB.
  GgufBuilder& SetAlignment(uint32_t alignment);

  // Adds a tensor with the given raw bytes (for quantized types, the packed
  // blocks). The reader accepts the file only if data.size() equals
  // TensorBytes(type, ne).
  GgufBuilder& AddTensor(std::string name, TensorType type, std::vector<int64_t> ne,
                         std::string_view data);
  // Adds a tensor of TensorBytes(type, ne) zero bytes.
  GgufBuilder& AddTensor(std::string name, TensorType type, std::vector<int64_t> ne);
  // Adds an F32 tensor from its values (ne[0] fastest).
  GgufBuilder& AddTensorF32(std::string name, std::vector<int64_t> ne,
                            std::span<const float> values);
  // Adds a tensor with an arbitrary type id and shape, unchecked: for
  // malformed files (unknown types, n_dims 0 or 5, ne <= 0).
  GgufBuilder& AddRawTensor(std::string name, uint32_t ggml_type, std::vector<int64_t> ne,
                            std::string_view data);

  // Bytes of a tensor of a known type and shape: (ne[0] / block) * block_bytes
  // * ne[1] * ...; 0 when the type is unknown or the shape is not valid.
  static uint64_t TensorBytes(TensorType type, const std::vector<int64_t>& ne);

  // The alignment that Serialize() will use.
  uint32_t alignment() const;

  // The whole file.
  std::string Serialize() const;
  // Writes Serialize() to `path`, replacing it.
  absl::Status WriteTo(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    ValueType type;
    std::string payload;  // the encoded value, after the u32 type
  };
  struct Tensor {
    std::string name;
    uint32_t ggml_type;
    std::vector<int64_t> ne;
    std::string data;
  };

  GgufBuilder& AddEntry(std::string key, ValueType type, std::string payload);
  template <typename T>
  GgufBuilder& AddScalar(std::string key, ValueType type, T v);
  template <typename T>
  GgufBuilder& AddArray(std::string key, ValueType elem_type, const std::vector<T>& v);

  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace llm::gguf::testing

#endif  // LLM_COMMON_GGUF_GGUF_WRITER_H_
