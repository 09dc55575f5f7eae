// GGUF reader: a memory-mapped, bounds-checked view of a GGUF v2/v3 file.
//
// File layout (all little-endian; see docs/gguf.md for the details):
//   magic "GGUF" | u32 version (2 or 3) | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | n_dims x i64 ne | u32 ggml_type | u64 offset }
//   zero padding to general.alignment (default 32), present only when tensor_count > 0
//   data section: tensor i at data_start + offset_i
// A string is a u64 byte length followed by that many bytes (no NUL). An array
// value is u32 element type, u64 count, then the packed elements.
//
// Trust: the file is hostile input. Every count, length, dimension, offset,
// alignment and type id is checked with overflow-safe arithmetic against the
// bytes that remain before it is used; nothing is allocated in proportion to a
// count that the file has not already proven it holds. A malformed file yields
// InvalidArgument naming the file, the byte offset and the problem.
//
// Ownership: a File owns its mapping (or the buffer given to FromBytes). Every
// string_view and pointer it hands out lives as long as the File.
// Threads: immutable after construction; safe to share across threads.
// Cost: Open() parses the header and metadata once (O(bytes of metadata));
// tensor data is never touched until the caller reads it.
#ifndef LLM_COMMON_GGUF_GGUF_H_
#define LLM_COMMON_GGUF_GGUF_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::gguf {

// Metadata value types (gguf_type), as stored in the file.
enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view ValueTypeName(ValueType t);

// ggml tensor types (ggml.h's enum ggml_type), every id ggml still defines.
// The reader knows all their block layouts, so a tensor of any of them parses
// and can be named; which ones a backend computes with is its own matter.
// Other ids (removed ones such as Q4_2 and the repacked Q4_0_4_4, unknown
// ones) are rejected by the reader with an error naming the tensor and the id.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct TensorTypeTraits {
  std::string_view name;    // "Q4_1", "IQ4_XS": ggml's type name, upper case
  uint32_t block_elements;  // elements per block (1 for the plain F*/I* types)
  uint32_t block_bytes;     // bytes per block
};

// Traits of a known tensor type, or nullptr for an unknown or removed id.
const TensorTypeTraits* FindTensorTypeTraits(uint32_t ggml_type);
// The type named `name` in any case ("q4_k", "BF16"), or nullopt.
std::optional<TensorType> FindTensorTypeByName(std::string_view name);

// One metadata value. Scalars are decoded; strings and arrays are views into
// the file. Accessors return InvalidArgument naming `key` on a type mismatch.
class Value {
 public:
  ValueType type() const { return type_; }
  std::string_view key() const { return key_; }

  // Any integer type whose value fits; negative values are rejected by AsUint.
  absl::StatusOr<uint64_t> AsUint() const;
  absl::StatusOr<int64_t> AsInt() const;
  // FLOAT32 or FLOAT64 (integers are accepted too).
  absl::StatusOr<double> AsFloat() const;
  absl::StatusOr<bool> AsBool() const;
  absl::StatusOr<std::string_view> AsString() const;

  // Arrays. array_type() is meaningful only when type() == kArray.
  ValueType array_type() const { return array_type_; }
  uint64_t array_size() const { return array_size_; }
  // Elements of a string array, as views into the file.
  absl::StatusOr<std::vector<std::string_view>> AsStringArray() const;
  // Elements of an integer array of any integer element type.
  absl::StatusOr<std::vector<int64_t>> AsIntArray() const;
  // Elements of a FLOAT32/FLOAT64 array.
  absl::StatusOr<std::vector<float>> AsFloatArray() const;

 private:
  friend class File;
  friend class Parser;
  std::string_view key_;
  ValueType type_ = ValueType::kUint8;
  // Scalars: raw bits of the value (sign-extended for signed types, IEEE bits
  // widened to double for floats).
  uint64_t bits_ = 0;
  double fbits_ = 0;
  // Strings: the bytes. Arrays: the packed elements (string arrays: the
  // sequence of {u64 len, bytes}), already validated to lie inside the file.
  std::string_view payload_;
  ValueType array_type_ = ValueType::kUint8;
  uint64_t array_size_ = 0;
};

struct TensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne = {1, 1, 1, 1};  // ne[0] is the row length
  uint32_t ggml_type = 0;
  uint64_t offset = 0;      // relative to the data section
  uint64_t size_bytes = 0;  // checked: data + size_bytes lies inside the file
  const uint8_t* data = nullptr;

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
};

class File {
 public:
  // Maps and parses `path`.
  static absl::StatusOr<std::unique_ptr<File>> Open(const std::string& path);
  // Parses an in-memory copy (tests, fuzzers). `name` appears in errors.
  static absl::StatusOr<std::unique_ptr<File>> FromBytes(std::string bytes,
                                                         std::string name = "<memory>");

  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }

  // Metadata in file order.
  const std::vector<Value>& metadata() const { return metadata_; }
  // nullptr when absent.
  const Value* Find(std::string_view key) const;

  // Typed getters: NotFound naming the key and file when absent,
  // InvalidArgument on a type mismatch.
  absl::StatusOr<std::string_view> GetString(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorInfo* FindTensor(std::string_view name) const;

 private:
  File() = default;
  friend class Parser;

  std::string name_;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  std::vector<Value> metadata_;
  std::vector<TensorInfo> tensors_;
  struct Storage;
  std::unique_ptr<Storage> storage_;
};

}  // namespace llm::gguf

#endif  // LLM_COMMON_GGUF_GGUF_H_
