#include "common/gguf/gguf.h"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/mapped_file.h"
#include "common/strings.h"

namespace llm::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;                    // "GGUF" read as a LE u32
constexpr uint64_t kMaxStringLength = uint64_t{1} << 30;   // GGUF_MAX_STRING_LENGTH
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 30;  // GGUF_MAX_ARRAY_ELEMENTS
constexpr uint32_t kDefaultAlignment = 32;                 // GGUF_DEFAULT_ALIGNMENT
constexpr uint32_t kMaxAlignment = uint32_t{1} << 20;      // 1 MiB
constexpr size_t kMaxTensorNameBytes = 63;                 // GGML_MAX_NAME (64) less the NUL
constexpr uint32_t kMaxDims = 4;                           // GGML_MAX_DIMS
// Smallest possible encodings, used to bound counts by the bytes that remain.
constexpr uint64_t kMinKvBytes = 8 + 4;                  // key length + value type
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinStringBytes = 8;                  // length

constexpr uint64_t kTensorCountOffset = 8;  // after magic and version

constexpr std::string_view kAlignmentKey = "general.alignment";

// Little-endian load of an unsigned integer of N bytes; `p` must hold N bytes.
uint64_t LoadLE(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Bytes of one scalar of type `t`; 0 for STRING, ARRAY and unknown ids.
size_t ScalarSize(uint32_t t) {
  switch (static_cast<ValueType>(t)) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

bool IsKnownValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

bool IsInteger(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsSigned(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}

// The description of a field: `what` itself, or what it returns when called.
template <typename What>
std::string Describe(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) {
    return what();
  } else {
    return std::string(what);
  }
}

bool IsFloat(ValueType t) { return t == ValueType::kFloat32 || t == ValueType::kFloat64; }

// Decodes an integer scalar of type `t` at `p` (which holds ScalarSize(t)
// bytes) as the raw 64-bit pattern: sign-extended for signed types.
uint64_t DecodeIntegerBits(ValueType t, const uint8_t* p) {
  const size_t n = ScalarSize(static_cast<uint32_t>(t));
  const uint64_t raw = LoadLE(p, n);
  if (!IsSigned(t) || n == 8) return raw;
  const unsigned shift = static_cast<unsigned>(64 - 8 * n);
  return static_cast<uint64_t>(static_cast<int64_t>(raw << shift) >> shift);
}

// Decodes a FLOAT32/FLOAT64 scalar at `p`.
double DecodeFloat(ValueType t, const uint8_t* p) {
  if (t == ValueType::kFloat32) {
    return std::bit_cast<float>(static_cast<uint32_t>(LoadLE(p, 4)));
  }
  return std::bit_cast<double>(LoadLE(p, 8));
}

std::string DescribeType(ValueType type, ValueType array_type) {
  if (type == ValueType::kArray) return llm::StrCat("ARRAY of ", ValueTypeName(array_type));
  return std::string(ValueTypeName(type));
}

absl::Status TypeMismatch(std::string_view key, ValueType type, ValueType array_type,
                          std::string_view expected) {
  return absl::InvalidArgumentError(llm::StrCat(
      "key '", key, "' has type ", DescribeType(type, array_type), ", expected ", expected));
}

// Rounds `v` up to a multiple of the power of two `align`; false on overflow.
bool AlignUp(uint64_t v, uint64_t align, uint64_t* out) {
  uint64_t sum;
  if (__builtin_add_overflow(v, align - 1, &sum)) return false;
  *out = sum & ~(align - 1);
  return true;
}

constexpr TensorTypeTraits kF32Traits{"F32", 1, 4};
constexpr TensorTypeTraits kF16Traits{"F16", 1, 2};
constexpr TensorTypeTraits kQ4_0Traits{"Q4_0", 32, 18};
constexpr TensorTypeTraits kQ4_1Traits{"Q4_1", 32, 20};
constexpr TensorTypeTraits kQ5_0Traits{"Q5_0", 32, 22};
constexpr TensorTypeTraits kQ5_1Traits{"Q5_1", 32, 24};
constexpr TensorTypeTraits kQ8_0Traits{"Q8_0", 32, 34};
constexpr TensorTypeTraits kQ8_1Traits{"Q8_1", 32, 36};
constexpr TensorTypeTraits kQ2_KTraits{"Q2_K", 256, 84};
constexpr TensorTypeTraits kQ3_KTraits{"Q3_K", 256, 110};
constexpr TensorTypeTraits kQ4_KTraits{"Q4_K", 256, 144};
constexpr TensorTypeTraits kQ5_KTraits{"Q5_K", 256, 176};
constexpr TensorTypeTraits kQ6_KTraits{"Q6_K", 256, 210};
constexpr TensorTypeTraits kQ8_KTraits{"Q8_K", 256, 292};
constexpr TensorTypeTraits kBF16Traits{"BF16", 1, 2};
constexpr TensorTypeTraits kIQ2_XXSTraits{"IQ2_XXS", 256, 66};
constexpr TensorTypeTraits kIQ2_XSTraits{"IQ2_XS", 256, 74};
constexpr TensorTypeTraits kIQ3_XXSTraits{"IQ3_XXS", 256, 98};
constexpr TensorTypeTraits kIQ1_STraits{"IQ1_S", 256, 50};
constexpr TensorTypeTraits kIQ4_NLTraits{"IQ4_NL", 32, 18};
constexpr TensorTypeTraits kIQ3_STraits{"IQ3_S", 256, 110};
constexpr TensorTypeTraits kIQ2_STraits{"IQ2_S", 256, 82};
constexpr TensorTypeTraits kIQ4_XSTraits{"IQ4_XS", 256, 136};
constexpr TensorTypeTraits kI8Traits{"I8", 1, 1};
constexpr TensorTypeTraits kI16Traits{"I16", 1, 2};
constexpr TensorTypeTraits kI32Traits{"I32", 1, 4};
constexpr TensorTypeTraits kI64Traits{"I64", 1, 8};
constexpr TensorTypeTraits kF64Traits{"F64", 1, 8};
constexpr TensorTypeTraits kIQ1_MTraits{"IQ1_M", 256, 56};
constexpr TensorTypeTraits kTQ1_0Traits{"TQ1_0", 256, 54};
constexpr TensorTypeTraits kTQ2_0Traits{"TQ2_0", 256, 66};
constexpr TensorTypeTraits kMXFP4Traits{"MXFP4", 32, 17};
constexpr TensorTypeTraits kNVFP4Traits{"NVFP4", 64, 36};
constexpr TensorTypeTraits kQ1_0Traits{"Q1_0", 128, 18};
constexpr TensorTypeTraits kQ2_0Traits{"Q2_0", 64, 18};

}  // namespace

std::string_view ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "UINT8";
    case ValueType::kInt8:
      return "INT8";
    case ValueType::kUint16:
      return "UINT16";
    case ValueType::kInt16:
      return "INT16";
    case ValueType::kUint32:
      return "UINT32";
    case ValueType::kInt32:
      return "INT32";
    case ValueType::kFloat32:
      return "FLOAT32";
    case ValueType::kBool:
      return "BOOL";
    case ValueType::kString:
      return "STRING";
    case ValueType::kArray:
      return "ARRAY";
    case ValueType::kUint64:
      return "UINT64";
    case ValueType::kInt64:
      return "INT64";
    case ValueType::kFloat64:
      return "FLOAT64";
  }
  return "UNKNOWN";
}

const TensorTypeTraits* FindTensorTypeTraits(uint32_t ggml_type) {
  switch (static_cast<TensorType>(ggml_type)) {
    case TensorType::kF32:
      return &kF32Traits;
    case TensorType::kF16:
      return &kF16Traits;
    case TensorType::kQ4_0:
      return &kQ4_0Traits;
    case TensorType::kQ4_1:
      return &kQ4_1Traits;
    case TensorType::kQ5_0:
      return &kQ5_0Traits;
    case TensorType::kQ5_1:
      return &kQ5_1Traits;
    case TensorType::kQ8_0:
      return &kQ8_0Traits;
    case TensorType::kQ8_1:
      return &kQ8_1Traits;
    case TensorType::kQ2_K:
      return &kQ2_KTraits;
    case TensorType::kQ3_K:
      return &kQ3_KTraits;
    case TensorType::kQ4_K:
      return &kQ4_KTraits;
    case TensorType::kQ5_K:
      return &kQ5_KTraits;
    case TensorType::kQ6_K:
      return &kQ6_KTraits;
    case TensorType::kQ8_K:
      return &kQ8_KTraits;
    case TensorType::kBF16:
      return &kBF16Traits;
    case TensorType::kIQ2_XXS:
      return &kIQ2_XXSTraits;
    case TensorType::kIQ2_XS:
      return &kIQ2_XSTraits;
    case TensorType::kIQ3_XXS:
      return &kIQ3_XXSTraits;
    case TensorType::kIQ1_S:
      return &kIQ1_STraits;
    case TensorType::kIQ4_NL:
      return &kIQ4_NLTraits;
    case TensorType::kIQ3_S:
      return &kIQ3_STraits;
    case TensorType::kIQ2_S:
      return &kIQ2_STraits;
    case TensorType::kIQ4_XS:
      return &kIQ4_XSTraits;
    case TensorType::kI8:
      return &kI8Traits;
    case TensorType::kI16:
      return &kI16Traits;
    case TensorType::kI32:
      return &kI32Traits;
    case TensorType::kI64:
      return &kI64Traits;
    case TensorType::kF64:
      return &kF64Traits;
    case TensorType::kIQ1_M:
      return &kIQ1_MTraits;
    case TensorType::kTQ1_0:
      return &kTQ1_0Traits;
    case TensorType::kTQ2_0:
      return &kTQ2_0Traits;
    case TensorType::kMXFP4:
      return &kMXFP4Traits;
    case TensorType::kNVFP4:
      return &kNVFP4Traits;
    case TensorType::kQ1_0:
      return &kQ1_0Traits;
    case TensorType::kQ2_0:
      return &kQ2_0Traits;
  }
  return nullptr;
}

std::optional<TensorType> FindTensorTypeByName(std::string_view name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const TensorTypeTraits* t = FindTensorTypeTraits(id);
    if (t != nullptr && absl::EqualsIgnoreCase(absl::string_view(t->name.data(), t->name.size()),
                                               absl::string_view(name.data(), name.size()))) {
      return static_cast<TensorType>(id);
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// Value accessors. Every payload was validated by the Parser, so decoding here
// only re-reads bytes that are known to lie inside the file.

absl::StatusOr<uint64_t> Value::AsUint() const {
  if (!IsInteger(type_)) return TypeMismatch(key_, type_, array_type_, "an unsigned integer");
  if (IsSigned(type_) && static_cast<int64_t>(bits_) < 0) {
    return absl::InvalidArgumentError(llm::StrCat("key '", key_, "' holds the negative value ",
                                                  static_cast<int64_t>(bits_),
                                                  ", expected an unsigned integer"));
  }
  return bits_;
}

absl::StatusOr<int64_t> Value::AsInt() const {
  if (!IsInteger(type_)) return TypeMismatch(key_, type_, array_type_, "an integer");
  if (type_ == ValueType::kUint64 &&
      bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(
        llm::StrCat("key '", key_, "' holds ", bits_, ", which does not fit in an int64"));
  }
  return static_cast<int64_t>(bits_);
}

absl::StatusOr<double> Value::AsFloat() const {
  if (IsFloat(type_)) return fbits_;
  if (IsInteger(type_)) {
    if (IsSigned(type_)) return static_cast<double>(static_cast<int64_t>(bits_));
    return static_cast<double>(bits_);
  }
  return TypeMismatch(key_, type_, array_type_, "a number");
}

absl::StatusOr<bool> Value::AsBool() const {
  if (type_ != ValueType::kBool) return TypeMismatch(key_, type_, array_type_, "BOOL");
  return bits_ != 0;
}

absl::StatusOr<std::string_view> Value::AsString() const {
  if (type_ != ValueType::kString) return TypeMismatch(key_, type_, array_type_, "STRING");
  return payload_;
}

absl::StatusOr<std::vector<std::string_view>> Value::AsStringArray() const {
  if (type_ != ValueType::kArray || array_type_ != ValueType::kString) {
    return TypeMismatch(key_, type_, array_type_, "ARRAY of STRING");
  }
  std::vector<std::string_view> out;
  out.reserve(array_size_);  // validated: array_size_ * 8 <= payload_.size()
  const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
  size_t pos = 0;
  for (uint64_t i = 0; i < array_size_; ++i) {
    const uint64_t len = LoadLE(p + pos, 8);
    pos += 8;
    out.emplace_back(payload_.data() + pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> Value::AsIntArray() const {
  if (type_ != ValueType::kArray || !IsInteger(array_type_)) {
    return TypeMismatch(key_, type_, array_type_, "an ARRAY of an integer type");
  }
  const size_t elem = ScalarSize(static_cast<uint32_t>(array_type_));
  const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
  std::vector<int64_t> out;
  out.reserve(array_size_);  // validated: array_size_ * elem == payload_.size()
  for (uint64_t i = 0; i < array_size_; ++i) {
    const uint64_t bits = DecodeIntegerBits(array_type_, p + i * elem);
    if (array_type_ == ValueType::kUint64 &&
        bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(llm::StrCat("key '", key_, "' element ", i, " holds ", bits,
                                                    ", which does not fit in an int64"));
    }
    out.push_back(static_cast<int64_t>(bits));
  }
  return out;
}

absl::StatusOr<std::vector<float>> Value::AsFloatArray() const {
  if (type_ != ValueType::kArray || !IsFloat(array_type_)) {
    return TypeMismatch(key_, type_, array_type_, "an ARRAY of FLOAT32 or FLOAT64");
  }
  const size_t elem = ScalarSize(static_cast<uint32_t>(array_type_));
  const auto* p = reinterpret_cast<const uint8_t*>(payload_.data());
  std::vector<float> out;
  out.reserve(array_size_);  // validated: array_size_ * elem == payload_.size()
  for (uint64_t i = 0; i < array_size_; ++i) {
    out.push_back(static_cast<float>(DecodeFloat(array_type_, p + i * elem)));
  }
  return out;
}

// ---------------------------------------------------------------------------
// File storage and lookups.

struct File::Storage {
  // Exactly one of these holds the file's bytes.
  std::string bytes;
  MappedFile mapped;
  // Views into the bytes above -> index into metadata_ / tensors_.
  absl::flat_hash_map<std::string_view, size_t> key_index;
  absl::flat_hash_map<std::string_view, size_t> tensor_index;
};

File::~File() = default;

const Value* File::Find(std::string_view key) const {
  if (storage_ == nullptr) return nullptr;
  auto it = storage_->key_index.find(key);
  return it == storage_->key_index.end() ? nullptr : &metadata_[it->second];
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  if (storage_ == nullptr) return nullptr;
  auto it = storage_->tensor_index.find(name);
  return it == storage_->tensor_index.end() ? nullptr : &tensors_[it->second];
}

namespace {

absl::Status KeyNotFound(const std::string& file, std::string_view key) {
  return absl::NotFoundError(llm::StrCat(file, ": key '", key, "' not found"));
}

// Prefixes an accessor's error with the file name.
absl::Status InFile(const std::string& file, const absl::Status& s) {
  const absl::string_view message = s.message();
  return absl::Status(s.code(),
                      llm::StrCat(file, ": ", std::string_view(message.data(), message.size())));
}

}  // namespace

absl::StatusOr<std::string_view> File::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(name_, key);
  absl::StatusOr<std::string_view> r = v->AsString();
  if (!r.ok()) return InFile(name_, r.status());
  return r;
}

absl::StatusOr<uint64_t> File::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(name_, key);
  absl::StatusOr<uint64_t> r = v->AsUint();
  if (!r.ok()) return InFile(name_, r.status());
  return r;
}

absl::StatusOr<double> File::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(name_, key);
  absl::StatusOr<double> r = v->AsFloat();
  if (!r.ok()) return InFile(name_, r.status());
  return r;
}

absl::StatusOr<bool> File::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return KeyNotFound(name_, key);
  absl::StatusOr<bool> r = v->AsBool();
  if (!r.ok()) return InFile(name_, r.status());
  return r;
}

// ---------------------------------------------------------------------------
// Parser: walks the bytes of one file with a cursor and fills a File.
//
// Contract: every read is preceded by a check that the bytes exist; every
// count is bounded by the bytes that remain before anything is reserved for
// it; all size arithmetic is checked for overflow. The first problem found is
// returned as InvalidArgument "<name>: offset <N>: <problem>", where N is the
// offset of the field at fault.
class Parser {
 public:
  Parser(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  // Parses the whole file into `file`, whose storage_ must already own the
  // bytes that `data` points to.
  absl::Status Parse(File& file);

 private:
  // Where tensor i's offset field is, for errors found after all infos are read.
  std::vector<uint64_t> offset_fields_;

  absl::Status Error(uint64_t offset, std::string_view problem) const {
    return absl::InvalidArgumentError(llm::StrCat(name_, ": offset ", offset, ": ", problem));
  }
  uint64_t left() const { return size_ - pos_; }

  // In the readers below, `what` names the field for error messages: a string,
  // or a callable returning one, which is called only on error so that the
  // success path (e.g. walking 100k-element string arrays) does not allocate.

  // Fails unless `n` bytes remain at the cursor.
  template <typename What>
  absl::Status Need(uint64_t n, const What& what) const;
  template <typename What>
  absl::StatusOr<uint32_t> ReadU32(const What& what);
  template <typename What>
  absl::StatusOr<uint64_t> ReadU64(const What& what);
  // Reads a {u64 length, bytes} string; the view points into the file.
  template <typename What>
  absl::StatusOr<std::string_view> ReadString(const What& what);

  absl::Status ParseHeader(File& file);
  absl::Status ParseKv(File& file, uint64_t index);
  // Reads the value of `v` (whose key_ is set) of wire type `type`, which
  // starts at the cursor; `type_offset` is where the type field was.
  absl::Status ParseValue(Value& v, uint32_t type, uint64_t type_offset);
  absl::Status ParseArray(Value& v);
  absl::Status ApplyAlignment(File& file, const Value& v, uint64_t value_offset);
  absl::Status ParseTensorInfo(File& file, uint64_t index, uint64_t* expected_offset);
  absl::Status LocateTensorData(File& file);

  const uint8_t* data_;
  size_t size_;
  const std::string& name_;
  size_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
};

template <typename What>
absl::Status Parser::Need(uint64_t n, const What& what) const {
  if (n > left()) {
    return Error(pos_, llm::StrCat("truncated: ", Describe(what), " needs ", n, " bytes but only ",
                                   left(), " are left"));
  }
  return absl::OkStatus();
}

template <typename What>
absl::StatusOr<uint32_t> Parser::ReadU32(const What& what) {
  if (absl::Status s = Need(4, what); !s.ok()) return s;
  const auto v = static_cast<uint32_t>(LoadLE(data_ + pos_, 4));
  pos_ += 4;
  return v;
}

template <typename What>
absl::StatusOr<uint64_t> Parser::ReadU64(const What& what) {
  if (absl::Status s = Need(8, what); !s.ok()) return s;
  const uint64_t v = LoadLE(data_ + pos_, 8);
  pos_ += 8;
  return v;
}

template <typename What>
absl::StatusOr<std::string_view> Parser::ReadString(const What& what) {
  const uint64_t at = pos_;
  absl::StatusOr<uint64_t> len =
      ReadU64([&] { return llm::StrCat("the length of ", Describe(what)); });
  if (!len.ok()) return len.status();
  if (*len > left()) {
    return Error(at, llm::StrCat(Describe(what), ": string length ", *len, " exceeds the ", left(),
                                 " bytes left"));
  }
  if (*len > kMaxStringLength) {
    return Error(at, llm::StrCat(Describe(what), ": string length ", *len, " exceeds the limit of ",
                                 kMaxStringLength, " bytes"));
  }
  std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(*len));
  pos_ += static_cast<size_t>(*len);
  return s;
}

absl::Status Parser::Parse(File& file) {
  file.alignment_ = kDefaultAlignment;  // until general.alignment says otherwise
  if (absl::Status s = ParseHeader(file); !s.ok()) return s;

  // Each kv needs at least kMinKvBytes, so n_kv_ <= left() / kMinKvBytes was
  // checked in ParseHeader before this reservation.
  file.metadata_.reserve(static_cast<size_t>(n_kv_));
  file.storage_->key_index.reserve(static_cast<size_t>(n_kv_));
  for (uint64_t i = 0; i < n_kv_; ++i) {
    if (absl::Status s = ParseKv(file, i); !s.ok()) return s;
  }

  // Re-bound the tensor count by what is left now that the metadata is read.
  if (n_tensors_ > left() / kMinTensorInfoBytes) {
    return Error(kTensorCountOffset,
                 llm::StrCat("tensor_count ", n_tensors_, " cannot fit in the ", left(),
                             " bytes left after the metadata (each tensor info takes at "
                             "least ",
                             kMinTensorInfoBytes, " bytes)"));
  }
  file.tensors_.reserve(static_cast<size_t>(n_tensors_));
  file.storage_->tensor_index.reserve(static_cast<size_t>(n_tensors_));
  offset_fields_.reserve(static_cast<size_t>(n_tensors_));
  uint64_t expected_offset = 0;
  for (uint64_t i = 0; i < n_tensors_; ++i) {
    if (absl::Status s = ParseTensorInfo(file, i, &expected_offset); !s.ok()) return s;
  }
  return LocateTensorData(file);
}

absl::Status Parser::ParseHeader(File& file) {
  if (size_ < 4) {
    return Error(0, llm::StrCat("truncated: the magic needs 4 bytes but the file has ", size_));
  }
  const auto magic = static_cast<uint32_t>(LoadLE(data_, 4));
  if (magic != kMagic) {
    return Error(0,
                 absl::StrFormat("bad magic 0x%08x (expected \"GGUF\"): not a GGUF file", magic));
  }
  pos_ = 4;
  const uint64_t version_at = pos_;
  absl::StatusOr<uint32_t> version = ReadU32("the version");
  if (!version.ok()) return version.status();
  if (*version != 0 && (*version & 0xFFFF) == 0) {
    return Error(version_at,
                 absl::StrFormat("version field 0x%08x looks byte-swapped: big-endian GGUF files "
                                 "are not supported",
                                 *version));
  }
  if (*version == 1) {
    return Error(version_at,
                 "GGUF version 1 (u32 counts and lengths) is not supported; expected 2 or 3");
  }
  if (*version != 2 && *version != 3) {
    return Error(version_at,
                 llm::StrCat("unsupported GGUF version ", *version, "; expected 2 or 3"));
  }
  file.version_ = *version;

  const uint64_t tensor_count_at = pos_;
  absl::StatusOr<uint64_t> n_tensors = ReadU64("tensor_count");
  if (!n_tensors.ok()) return n_tensors.status();
  const uint64_t kv_count_at = pos_;
  absl::StatusOr<uint64_t> n_kv = ReadU64("kv_count");
  if (!n_kv.ok()) return n_kv.status();

  // Bound both counts by the bytes that remain: every kv and every tensor info
  // has a minimum encoded size. Divisions, so nothing can overflow.
  if (*n_kv > left() / kMinKvBytes) {
    return Error(kv_count_at, llm::StrCat("kv_count ", *n_kv, " cannot fit in the ", left(),
                                          " bytes left (each key/value takes at least ",
                                          kMinKvBytes, " bytes)"));
  }
  const uint64_t after_kvs = left() - *n_kv * kMinKvBytes;
  if (*n_tensors > after_kvs / kMinTensorInfoBytes) {
    return Error(tensor_count_at,
                 llm::StrCat("tensor_count ", *n_tensors, " cannot fit in the ", after_kvs,
                             " bytes left after ", *n_kv,
                             " minimal key/values (each tensor info takes at least ",
                             kMinTensorInfoBytes, " bytes)"));
  }
  n_tensors_ = *n_tensors;
  n_kv_ = *n_kv;
  return absl::OkStatus();
}

absl::Status Parser::ParseKv(File& file, uint64_t index) {
  const uint64_t key_at = pos_;
  absl::StatusOr<std::string_view> key =
      ReadString([&] { return llm::StrCat("key of metadata entry ", index); });
  if (!key.ok()) return key.status();
  if (key->empty()) {
    return Error(key_at, llm::StrCat("metadata entry ", index, " has an empty key"));
  }
  if (file.storage_->key_index.contains(*key)) {
    return Error(key_at, llm::StrCat("duplicate key '", *key, "'"));
  }

  Value v;
  v.key_ = *key;
  const uint64_t type_at = pos_;
  absl::StatusOr<uint32_t> type =
      ReadU32([&] { return llm::StrCat("the value type of key '", *key, "'"); });
  if (!type.ok()) return type.status();
  const uint64_t value_at = pos_;
  if (absl::Status s = ParseValue(v, *type, type_at); !s.ok()) return s;
  if (v.key_ == kAlignmentKey) {
    if (absl::Status s = ApplyAlignment(file, v, value_at); !s.ok()) return s;
  }
  file.storage_->key_index.emplace(v.key_, file.metadata_.size());
  file.metadata_.push_back(v);
  return absl::OkStatus();
}

absl::Status Parser::ParseValue(Value& v, uint32_t type, uint64_t type_offset) {
  if (!IsKnownValueType(type)) {
    return Error(type_offset, llm::StrCat("key '", v.key_, "': unknown value type ", type));
  }
  v.type_ = static_cast<ValueType>(type);
  if (v.type_ == ValueType::kString) {
    absl::StatusOr<std::string_view> s =
        ReadString([&] { return llm::StrCat("the value of key '", v.key_, "'"); });
    if (!s.ok()) return s.status();
    v.payload_ = *s;
    return absl::OkStatus();
  }
  if (v.type_ == ValueType::kArray) return ParseArray(v);

  const size_t n = ScalarSize(type);
  if (absl::Status s = Need(n,
                            [&] {
                              return llm::StrCat("the ", ValueTypeName(v.type_), " value of key '",
                                                 v.key_, "'");
                            });
      !s.ok()) {
    return s;
  }
  const uint8_t* p = data_ + pos_;
  if (IsFloat(v.type_)) {
    v.fbits_ = DecodeFloat(v.type_, p);
  } else {
    // Integers (sign-extended) and BOOL (any non-zero byte reads as true, as
    // in llama.cpp).
    v.bits_ = v.type_ == ValueType::kBool ? p[0] : DecodeIntegerBits(v.type_, p);
  }
  v.payload_ = std::string_view(reinterpret_cast<const char*>(p), n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status Parser::ParseArray(Value& v) {
  const uint64_t elem_type_at = pos_;
  absl::StatusOr<uint32_t> elem_type =
      ReadU32([&] { return llm::StrCat("the element type of array '", v.key_, "'"); });
  if (!elem_type.ok()) return elem_type.status();
  if (*elem_type == static_cast<uint32_t>(ValueType::kArray)) {
    return Error(elem_type_at, llm::StrCat("key '", v.key_, "': nested arrays are not supported"));
  }
  if (!IsKnownValueType(*elem_type)) {
    return Error(elem_type_at,
                 llm::StrCat("key '", v.key_, "': unknown array element type ", *elem_type));
  }
  v.array_type_ = static_cast<ValueType>(*elem_type);

  const uint64_t count_at = pos_;
  absl::StatusOr<uint64_t> count =
      ReadU64([&] { return llm::StrCat("the count of array '", v.key_, "'"); });
  if (!count.ok()) return count.status();
  const bool strings = v.array_type_ == ValueType::kString;
  // Minimum bytes per element: the scalar size, or the u64 length of a string.
  const uint64_t elem_bytes = strings ? kMinStringBytes : ScalarSize(*elem_type);
  if (*count > left() / elem_bytes) {
    return Error(count_at,
                 llm::StrCat("key '", v.key_, "': array of ", *count, " ",
                             ValueTypeName(v.array_type_), " elements needs at least ",
                             strings ? "8 bytes each" : llm::StrCat(elem_bytes, " bytes each"),
                             " but only ", left(), " bytes are left"));
  }
  if (*count > kMaxArrayElements) {
    return Error(count_at, llm::StrCat("key '", v.key_, "': array count ", *count,
                                       " exceeds the limit of ", kMaxArrayElements));
  }
  v.array_size_ = *count;

  const size_t start = pos_;
  if (strings) {
    // Walk every element so that AsStringArray() can trust the lengths.
    for (uint64_t i = 0; i < *count; ++i) {
      absl::StatusOr<std::string_view> s =
          ReadString([&] { return llm::StrCat("element ", i, " of array '", v.key_, "'"); });
      if (!s.ok()) return s.status();
    }
  } else {
    pos_ += static_cast<size_t>(*count * elem_bytes);  // bounded by left() above
  }
  v.payload_ = std::string_view(reinterpret_cast<const char*>(data_ + start), pos_ - start);
  return absl::OkStatus();
}

absl::Status Parser::ApplyAlignment(File& file, const Value& v, uint64_t value_offset) {
  if (v.type_ != ValueType::kUint32) {
    return Error(value_offset,
                 llm::StrCat(kAlignmentKey, " has type ", DescribeType(v.type_, v.array_type_),
                             "; it must be UINT32"));
  }
  const uint64_t a = v.bits_;
  if (a == 0 || (a & (a - 1)) != 0) {
    return Error(value_offset, llm::StrCat(kAlignmentKey, " ", a, " is not a power of two"));
  }
  if (a > kMaxAlignment) {
    return Error(value_offset,
                 llm::StrCat(kAlignmentKey, " ", a, " exceeds the limit of ", kMaxAlignment));
  }
  file.alignment_ = static_cast<uint32_t>(a);
  return absl::OkStatus();
}

absl::Status Parser::ParseTensorInfo(File& file, uint64_t index, uint64_t* expected_offset) {
  const uint64_t info_at = pos_;
  absl::StatusOr<std::string_view> name =
      ReadString([&] { return llm::StrCat("name of tensor ", index); });
  if (!name.ok()) return name.status();
  if (name->size() > kMaxTensorNameBytes) {
    return Error(info_at, llm::StrCat("tensor ", index, ": name is ", name->size(),
                                      " bytes; the limit is ", kMaxTensorNameBytes));
  }
  if (file.storage_->tensor_index.contains(*name)) {
    return Error(info_at, llm::StrCat("duplicate tensor name '", *name, "'"));
  }
  TensorInfo t;
  t.name = *name;
  const std::string what = llm::StrCat("tensor '", *name, "'");

  const uint64_t n_dims_at = pos_;
  absl::StatusOr<uint32_t> n_dims = ReadU32([&] { return llm::StrCat("n_dims of ", what); });
  if (!n_dims.ok()) return n_dims.status();
  if (*n_dims == 0 || *n_dims > kMaxDims) {
    return Error(n_dims_at, llm::StrCat(what, ": n_dims ", *n_dims, " is outside 1..", kMaxDims));
  }
  t.n_dims = *n_dims;
  int64_t elements = 1;
  for (uint32_t j = 0; j < *n_dims; ++j) {
    const uint64_t ne_at = pos_;
    absl::StatusOr<uint64_t> raw = ReadU64([&] { return llm::StrCat("ne[", j, "] of ", what); });
    if (!raw.ok()) return raw.status();
    const auto ne = static_cast<int64_t>(*raw);
    if (ne <= 0) {
      return Error(ne_at, llm::StrCat(what, ": ne[", j, "] = ", ne, " must be positive"));
    }
    if (__builtin_mul_overflow(elements, ne, &elements)) {
      return Error(ne_at,
                   llm::StrCat(what, ": the element count overflows int64 at ne[", j, "] = ", ne));
    }
    t.ne[j] = ne;
  }

  const uint64_t type_at = pos_;
  absl::StatusOr<uint32_t> type = ReadU32([&] { return llm::StrCat("the type of ", what); });
  if (!type.ok()) return type.status();
  const TensorTypeTraits* traits = FindTensorTypeTraits(*type);
  if (traits == nullptr) {
    return Error(type_at, llm::StrCat(what, ": unknown or unsupported ggml type ", *type));
  }
  t.ggml_type = *type;
  if (t.ne[0] % traits->block_elements != 0) {
    return Error(type_at,
                 llm::StrCat(what, ": ne[0] = ", t.ne[0], " is not a multiple of the block size ",
                             traits->block_elements, " of type ", traits->name));
  }
  // bytes = (ne0 / block) * block_bytes * ne1 * ne2 * ne3, all checked.
  uint64_t bytes = static_cast<uint64_t>(t.ne[0]) / traits->block_elements;
  bool overflow = __builtin_mul_overflow(bytes, uint64_t{traits->block_bytes}, &bytes);
  for (int j = 1; j < 4; ++j) {
    overflow = overflow || __builtin_mul_overflow(bytes, static_cast<uint64_t>(t.ne[j]), &bytes);
  }
  if (overflow) {
    return Error(type_at, llm::StrCat(what, ": the byte size overflows 64 bits"));
  }
  t.size_bytes = bytes;

  const uint64_t offset_at = pos_;
  absl::StatusOr<uint64_t> offset = ReadU64([&] { return llm::StrCat("the offset of ", what); });
  if (!offset.ok()) return offset.status();
  if (*offset % file.alignment_ != 0) {
    return Error(offset_at, llm::StrCat(what, ": offset ", *offset,
                                        " is not a multiple of the alignment ", file.alignment_));
  }
  if (*offset != *expected_offset) {
    return Error(offset_at,
                 llm::StrCat(what, ": offset ", *offset, " is not the expected ", *expected_offset,
                             " (tensor data must be contiguous in tensor order)"));
  }
  t.offset = *offset;
  uint64_t padded;
  if (!AlignUp(bytes, file.alignment_, &padded) ||
      __builtin_add_overflow(*expected_offset, padded, expected_offset)) {
    return Error(offset_at, llm::StrCat(what, ": the data section size overflows 64 bits"));
  }

  file.storage_->tensor_index.emplace(t.name, file.tensors_.size());
  file.tensors_.push_back(t);
  offset_fields_.push_back(offset_at);
  return absl::OkStatus();
}

absl::Status Parser::LocateTensorData(File& file) {
  if (file.tensors_.empty()) return absl::OkStatus();  // vocab-only: no padding, no data
  uint64_t data_start;
  if (!AlignUp(pos_, file.alignment_, &data_start) || data_start > size_) {
    return Error(pos_, llm::StrCat("truncated: the file (", size_,
                                   " bytes) ends before the data section, which starts at the "
                                   "next multiple of ",
                                   file.alignment_));
  }
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    TensorInfo& t = file.tensors_[i];
    uint64_t begin, end;
    if (__builtin_add_overflow(data_start, t.offset, &begin) ||
        __builtin_add_overflow(begin, t.size_bytes, &end) || end > size_) {
      return Error(offset_fields_[i],
                   llm::StrCat("tensor '", t.name, "': data at file offset ", data_start, " + ",
                               t.offset, " of ", t.size_bytes,
                               " bytes extends past the end of the file (", size_, " bytes)"));
    }
    t.data = data_ + begin;
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Construction.

absl::StatusOr<std::unique_ptr<File>> File::Open(const std::string& path) {
  absl::StatusOr<MappedFile> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<File> file(new File());
  file->name_ = path;
  file->storage_ = std::make_unique<Storage>();
  file->storage_->mapped = *std::move(mapped);
  const std::span<const uint8_t> bytes = file->storage_->mapped.bytes();
  Parser parser(bytes.data(), bytes.size(), file->name_);
  if (absl::Status s = parser.Parse(*file); !s.ok()) return s;
  return file;
}

absl::StatusOr<std::unique_ptr<File>> File::FromBytes(std::string bytes, std::string name) {
  std::unique_ptr<File> file(new File());
  file->name_ = std::move(name);
  file->storage_ = std::make_unique<Storage>();
  // Move first: views must point into the storage, not into `bytes`.
  file->storage_->bytes = std::move(bytes);
  const std::string& owned = file->storage_->bytes;
  Parser parser(reinterpret_cast<const uint8_t*>(owned.data()), owned.size(), file->name_);
  if (absl::Status s = parser.Parse(*file); !s.ok()) return s;
  return file;
}

}  // namespace llm::gguf
