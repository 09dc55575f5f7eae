#include "common/gguf/gguf.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/gguf/gguf_writer.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gguf {
namespace {

using ::llm::gguf::testing::GgufBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kName[] = "test.gguf";

// ---------------------------------------------------------------------------
// Helpers.

// The message as a std::string (Debian's Abseil has its own string_view).
std::string Msg(const absl::Status& s) { return std::string(s.message()); }

absl::StatusOr<std::unique_ptr<File>> Parse(const std::string& bytes) {
  return File::FromBytes(bytes, kName);
}

// Expects parsing `bytes` to fail with InvalidArgument "<name>: offset N: ..."
// whose message contains `substr`.
void ExpectParseError(const std::string& bytes, std::string_view substr) {
  absl::StatusOr<std::unique_ptr<File>> f = Parse(bytes);
  ASSERT_FALSE(f.ok()) << "parsed although it should contain: " << substr;
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << f.status();
  EXPECT_THAT(Msg(f.status()), StartsWith(llm::StrCat(kName, ": offset ")));
  EXPECT_THAT(Msg(f.status()), HasSubstr(substr));
}

void PutU32(std::string& b, size_t at, uint32_t v) {
  ASSERT_LE(at + 4, b.size());
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}

void PutU64(std::string& b, size_t at, uint64_t v) {
  ASSERT_LE(at + 8, b.size());
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetU64(const std::string& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
  }
  return v;
}

// Offset just past the only occurrence of `needle` in `b`.
size_t After(const std::string& b, std::string_view needle) {
  const size_t p = b.find(needle);
  EXPECT_NE(p, std::string::npos) << needle;
  EXPECT_EQ(b.find(needle, p + 1), std::string::npos) << needle << " is not unique";
  return p + needle.size();
}

// Header field offsets.
constexpr size_t kVersionAt = 4;
constexpr size_t kTensorCountAt = 8;
constexpr size_t kKvCountAt = 16;
constexpr size_t kHeaderBytes = 24;

std::string Bytes(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

// A small valid file with metadata of several kinds and three tensors; its last
// tensor ends exactly at the end of the file (no trailing padding), so every
// strict prefix is invalid.
std::string SmallModel() {
  GgufBuilder b;
  b.AddString("general.architecture", "llama")
      .AddUint32("llama.block_count", 1)
      .AddFloat32("llama.rope.freq_base", 10000.f)
      .AddStringArray("tokenizer.ggml.tokens", {"a", "bc", ""})
      .AddInt32Array("tokenizer.ggml.token_type", {1, 2, 3})
      .AddBool("tokenizer.ggml.add_bos_token", true);
  b.AddTensor("tensor_a", TensorType::kF32, {3, 2}, Bytes(24, 1));
  b.AddTensor("tensor_b", TensorType::kQ8_0, {32, 1}, Bytes(34, 2));
  b.AddTensor("tensor_c", TensorType::kF32, {8}, Bytes(32, 3));
  return b.Serialize();
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(GgufTest, ScalarRoundTrip) {
  GgufBuilder b;
  b.AddUint8("u8", 255)
      .AddInt8("i8", -128)
      .AddUint16("u16", 65535)
      .AddInt16("i16", -32768)
      .AddUint32("u32", 4294967295u)
      .AddInt32("i32", std::numeric_limits<int32_t>::min())
      .AddUint64("u64", std::numeric_limits<uint64_t>::max())
      .AddInt64("i64", std::numeric_limits<int64_t>::min())
      .AddFloat32("f32", 1.5f)
      .AddFloat64("f64", -2.25e300)
      .AddBool("t", true)
      .AddBool("f", false)
      .AddString("s", "hello")
      .AddString("empty", "")
      .AddString("binary", std::string_view("a\0b\xff", 4));
  auto f = Parse(b.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  const File& file = **f;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.name(), kName);
  EXPECT_TRUE(file.tensors().empty());
  ASSERT_EQ(file.metadata().size(), 15u);

  // File order is kept.
  std::vector<std::string_view> keys;
  for (const Value& v : file.metadata()) keys.push_back(v.key());
  EXPECT_THAT(keys, ElementsAre("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64",
                                "t", "f", "s", "empty", "binary"));

  EXPECT_EQ(file.Find("u8")->type(), ValueType::kUint8);
  EXPECT_EQ(*file.Find("u8")->AsUint(), 255u);
  EXPECT_EQ(*file.Find("u8")->AsInt(), 255);
  EXPECT_EQ(*file.Find("i8")->AsInt(), -128);
  EXPECT_EQ(file.Find("i8")->type(), ValueType::kInt8);
  EXPECT_EQ(*file.Find("u16")->AsUint(), 65535u);
  EXPECT_EQ(*file.Find("i16")->AsInt(), -32768);
  EXPECT_EQ(*file.Find("u32")->AsUint(), 4294967295u);
  EXPECT_EQ(*file.Find("i32")->AsInt(), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*file.Find("u64")->AsUint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*file.Find("i64")->AsInt(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*file.Find("f32")->AsFloat(), 1.5);
  EXPECT_EQ(file.Find("f32")->type(), ValueType::kFloat32);
  EXPECT_EQ(*file.Find("f64")->AsFloat(), -2.25e300);
  EXPECT_EQ(*file.Find("t")->AsBool(), true);
  EXPECT_EQ(*file.Find("f")->AsBool(), false);
  EXPECT_EQ(*file.Find("s")->AsString(), "hello");
  EXPECT_EQ(*file.Find("empty")->AsString(), "");
  EXPECT_EQ(*file.Find("binary")->AsString(), std::string_view("a\0b\xff", 4));

  // Integers convert to float; typed getters.
  EXPECT_EQ(*file.Find("i16")->AsFloat(), -32768.0);
  EXPECT_EQ(*file.Find("u64")->AsFloat(), 18446744073709551615.0);
  EXPECT_EQ(*file.GetString("s"), "hello");
  EXPECT_EQ(*file.GetUint("u32"), 4294967295u);
  EXPECT_EQ(*file.GetFloat("f32"), 1.5);
  EXPECT_EQ(*file.GetBool("t"), true);
  EXPECT_EQ(file.Find("missing"), nullptr);
  EXPECT_EQ(file.FindTensor("missing"), nullptr);
}

TEST(GgufTest, ArrayRoundTrip) {
  GgufBuilder b;
  b.AddUint8Array("u8", {0, 1, 255})
      .AddInt8Array("i8", {-128, 0, 127})
      .AddUint16Array("u16", {0, 65535})
      .AddInt16Array("i16", {-32768, 32767})
      .AddUint32Array("u32", {0, 4294967295u})
      .AddInt32Array("i32", {std::numeric_limits<int32_t>::min(), -1, 7})
      .AddUint64Array("u64", {0, uint64_t{1} << 63})
      .AddInt64Array("i64", {std::numeric_limits<int64_t>::min(), 42})
      .AddFloat32Array("f32", {0.5f, -1.f, 3e38f})
      .AddFloat64Array("f64", {0.25, -1e-300})
      .AddBoolArray("bool", {true, false, true})
      .AddStringArray("str", {"x", "", "hello world", std::string("\0z", 2)})
      .AddInt32Array("empty_i32", {})
      .AddStringArray("empty_str", {});
  auto f = Parse(b.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  const File& file = **f;

  const Value* v = file.Find("u8");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->type(), ValueType::kArray);
  EXPECT_EQ(v->array_type(), ValueType::kUint8);
  EXPECT_EQ(v->array_size(), 3u);
  EXPECT_THAT(*v->AsIntArray(), ElementsAre(0, 1, 255));
  EXPECT_THAT(*file.Find("i8")->AsIntArray(), ElementsAre(-128, 0, 127));
  EXPECT_THAT(*file.Find("u16")->AsIntArray(), ElementsAre(0, 65535));
  EXPECT_THAT(*file.Find("i16")->AsIntArray(), ElementsAre(-32768, 32767));
  EXPECT_THAT(*file.Find("u32")->AsIntArray(), ElementsAre(0, 4294967295LL));
  EXPECT_THAT(*file.Find("i32")->AsIntArray(),
              ElementsAre(std::numeric_limits<int32_t>::min(), -1, 7));
  EXPECT_THAT(*file.Find("i64")->AsIntArray(),
              ElementsAre(std::numeric_limits<int64_t>::min(), 42));
  // 2^63 does not fit in int64.
  auto u64 = file.Find("u64")->AsIntArray();
  EXPECT_EQ(u64.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(u64.status()), HasSubstr("'u64' element 1"));
  EXPECT_THAT(*file.Find("f32")->AsFloatArray(), ElementsAre(0.5f, -1.f, 3e38f));
  EXPECT_THAT(*file.Find("f64")->AsFloatArray(), ElementsAre(0.25f, static_cast<float>(-1e-300)));
  EXPECT_EQ(file.Find("bool")->array_type(), ValueType::kBool);
  EXPECT_EQ(file.Find("bool")->array_size(), 3u);
  EXPECT_THAT(*file.Find("str")->AsStringArray(),
              ElementsAre("x", "", "hello world", std::string_view("\0z", 2)));
  EXPECT_EQ(file.Find("empty_i32")->array_size(), 0u);
  EXPECT_TRUE(file.Find("empty_i32")->AsIntArray()->empty());
  EXPECT_TRUE(file.Find("empty_str")->AsStringArray()->empty());
}

TEST(GgufTest, AccessorTypeMismatches) {
  GgufBuilder b;
  b.AddInt32Array("ints", {1, 2})
      .AddUint8Array("bytes", {1, 2, 3})
      .AddFloat32Array("floats", {1.f})
      .AddStringArray("strings", {"a"})
      .AddBoolArray("bools", {true})
      .AddString("s", "x")
      .AddInt32("neg", -5)
      .AddUint64("big", std::numeric_limits<uint64_t>::max())
      .AddBool("flag", true)
      .AddFloat32("f", 2.f);
  auto f = Parse(b.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  const File& file = **f;

  auto expect_mismatch = [](const auto& result, std::string_view substr) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(result.status()), HasSubstr(substr));
  };

  // String array accessor on an int array names the key and both types.
  expect_mismatch(file.Find("ints")->AsStringArray(),
                  "key 'ints' has type ARRAY of INT32, expected ARRAY of STRING");
  expect_mismatch(file.Find("ints")->AsFloatArray(), "key 'ints' has type ARRAY of INT32");
  // The llama.cpp CVE class: a UINT8 array must not be read as float/int32.
  EXPECT_THAT(*file.Find("bytes")->AsIntArray(), ElementsAre(1, 2, 3));
  expect_mismatch(file.Find("bytes")->AsFloatArray(),
                  "key 'bytes' has type ARRAY of UINT8, expected an ARRAY of FLOAT32 or FLOAT64");
  expect_mismatch(file.Find("floats")->AsIntArray(), "key 'floats' has type ARRAY of FLOAT32");
  expect_mismatch(file.Find("strings")->AsIntArray(), "key 'strings' has type ARRAY of STRING");
  expect_mismatch(file.Find("strings")->AsFloatArray(), "ARRAY of STRING");
  expect_mismatch(file.Find("bools")->AsIntArray(), "key 'bools' has type ARRAY of BOOL");
  // Scalars versus arrays.
  expect_mismatch(file.Find("s")->AsIntArray(), "key 's' has type STRING");
  expect_mismatch(file.Find("ints")->AsString(), "key 'ints' has type ARRAY of INT32");
  expect_mismatch(file.Find("ints")->AsUint(), "key 'ints'");
  expect_mismatch(file.Find("s")->AsUint(), "key 's' has type STRING");
  expect_mismatch(file.Find("s")->AsFloat(), "key 's' has type STRING");
  expect_mismatch(file.Find("s")->AsBool(), "key 's' has type STRING, expected BOOL");
  expect_mismatch(file.Find("f")->AsString(), "key 'f' has type FLOAT32, expected STRING");
  expect_mismatch(file.Find("f")->AsUint(), "key 'f' has type FLOAT32");
  expect_mismatch(file.Find("f")->AsInt(), "key 'f' has type FLOAT32");
  expect_mismatch(file.Find("flag")->AsUint(), "key 'flag' has type BOOL");
  expect_mismatch(file.Find("flag")->AsFloat(), "key 'flag' has type BOOL");
  expect_mismatch(file.Find("neg")->AsUint(), "key 'neg' holds the negative value -5");
  EXPECT_EQ(*file.Find("neg")->AsInt(), -5);
  EXPECT_EQ(*file.Find("neg")->AsFloat(), -5.0);
  expect_mismatch(file.Find("big")->AsInt(), "key 'big' holds 18446744073709551615");

  // File getters: NotFound names the key and file; mismatches name the file.
  auto missing = file.GetString("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(missing.status()), HasSubstr("test.gguf: key 'nope' not found"));
  EXPECT_EQ(file.GetUint("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file.GetFloat("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(file.GetBool("nope").status().code(), absl::StatusCode::kNotFound);
  expect_mismatch(file.GetString("f"), "test.gguf: key 'f' has type FLOAT32");
  expect_mismatch(file.GetUint("s"), "test.gguf: key 's'");
  expect_mismatch(file.GetFloat("s"), "test.gguf: key 's'");
  expect_mismatch(file.GetBool("f"), "test.gguf: key 'f'");
}

TEST(GgufTest, ValueTypeNames) {
  EXPECT_EQ(ValueTypeName(ValueType::kUint8), "UINT8");
  EXPECT_EQ(ValueTypeName(ValueType::kString), "STRING");
  EXPECT_EQ(ValueTypeName(ValueType::kArray), "ARRAY");
  EXPECT_EQ(ValueTypeName(ValueType::kFloat64), "FLOAT64");
  EXPECT_EQ(ValueTypeName(static_cast<ValueType>(99)), "UNKNOWN");
}

TEST(GgufTest, TensorTypeTraits) {
  struct Row {
    TensorType type;
    std::string_view name;
    uint32_t block_elements, block_bytes;
  };
  const Row rows[] = {
      {TensorType::kF32, "F32", 1, 4},           {TensorType::kF16, "F16", 1, 2},
      {TensorType::kBF16, "BF16", 1, 2},         {TensorType::kQ4_0, "Q4_0", 32, 18},
      {TensorType::kQ4_1, "Q4_1", 32, 20},       {TensorType::kQ5_0, "Q5_0", 32, 22},
      {TensorType::kQ5_1, "Q5_1", 32, 24},       {TensorType::kQ8_0, "Q8_0", 32, 34},
      {TensorType::kQ8_1, "Q8_1", 32, 36},       {TensorType::kQ2_K, "Q2_K", 256, 84},
      {TensorType::kQ3_K, "Q3_K", 256, 110},     {TensorType::kQ4_K, "Q4_K", 256, 144},
      {TensorType::kQ5_K, "Q5_K", 256, 176},     {TensorType::kQ6_K, "Q6_K", 256, 210},
      {TensorType::kQ8_K, "Q8_K", 256, 292},     {TensorType::kIQ2_XXS, "IQ2_XXS", 256, 66},
      {TensorType::kIQ2_XS, "IQ2_XS", 256, 74},  {TensorType::kIQ3_XXS, "IQ3_XXS", 256, 98},
      {TensorType::kIQ1_S, "IQ1_S", 256, 50},    {TensorType::kIQ4_NL, "IQ4_NL", 32, 18},
      {TensorType::kIQ3_S, "IQ3_S", 256, 110},   {TensorType::kIQ2_S, "IQ2_S", 256, 82},
      {TensorType::kIQ4_XS, "IQ4_XS", 256, 136}, {TensorType::kI8, "I8", 1, 1},
      {TensorType::kI16, "I16", 1, 2},           {TensorType::kI32, "I32", 1, 4},
      {TensorType::kI64, "I64", 1, 8},           {TensorType::kF64, "F64", 1, 8},
      {TensorType::kIQ1_M, "IQ1_M", 256, 56},    {TensorType::kTQ1_0, "TQ1_0", 256, 54},
      {TensorType::kTQ2_0, "TQ2_0", 256, 66},    {TensorType::kMXFP4, "MXFP4", 32, 17},
      {TensorType::kNVFP4, "NVFP4", 64, 36},     {TensorType::kQ1_0, "Q1_0", 128, 18},
      {TensorType::kQ2_0, "Q2_0", 64, 18},
  };
  for (const Row& r : rows) {
    const TensorTypeTraits* t = FindTensorTypeTraits(static_cast<uint32_t>(r.type));
    ASSERT_NE(t, nullptr) << r.name;
    EXPECT_EQ(t->name, r.name);
    EXPECT_EQ(t->block_elements, r.block_elements) << r.name;
    EXPECT_EQ(t->block_bytes, r.block_bytes) << r.name;
  }
  // Removed (Q4_2, Q4_3, repacked) and unsupported ids.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_EQ(FindTensorTypeTraits(id), nullptr) << id;
  }
}

TEST(GgufTest, TensorsRoundTrip) {
  const std::string a = Bytes(24, 1), b = Bytes(34 * 2, 2), c = Bytes(2 * 4 * 3 * 2 * 2, 3);
  const std::vector<float> d = {1.f, 2.f, 3.f, 4.f};
  GgufBuilder builder;
  builder.AddString("general.architecture", "llama");
  builder.AddTensor("a", TensorType::kF32, {3, 2}, a);
  builder.AddTensor("blk.0.attn_q.weight", TensorType::kQ8_0, {64}, b);
  builder.AddTensor("c", TensorType::kBF16, {2, 4, 3, 2}, c);
  builder.AddTensorF32("d", {2, 2}, d);
  builder.AddTensor("zeros", TensorType::kQ4_K, {256, 2});
  const std::string bytes = builder.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  const File& file = **f;
  ASSERT_EQ(file.tensors().size(), 5u);

  const TensorInfo& ta = file.tensors()[0];
  EXPECT_EQ(ta.name, "a");
  EXPECT_EQ(ta.n_dims, 2u);
  EXPECT_THAT(ta.ne, ElementsAre(3, 2, 1, 1));
  EXPECT_EQ(ta.ggml_type, 0u);
  EXPECT_EQ(ta.offset, 0u);
  EXPECT_EQ(ta.size_bytes, 24u);
  EXPECT_EQ(ta.elements(), 6);
  EXPECT_EQ(ta.rows(), 2);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(ta.data), ta.size_bytes), a);

  const TensorInfo* tb = file.FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(tb, nullptr);
  EXPECT_EQ(tb, &file.tensors()[1]);
  EXPECT_EQ(tb->ggml_type, static_cast<uint32_t>(TensorType::kQ8_0));
  EXPECT_EQ(tb->n_dims, 1u);
  EXPECT_EQ(tb->offset, 32u);  // 24 bytes rounded up to 32
  EXPECT_EQ(tb->size_bytes, 68u);
  EXPECT_EQ(tb->rows(), 1);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(tb->data), tb->size_bytes), b);

  const TensorInfo* tc = file.FindTensor("c");
  ASSERT_NE(tc, nullptr);
  EXPECT_EQ(tc->n_dims, 4u);
  EXPECT_THAT(tc->ne, ElementsAre(2, 4, 3, 2));
  EXPECT_EQ(tc->offset, 32u + 96u);
  EXPECT_EQ(tc->size_bytes, 96u);
  EXPECT_EQ(tc->elements(), 48);
  EXPECT_EQ(tc->rows(), 24);
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(tc->data), tc->size_bytes), c);

  const TensorInfo* td = file.FindTensor("d");
  ASSERT_NE(td, nullptr);
  float got[4];
  std::memcpy(got, td->data, sizeof(got));
  EXPECT_THAT(got, ElementsAre(1.f, 2.f, 3.f, 4.f));

  const TensorInfo* tz = file.FindTensor("zeros");
  ASSERT_NE(tz, nullptr);
  EXPECT_EQ(tz->size_bytes, 2u * 144u);
  EXPECT_EQ(tz->size_bytes, GgufBuilder::TensorBytes(TensorType::kQ4_K, {256, 2}));

  // The data section starts at a multiple of the alignment, and each tensor
  // is at data_start + offset in the serialized bytes.
  const size_t data_start = bytes.find(a);
  ASSERT_NE(data_start, std::string::npos);
  EXPECT_EQ(data_start % 32, 0u);
  for (const TensorInfo& t : file.tensors()) {
    EXPECT_EQ(bytes.compare(data_start + t.offset, t.size_bytes,
                            reinterpret_cast<const char*>(t.data), t.size_bytes),
              0)
        << t.name;
  }
}

TEST(GgufTest, CustomAlignment) {
  for (uint32_t align : {1u, 8u, 64u, 4096u, 1u << 20}) {
    SCOPED_TRACE(align);
    GgufBuilder b;
    b.SetAlignment(align);
    b.AddTensor("x", TensorType::kF32, {5}, Bytes(20, 9));
    b.AddTensor("y", TensorType::kF16, {3}, Bytes(6, 10));
    const std::string bytes = b.Serialize();
    auto f = Parse(bytes);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->alignment(), align);
    const TensorInfo& y = (*f)->tensors()[1];
    EXPECT_EQ(y.offset, (20 + align - 1) / align * align);
    EXPECT_EQ(y.offset % align, 0u);
    const size_t data_start = bytes.find(Bytes(20, 9));
    EXPECT_EQ(data_start % align, 0u);
    EXPECT_EQ(y.data, (*f)->tensors()[0].data + y.offset);
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(y.data), 6), Bytes(6, 10));
  }
}

TEST(GgufTest, Version2IsAccepted) {
  std::string bytes = SmallModel();
  PutU32(bytes, kVersionAt, 2);
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufTest, VocabOnlyFileHasNoDataSection) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "gpt2");
  const std::string bytes = b.Serialize();
  auto f = Parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->tensors().empty());
  // No padding after the last kv: 24 header + 8 + 20 key + 4 type + 8 + 4.
  EXPECT_EQ(bytes.size(), kHeaderBytes + 8 + 20 + 4 + 8 + 4);
}

TEST(GgufTest, EmptyFileWithHeaderOnly) {
  auto f = Parse(GgufBuilder().Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->metadata().empty());
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufTest, OpenFromDisk) {
  const std::string path = ::testing::TempDir() + "/gguf_test_open.gguf";
  GgufBuilder b;
  b.AddString("general.name", "disk");
  b.AddTensorF32("w", {2}, std::vector<float>{7.f, 8.f});
  ASSERT_TRUE(b.WriteTo(path).ok());
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->name(), path);
  EXPECT_EQ(*(*f)->GetString("general.name"), "disk");
  float w[2];
  std::memcpy(w, (*f)->FindTensor("w")->data, sizeof(w));
  EXPECT_THAT(w, ElementsAre(7.f, 8.f));
  std::filesystem::remove(path);

  auto missing = File::Open(path);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);

  // Errors from Open name the path.
  std::string bad = b.Serialize();
  bad[0] = 'X';
  const std::string bad_path = ::testing::TempDir() + "/gguf_test_bad.gguf";
  {
    std::ofstream out(bad_path, std::ios::binary | std::ios::trunc);
    out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
  }
  auto bad_file = File::Open(bad_path);
  EXPECT_EQ(bad_file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(bad_file.status()), StartsWith(bad_path + ": offset 0: bad magic"));
  std::filesystem::remove(bad_path);
}

// ---------------------------------------------------------------------------
// Malformed files.

TEST(GgufMalformedTest, BadMagic) {
  std::string bytes = SmallModel();
  bytes[3] = 'X';
  ExpectParseError(bytes, "offset 0: bad magic 0x58554747");
  ExpectParseError("", "truncated: the magic needs 4 bytes but the file has 0");
  ExpectParseError("GGU", "truncated: the magic");
}

TEST(GgufMalformedTest, Versions) {
  std::string bytes = SmallModel();
  PutU32(bytes, kVersionAt, 1);
  ExpectParseError(bytes, "offset 4: GGUF version 1");
  PutU32(bytes, kVersionAt, 4);
  ExpectParseError(bytes, "offset 4: unsupported GGUF version 4");
  PutU32(bytes, kVersionAt, 0);
  ExpectParseError(bytes, "unsupported GGUF version 0");
  PutU32(bytes, kVersionAt, 0x03000000);  // version 3 written big-endian
  ExpectParseError(bytes, "big-endian GGUF files are not supported");
  PutU32(bytes, kVersionAt, 0x02000000);
  ExpectParseError(bytes, "big-endian");
}

TEST(GgufMalformedTest, EveryTruncationFailsCleanly) {
  const std::string full = SmallModel();
  {
    auto f = Parse(full);
    ASSERT_TRUE(f.ok()) << f.status();
    const TensorInfo& last = (*f)->tensors().back();
    // The file ends exactly at the last tensor's data.
    const size_t data_start = full.find(Bytes(24, 1));
    ASSERT_EQ(full.size(), data_start + last.offset + last.size_bytes);
  }
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    ExpectParseError(full.substr(0, n), "");
  }
  // Some cut points give their specific messages.
  ExpectParseError(full.substr(0, 10), "truncated: tensor_count needs 8 bytes but only 2 are left");
  ExpectParseError(full.substr(0, full.size() - 1), "extends past the end of the file");
}

TEST(GgufMalformedTest, EveryTruncationOfVocabOnlyFileFails) {
  GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "gpt2")
      .AddStringArray("tokenizer.ggml.tokens", {"a", "b", "cd"})
      .AddFloat32Array("tokenizer.ggml.scores", {1.f, 2.f, 3.f})
      .AddUint32("tokenizer.ggml.bos_token_id", 1);
  const std::string full = b.Serialize();
  ASSERT_TRUE(Parse(full).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE(n);
    ExpectParseError(full.substr(0, n), "");
  }
}

TEST(GgufMalformedTest, HugeKvCount) {
  std::string bytes = SmallModel();
  PutU64(bytes, kKvCountAt, uint64_t{1} << 40);
  ExpectParseError(bytes, "offset 16: kv_count 1099511627776 cannot fit in the");
  PutU64(bytes, kKvCountAt, std::numeric_limits<uint64_t>::max());
  ExpectParseError(bytes, "kv_count 18446744073709551615 cannot fit");
  // Just one more than the file can hold is also caught before reading.
  PutU64(bytes, kKvCountAt, (bytes.size() - kHeaderBytes) / 12 + 1);
  ExpectParseError(bytes, "kv_count");
}

TEST(GgufMalformedTest, HugeTensorCount) {
  std::string bytes = SmallModel();
  PutU64(bytes, kTensorCountAt, uint64_t{1} << 40);
  ExpectParseError(bytes, "offset 8: tensor_count 1099511627776 cannot fit in the");
  PutU64(bytes, kTensorCountAt, std::numeric_limits<uint64_t>::max());
  ExpectParseError(bytes, "tensor_count 18446744073709551615 cannot fit");
  // Passes the header bound, fails against what is left after the metadata.
  PutU64(bytes, kTensorCountAt, 20);
  ExpectParseError(bytes, "bytes left after the metadata");
}

TEST(GgufMalformedTest, HugeStringLengths) {
  const std::string good = SmallModel();
  // The first key's length field is right after the header.
  std::string bytes = good;
  PutU64(bytes, kHeaderBytes, std::numeric_limits<uint64_t>::max());
  ExpectParseError(bytes, llm::StrCat("offset 24: key of metadata entry 0: string length "
                                      "18446744073709551615 exceeds the ",
                                      good.size() - 32, " bytes left"));
  // Lengths where pos + len would wrap around.
  for (uint64_t len :
       {std::numeric_limits<uint64_t>::max() - 7, std::numeric_limits<uint64_t>::max() - 31,
        uint64_t{1} << 63, uint64_t{1} << 40}) {
    PutU64(bytes, kHeaderBytes, len);
    ExpectParseError(bytes, llm::StrCat("string length ", len, " exceeds the"));
  }
  // A string value's length.
  bytes = good;
  const size_t value_len_at = After(bytes, "general.architecture") + 4;
  ASSERT_EQ(GetU64(bytes, value_len_at), 5u);
  PutU64(bytes, value_len_at, uint64_t{1} << 62);
  ExpectParseError(bytes, "the value of key 'general.architecture': string length");
  // One byte too long.
  PutU64(bytes, value_len_at, bytes.size() - value_len_at - 8 + 1);
  ExpectParseError(bytes, "exceeds the");
  // A tensor name's length.
  bytes = good;
  const size_t name_at = After(bytes, "tensor_b") - 8 - 8;
  ASSERT_EQ(GetU64(bytes, name_at), 8u);
  PutU64(bytes, name_at, std::numeric_limits<uint64_t>::max());
  ExpectParseError(bytes, "name of tensor 1: string length 18446744073709551615");
}

TEST(GgufMalformedTest, HugeArrayCounts) {
  const std::string good = SmallModel();
  std::string bytes = good;
  // tokenizer.ggml.token_type: u32 type 9, u32 elem type 5, u64 count 3.
  const size_t count_at = After(bytes, "tokenizer.ggml.token_type") + 8;
  ASSERT_EQ(GetU64(bytes, count_at), 3u);
  PutU64(bytes, count_at, uint64_t{1} << 40);
  ExpectParseError(bytes,
                   "key 'tokenizer.ggml.token_type': array of 1099511627776 INT32 "
                   "elements needs at least 4 bytes each");
  PutU64(bytes, count_at, std::numeric_limits<uint64_t>::max());
  ExpectParseError(bytes, "array of 18446744073709551615 INT32");
  // count * 4 would wrap to a small number.
  PutU64(bytes, count_at, (uint64_t{1} << 62) + 1);
  ExpectParseError(bytes, "array of 4611686018427387905 INT32");

  // String arrays need at least 8 bytes per element.
  bytes = good;
  const size_t str_count_at = After(bytes, "tokenizer.ggml.tokens") + 8;
  ASSERT_EQ(GetU64(bytes, str_count_at), 3u);
  PutU64(bytes, str_count_at, (bytes.size() - str_count_at - 8) / 8 + 1);
  ExpectParseError(bytes, "STRING elements needs at least 8 bytes each");
  // A count that passes the 8-byte bound makes the walk fail on a later element.
  PutU64(bytes, str_count_at, (bytes.size() - str_count_at - 8) / 8);
  ExpectParseError(bytes, "of array 'tokenizer.ggml.tokens'");
  // An element's length is validated during the walk.
  bytes = good;
  PutU64(bytes, str_count_at + 8 + 8 + 1, std::numeric_limits<uint64_t>::max());  // "bc"
  ExpectParseError(bytes,
                   "element 1 of array 'tokenizer.ggml.tokens': string length "
                   "18446744073709551615 exceeds the");
}

TEST(GgufMalformedTest, NestedArrayAndUnknownTypes) {
  const std::string good = SmallModel();
  std::string bytes = good;
  const size_t elem_type_at = After(bytes, "tokenizer.ggml.token_type") + 4;
  PutU32(bytes, elem_type_at, 9);
  ExpectParseError(bytes, "key 'tokenizer.ggml.token_type': nested arrays are not supported");
  PutU32(bytes, elem_type_at, 13);
  ExpectParseError(bytes, "key 'tokenizer.ggml.token_type': unknown array element type 13");

  bytes = good;
  const size_t type_at = After(bytes, "llama.block_count");
  PutU32(bytes, type_at, 13);
  ExpectParseError(bytes, "key 'llama.block_count': unknown value type 13");
  PutU32(bytes, type_at, 0xFFFFFFFF);
  ExpectParseError(bytes, "unknown value type 4294967295");
}

TEST(GgufMalformedTest, EmptyAndDuplicateKeys) {
  {
    GgufBuilder b;
    b.AddUint32("a", 1).AddUint32("", 2);
    ExpectParseError(b.Serialize(), "metadata entry 1 has an empty key");
  }
  {
    GgufBuilder b;
    b.AddUint32("dup", 1).AddString("other", "x").AddString("dup", "y");
    ExpectParseError(b.Serialize(), "duplicate key 'dup'");
  }
  {
    GgufBuilder b;
    b.AddTensor("w", TensorType::kF32, {4}).AddTensor("w", TensorType::kF32, {4});
    ExpectParseError(b.Serialize(), "duplicate tensor name 'w'");
  }
}

TEST(GgufMalformedTest, TensorNameLength) {
  {
    GgufBuilder b;
    b.AddTensor(std::string(63, 'n'), TensorType::kF32, {1});
    EXPECT_TRUE(Parse(b.Serialize()).ok());
  }
  GgufBuilder b;
  b.AddTensor(std::string(64, 'n'), TensorType::kF32, {1});
  ExpectParseError(b.Serialize(), "tensor 0: name is 64 bytes; the limit is 63");
}

TEST(GgufMalformedTest, Dimensions) {
  const std::string good = SmallModel();
  const size_t n_dims_at = After(good, "tensor_b");
  std::string bytes = good;
  PutU32(bytes, n_dims_at, 0);
  ExpectParseError(bytes, "tensor 'tensor_b': n_dims 0 is outside 1..4");
  PutU32(bytes, n_dims_at, 5);
  ExpectParseError(bytes, "tensor 'tensor_b': n_dims 5 is outside 1..4");
  PutU32(bytes, n_dims_at, 0xFFFFFFFF);
  ExpectParseError(bytes, "n_dims 4294967295");

  const size_t ne0_at = n_dims_at + 4;
  bytes = good;
  PutU64(bytes, ne0_at, 0);
  ExpectParseError(bytes, "tensor 'tensor_b': ne[0] = 0 must be positive");
  bytes = good;
  PutU64(bytes, ne0_at + 8, static_cast<uint64_t>(-1));
  ExpectParseError(bytes, "tensor 'tensor_b': ne[1] = -1 must be positive");
  bytes = good;
  PutU64(bytes, ne0_at + 8, static_cast<uint64_t>(std::numeric_limits<int64_t>::min()));
  ExpectParseError(bytes, "ne[1] = -9223372036854775808 must be positive");

  // The product of the dimensions overflows int64 (2^31 * 2^31 * 2^31).
  {
    GgufBuilder b;
    b.AddRawTensor("big", 0, {int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 31}, "");
    ExpectParseError(b.Serialize(), "tensor 'big': the element count overflows int64 at ne[2]");
  }
  // The element count fits but the byte size does not.
  {
    GgufBuilder b;
    b.AddRawTensor("wide", 0, {int64_t{1} << 62}, "");
    ExpectParseError(b.Serialize(), "tensor 'wide': the byte size overflows 64 bits");
  }
  // Fits in 64 bits but not in the file.
  {
    GgufBuilder b;
    b.AddRawTensor("large", 0, {int64_t{1} << 40}, "");
    ExpectParseError(b.Serialize(), "tensor 'large': data at file offset");
  }
}

TEST(GgufMalformedTest, TensorTypes) {
  const std::string good = SmallModel();
  // tensor_b: n_dims (4) + 2 * ne (16), then the type.
  const size_t type_at = After(good, "tensor_b") + 4 + 16;
  std::string bytes = good;
  ASSERT_EQ(bytes[type_at], static_cast<char>(TensorType::kQ8_0));
  PutU32(bytes, type_at, 99);
  ExpectParseError(bytes, "tensor 'tensor_b': unknown or unsupported ggml type 99");
  PutU32(bytes, type_at, 4);  // Q4_2, removed
  ExpectParseError(bytes, "tensor 'tensor_b': unknown or unsupported ggml type 4");
  PutU32(bytes, type_at, 0xFFFFFFFF);
  ExpectParseError(bytes, "ggml type 4294967295");

  GgufBuilder b;
  b.AddRawTensor("q", static_cast<uint32_t>(TensorType::kQ4_0), {16, 2}, std::string(18, '\0'));
  ExpectParseError(b.Serialize(),
                   "tensor 'q': ne[0] = 16 is not a multiple of the block size 32 of type Q4_0");
  GgufBuilder k;
  k.AddRawTensor("k", static_cast<uint32_t>(TensorType::kQ6_K), {512 + 32}, "");
  ExpectParseError(k.Serialize(), "block size 256 of type Q6_K");
}

TEST(GgufMalformedTest, Offsets) {
  const std::string good = SmallModel();
  // tensor_b: n_dims, 2 ne, type, then the offset (32).
  const size_t b_offset_at = After(good, "tensor_b") + 4 + 16 + 4;
  ASSERT_EQ(GetU64(good, b_offset_at), 32u);
  std::string bytes = good;
  PutU64(bytes, b_offset_at, 36);
  ExpectParseError(bytes, llm::StrCat("offset ", b_offset_at,
                                      ": tensor 'tensor_b': offset 36 "
                                      "is not a multiple of the alignment 32"));
  PutU64(bytes, b_offset_at, 64);
  ExpectParseError(bytes,
                   "tensor 'tensor_b': offset 64 is not the expected 32 (tensor data "
                   "must be contiguous in tensor order)");
  PutU64(bytes, b_offset_at, 0);  // overlaps tensor_a
  ExpectParseError(bytes, "offset 0 is not the expected 32");
  PutU64(bytes, b_offset_at, std::numeric_limits<uint64_t>::max() - 31);
  ExpectParseError(bytes, "is not the expected 32");

  // The last tensor's data runs past the end of the file: enlarge its ne[0].
  bytes = good;
  const size_t c_ne0_at = After(bytes, "tensor_c") + 4;
  ASSERT_EQ(GetU64(bytes, c_ne0_at), 8u);
  PutU64(bytes, c_ne0_at, 9);
  ExpectParseError(bytes, "tensor 'tensor_c': data at file offset");
  ExpectParseError(bytes, "extends past the end of the file");
  PutU64(bytes, c_ne0_at, int64_t{1} << 60);
  ExpectParseError(bytes, "extends past the end of the file");
}

TEST(GgufMalformedTest, Alignment) {
  auto with_alignment = [](auto add) {
    GgufBuilder b;
    add(b);
    b.AddTensor("w", TensorType::kF32, {4});
    return b.Serialize();
  };
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.SetAlignment(48); }),
                   "general.alignment 48 is not a power of two");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.SetAlignment(0); }),
                   "general.alignment 0 is not a power of two");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.SetAlignment(1u << 21); }),
                   "general.alignment 2097152 exceeds the limit of 1048576");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.SetAlignment(1u << 31); }),
                   "exceeds the limit");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.AddUint64("general.alignment", 32); }),
                   "general.alignment has type UINT64; it must be UINT32");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.AddInt32("general.alignment", 32); }),
                   "general.alignment has type INT32; it must be UINT32");
  ExpectParseError(with_alignment([](GgufBuilder& b) { b.AddString("general.alignment", "32"); }),
                   "general.alignment has type STRING");
  ExpectParseError(
      with_alignment([](GgufBuilder& b) { b.AddUint32Array("general.alignment", {32}); }),
      "general.alignment has type ARRAY of UINT32");
}

TEST(GgufMalformedTest, ErrorOffsetsPointAtTheField) {
  GgufBuilder b;
  b.AddUint32("k", 1);
  std::string bytes = b.Serialize();
  // key "k" at 24 (8 + 1), type at 33.
  PutU32(bytes, 33, 77);
  ExpectParseError(bytes, "test.gguf: offset 33: key 'k': unknown value type 77");
}

// Flipping any single byte of a valid file never crashes (and either parses
// or reports InvalidArgument).
TEST(GgufMalformedTest, SingleByteCorruptionsAreHandled) {
  const std::string good = SmallModel();
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t x : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::string bytes = good;
      bytes[i] = static_cast<char>(static_cast<uint8_t>(bytes[i]) ^ x);
      auto f = Parse(bytes);
      if (!f.ok()) {
        EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << i;
        continue;
      }
      for (const TensorInfo& t : (*f)->tensors()) {
        ASSERT_NE(t.data, nullptr);
        EXPECT_LE(t.offset + t.size_bytes, bytes.size());
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Real files from llama.cpp's test vocabularies.

// The shared folder is beside the checkout (LLM_SHARED_DIR overrides it).
std::string VocabPath(std::string_view file) {
  return llm::StrCat(llm::testing::SharedDir(), "/conformance/llama-vocab/", file);
}

TEST(GgufRealFileTest, Gpt2Vocab) {
  const std::string path = VocabPath("ggml-vocab-gpt-2.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  const File& file = **f;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(*file.GetString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*file.GetString("tokenizer.ggml.pre"), "gpt-2");
  EXPECT_EQ(*file.GetUint("tokenizer.ggml.bos_token_id"), 50256u);
  EXPECT_EQ(*file.GetUint("tokenizer.ggml.eos_token_id"), 50256u);

  const Value* tokens = file.Find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_type(), ValueType::kString);
  auto token_list = tokens->AsStringArray();
  ASSERT_TRUE(token_list.ok()) << token_list.status();
  ASSERT_EQ(token_list->size(), 50257u);
  EXPECT_EQ((*token_list)[0], "!");
  EXPECT_EQ((*token_list)[50256], "<|endoftext|>");

  auto merges = file.Find("tokenizer.ggml.merges")->AsStringArray();
  ASSERT_TRUE(merges.ok()) << merges.status();
  EXPECT_EQ(merges->size(), 50000u);

  const Value* token_type = file.Find("tokenizer.ggml.token_type");
  ASSERT_NE(token_type, nullptr);
  auto types = token_type->AsIntArray();
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_EQ(types->size(), 50257u);
}

TEST(GgufRealFileTest, AllVocabsParse) {
  const std::string dir = VocabPath("");
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << dir << " not found";
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    auto f = File::Open(entry.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->version(), 3u);
    EXPECT_TRUE((*f)->tensors().empty());
    // Byte-level BPE (gpt2) or SentencePiece (llama: llama-spm, phi-3).
    EXPECT_THAT(*(*f)->GetString("tokenizer.ggml.model"), ::testing::AnyOf("gpt2", "llama"));
    auto tokens = (*f)->Find("tokenizer.ggml.tokens")->AsStringArray();
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    EXPECT_GT(tokens->size(), 30000u);
    ++parsed;
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace llm::gguf
