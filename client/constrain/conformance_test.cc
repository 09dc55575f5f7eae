// The JSON Schema compiler against the official JSON Schema Test Suite
// (Debian's json-schema-test-suite: /usr/share/json-schema-test-suite), draft
// 7, the newest draft that package carries: for every test schema, either the
// compiled constraint accepts every valid instance and refuses every invalid
// one, token by token with SmolLM2's vocabulary through the code of
// `llm constrain` (ConstraintChecker::Run), or the schema is refused with an
// error naming what is not supported. A misjudged instance must be listed,
// with its reason, in testdata/json_schema_suite_draft7.known; an unlisted one
// fails the test, and so does a listed one that is judged right (the list
// stays true).
//
// Instances are written as Python's json.dumps writes them (", " and ": ",
// non-ASCII as \u escapes), the constraint's options are those of
// `llm constrain` by default (properties in the schema's order), and each
// schema is told it is draft 7 ("$schema" added where it has none). Each test prints its table rows
// (the table of docs/structured_output.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/constrain/check.h"
#include "common/strings.h"
#include "common/test_paths.h"

namespace llm::constrain {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr char kSuite[] = "/usr/share/json-schema-test-suite/tests/";

std::string Model() {
  return llm::testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::string KnownListPath() {
  return llm::testing::SourceDir() + "/client/constrain/testdata/json_schema_suite_draft7.known";
}

// A string as json.dumps writes it (ensure_ascii).
void DumpString(const std::string& s, std::string* out) {
  *out += '"';
  const std::u32string cps = [&] {
    std::u32string r;
    for (size_t i = 0; i < s.size();) {
      const auto c = static_cast<unsigned char>(s[i]);
      const int len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      char32_t cp = len == 1 ? c : c & (0x7f >> len);
      for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3f);
      r += cp;
      i += len;
    }
    return r;
  }();
  for (char32_t cp : cps) {
    switch (cp) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (cp >= 0x20 && cp < 0x7f) {
          *out += static_cast<char>(cp);
        } else if (cp < 0x10000) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<uint32_t>(cp));
        } else {
          const uint32_t v = static_cast<uint32_t>(cp) - 0x10000;
          absl::StrAppendFormat(out, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
        }
    }
  }
  *out += '"';
}

// `j` as Python's json.dumps(j) writes it.
void DumpPython(const Json& j, std::string* out) {
  if (j.is_string()) {
    DumpString(j.get<std::string>(), out);
  } else if (j.is_array()) {
    *out += '[';
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) *out += ", ";
      DumpPython(j[i], out);
    }
    *out += ']';
  } else if (j.is_object()) {
    *out += '{';
    bool first = true;
    for (const auto& [key, value] : j.items()) {
      if (!first) *out += ", ";
      first = false;
      DumpString(key, out);
      *out += ": ";
      DumpPython(value, out);
    }
    *out += '}';
  } else {
    *out += j.dump();
  }
}

struct Known {
  std::string reason;
  bool seen = false;
};

// "file | schema description | test description | reason" per line.
std::map<std::string, Known> ReadKnownList() {
  std::map<std::string, Known> known;
  std::ifstream in(KnownListPath());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts = absl::StrSplit(line, " | ");
    EXPECT_EQ(parts.size(), 4u) << "bad line in the known list: " << line;
    if (parts.size() != 4) continue;
    known[llm::StrCat(parts[0], " | ", parts[1], " | ", parts[2])] = {parts[3]};
  }
  return known;
}

class ConformanceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(Model()) || !fs::exists(kSuite)) return;
    auto checker = ConstraintChecker::Load(Model());
    ASSERT_TRUE(checker.ok()) << checker.status();
    checker_ = std::move(*checker).release();
  }
  static void TearDownTestSuite() {
    delete checker_;
    checker_ = nullptr;
  }

  void SetUp() override {
    if (!fs::exists(Model())) GTEST_SKIP() << "missing " << Model();
    if (!fs::exists(kSuite)) GTEST_SKIP() << "missing " << kSuite << " (scripts/setup.sh)";
    ASSERT_NE(checker_, nullptr);
  }

  // Runs every file of the suite's directory `dir` (e.g. "draft7/optional").
  void RunDirectory(const std::string& dir) {
    std::map<std::string, Known> known = ReadKnownList();
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(fs::path(kSuite) / dir)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    ASSERT_FALSE(files.empty());
    int schemas = 0, compiled = 0, instances = 0, right = 0, known_wrong = 0;
    std::map<std::string, int> refusals;
    for (const fs::path& path : files) {
      const std::string file = llm::StrCat(dir, "/", path.filename().string());
      std::ifstream in(path);
      const Json cases = Json::parse(in);
      for (const Json& c : cases) {
        ++schemas;
        Json schema = c["schema"];
        if (schema.is_object() && !schema.contains("$schema")) {
          schema["$schema"] = "http://json-schema.org/draft-07/schema#";
        }
        std::vector<std::string> texts;
        for (const Json& t : c["tests"]) {
          std::string text;
          DumpPython(t["data"], &text);
          texts.push_back(text);
        }
        Spec spec{.kind = Kind::kJsonSchema, .text = schema.dump()};
        absl::StatusOr<ConstraintChecker::Report> report = checker_->Run(spec, texts);
        ASSERT_TRUE(report.ok()) << file << ": " << report.status();
        const std::string description = c["description"].get<std::string>();
        if (!report->compiled) {
          EXPECT_FALSE(report->error.empty());
          ++refusals[report->error];
          continue;
        }
        ++compiled;
        for (size_t i = 0; i < texts.size(); ++i) {
          const Json& t = c["tests"][i];
          const bool valid = t["valid"].get<bool>();
          ++instances;
          const auto& got = report->instances[i];
          const std::string key =
              llm::StrCat(file, " | ", description, " | ", t["description"].get<std::string>());
          if (got.accepted == valid) {
            ++right;
            continue;
          }
          auto it = known.find(key);
          if (it == known.end()) {
            ADD_FAILURE() << "misjudged, not in the known list: " << key << "\n  instance "
                          << texts[i] << " is " << (valid ? "valid" : "invalid") << ", "
                          << (got.accepted ? "accepted" : "refused")
                          << (got.error.empty() ? "" : " (" + got.error + ")") << "\n  schema "
                          << c["schema"].dump();
          } else {
            ++known_wrong;
            it->second.seen = true;
          }
        }
      }
    }
    for (const auto& [key, entry] : known) {
      const std::string prefix = dir + "/";
      const bool here =
          key.rfind(prefix, 0) == 0 &&
          key.substr(prefix.size(), key.find(" | ") - prefix.size()).find('/') == std::string::npos;
      if (here && !entry.seen) {
        ADD_FAILURE() << "listed as misjudged but not misjudged (judged right, refused or "
                      << "gone): " << key;
      }
    }
    std::printf("| %s | %d | %d | %d | %d / %d | %d |\n", dir.c_str(),
                static_cast<int>(files.size()), schemas, compiled, right, instances, known_wrong);
    for (const auto& [error, n] : refusals) std::printf("refused %dx: %s\n", n, error.c_str());
  }

  static ConstraintChecker* checker_;
};

ConstraintChecker* ConformanceTest::checker_ = nullptr;

TEST(DumpPythonTest, WritesAsJsonDumps) {
  std::string out;
  DumpPython(Json::parse(R"({"b": [1, 2.5, null, true], "a": "é\u0001\"😀"})"), &out);
  EXPECT_EQ(out, R"({"b": [1, 2.5, null, true], "a": "\u00e9\u0001\"\ud83d\ude00"})");
}

TEST_F(ConformanceTest, KnownListNamesFilesOfTheSuite) {
  for (const auto& [key, entry] : ReadKnownList()) {
    const std::string file = key.substr(0, key.find(" | "));
    EXPECT_TRUE(fs::exists(fs::path(kSuite) / file)) << "no such file in the suite: " << key;
    EXPECT_FALSE(entry.reason.empty()) << key;
  }
}

TEST_F(ConformanceTest, Draft7) { RunDirectory("draft7"); }
TEST_F(ConformanceTest, Draft7Optional) { RunDirectory("draft7/optional"); }
TEST_F(ConformanceTest, Draft7OptionalFormat) { RunDirectory("draft7/optional/format"); }

}  // namespace
}  // namespace llm::constrain
