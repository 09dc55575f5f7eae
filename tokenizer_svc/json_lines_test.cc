// The fast JSON lines parsers and writers against nlohmann::json: whatever the
// parsers accept, nlohmann accepts with the same value; the lines nlohmann
// writes (and Python's json.dumps, ASCII-escaped or not) are accepted; the
// writers' bytes are nlohmann's.
#include "tokenizer_svc/json_lines.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace llm::tok::jsonl {
namespace {

nlohmann::json Parse(std::string_view line) {
  return nlohmann::json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Whatever ParseTextObject accepts, nlohmann parses to {"text": the same}.
void ExpectTextAgrees(std::string_view line) {
  std::string scratch;
  std::string_view text;
  if (!ParseTextObject(line, &scratch, &text)) return;
  const nlohmann::json j = Parse(line);
  ASSERT_TRUE(j.is_object()) << ::testing::PrintToString(std::string(line));
  ASSERT_EQ(j.size(), 1u) << ::testing::PrintToString(std::string(line));
  ASSERT_TRUE(j.contains("text") && j["text"].is_string());
  ASSERT_EQ(j["text"].get<std::string>(), text) << ::testing::PrintToString(std::string(line));
}

std::string_view Text(std::string_view line, std::string* scratch) {
  std::string_view text;
  EXPECT_TRUE(ParseTextObject(line, scratch, &text)) << ::testing::PrintToString(std::string(line));
  return text;
}

bool Accepts(std::string_view line) {
  std::string scratch;
  std::string_view text;
  return ParseTextObject(line, &scratch, &text);
}

TEST(JsonLinesTest, ParsesTextObjects) {
  std::string scratch;
  EXPECT_EQ(Text(R"({"text": "Hello, world!"})", &scratch), "Hello, world!");
  EXPECT_EQ(Text(" \t{\"text\"\t:\r\"\"}  \r", &scratch), "");
  EXPECT_EQ(Text(R"({"text":"a\"b\\c\/d\b\f\n\r\t"})", &scratch), "a\"b\\c/d\b\f\n\r\t");
  EXPECT_EQ(Text(R"({"text":"\u00e9\u00C9 \u4e2d \ud83d\ude00 \u0000."})", &scratch),
            std::string("\xC3\xA9\xC3\x89 \xE4\xB8\xAD \xF0\x9F\x98\x80 \0.", 16));
  EXPECT_EQ(Text("{\"text\":\"caf\xC3\xA9 \xF0\x9F\xA4\x96 \x7F\"}", &scratch),
            "caf\xC3\xA9 \xF0\x9F\xA4\x96 \x7F");
  // Not the fast path's shape (nlohmann decides): other keys, escaped keys,
  // other values, malformed lines.
  for (const char* line : {
           R"({"text": "a", "x": 1})",
           R"({"x": 1, "text": "a"})",
           R"({"te\u0078t": "a"})",
           R"({"text": 5})",
           R"({"text": null})",
           R"(["text"])",
           R"({"text": "a"} x)",
           R"({"text": "a")",
           R"({"text" "a"})",
           R"({"text": "a})",
           "",
           "  ",
           "{}",
           "{\"text\": \"a\tb\"}",              // raw control character
           "{\"text\": \"\xC3\"}",              // cut-off character
           "{\"text\": \"\xC0\xAF\"}",          // overlong
           "{\"text\": \"\xED\xA0\x80\"}",      // surrogate
           "{\"text\": \"\xF4\x90\x80\x80\"}",  // above U+10FFFF
           "{\"text\": \"\xFF\"}",
           R"({"text": "\ud83d"})",
           R"({"text": "\ud83dx"})",
           R"({"text": "\ud83d\u0041"})",
           R"({"text": "\ude00"})",
           R"({"text": "\u12"})",
           R"({"text": "\u12g4"})",
           R"({"text": "\x41"})",
           R"({"text": "\'"})",
           R"({"text": "a\"})",
           "{\"text\": \"a\"}\x0b",
       }) {
    EXPECT_FALSE(Accepts(line)) << ::testing::PrintToString(std::string(line));
  }
}

// Random texts of every kind of character, written as nlohmann writes them and
// as Python's json.dumps writes them with ensure_ascii (every non-ASCII
// character as \uXXXX, surrogate pairs above U+FFFF): all on the fast path,
// with the same value as nlohmann's.
TEST(JsonLinesTest, AcceptsWhatTheWritersWrite) {
  std::mt19937 rng(17);
  const std::vector<uint32_t> samples = {
      'a',  'Z',   ' ',   '"',    '\\',   '/',    '\n',   '\t',   0,       0x1F,    0x7F,    0x80,
      0xE9, 0x7FF, 0x800, 0x4E2D, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x1F600, 0x10FFFF};
  for (int round = 0; round < 2000; ++round) {
    std::string utf8;
    std::string ascii_escaped;  // Python's json.dumps(ensure_ascii=True)
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      const uint32_t cp = rng() % 3 == 0 ? samples[rng() % samples.size()] : 0x20 + rng() % 0x60;
      std::string one;
      if (cp < 0x80) {
        one.push_back(static_cast<char>(cp));
      } else if (cp < 0x800) {
        one = {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
      } else if (cp < 0x10000) {
        one = {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
               static_cast<char>(0x80 | (cp & 0x3F))};
      } else {
        one = {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
               static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
      }
      utf8 += one;
      char buf[16];
      if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04X", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        ascii_escaped += buf;
      } else if (cp >= 0x80 || cp < 0x20) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
        ascii_escaped += buf;
      } else if (cp == '"' || cp == '\\') {
        ascii_escaped += '\\';
        ascii_escaped += static_cast<char>(cp);
      } else {
        ascii_escaped += static_cast<char>(cp);
      }
    }
    std::string scratch;
    const std::string dumped = nlohmann::json{{"text", utf8}}.dump();
    EXPECT_EQ(Text(dumped, &scratch), utf8);
    ExpectTextAgrees(dumped);
    const std::string python = "{\"text\": \"" + ascii_escaped + "\"}";
    EXPECT_EQ(Text(python, &scratch), utf8) << python;
    ExpectTextAgrees(python);
    // The writer: nlohmann's bytes.
    std::string out;
    ASSERT_TRUE(AppendTextLine(utf8, &out));
    EXPECT_EQ(out, Dump(nlohmann::json{{"text", utf8}}));
  }
}

// Random bytes, escapes and framing, mutated: never a value nlohmann does not
// give.
TEST(JsonLinesTest, AcceptsNothingThatNlohmannReadsOtherwise) {
  std::mt19937 rng(5);
  const std::vector<std::string> parts = {"a",
                                          "Z",
                                          " ",
                                          "\"",
                                          "\\",
                                          "\\\"",
                                          "\\\\",
                                          "\\/",
                                          "\\n",
                                          "\\u",
                                          "\\u00",
                                          "\\u00e9",
                                          "\\uD83D",
                                          "\\ud83d\\ude00",
                                          "\\uDE00",
                                          "\\ud83d\\u0041",
                                          "\\x",
                                          "\t",
                                          "\x01",
                                          "\x7F",
                                          "\xC3\xA9",
                                          "\xC3",
                                          "\xA9",
                                          "\xE4\xB8\xAD",
                                          "\xE4\xB8",
                                          "\xF0\x9F\x98\x80",
                                          "\xF0\x9F",
                                          "\xC0\x80",
                                          "\xED\xA0\x80",
                                          "\xF4\x90\x80\x80",
                                          "\xF5",
                                          "\xFF",
                                          "{",
                                          "}",
                                          ":",
                                          ","};
  const std::vector<std::string> openings = {"{\"text\":\"", "{ \"text\" : \"", " {\"text\":\"",
                                             "{\"text\":",   "{\"texts\":\"",   "{\"Text\":\"",
                                             "[\"text\",\"", "{\"text\"\r:\n\""};
  const std::vector<std::string> closings = {"\"}",  "\" }",        "\"} ", "\"}\r", "\"",
                                             "\"}x", "\",\"a\":1}", "\"}}", "\"]",   ""};
  size_t accepted = 0;
  for (int round = 0; round < 200000; ++round) {
    std::string line = openings[rng() % openings.size()];
    const int n = static_cast<int>(rng() % 6);
    for (int k = 0; k < n; ++k) line += parts[rng() % parts.size()];
    line += closings[rng() % closings.size()];
    if (rng() % 8 == 0 && !line.empty()) line.erase(rng() % line.size(), 1);
    accepted += Accepts(line);
    ExpectTextAgrees(line);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(accepted, 10000u);  // the fast path was exercised
}

TEST(JsonLinesTest, ParsesIdsObjects) {
  std::vector<uint32_t> ids;
  ASSERT_TRUE(ParseIdsObject(R"({"ids": [9906, 11, 1917, 0]})", &ids));
  EXPECT_THAT(ids, ::testing::ElementsAre(9906, 11, 1917, 0));
  ASSERT_TRUE(ParseIdsObject(" {\"ids\":[]} ", &ids));
  EXPECT_TRUE(ids.empty());
  ASSERT_TRUE(ParseIdsObject("{ \"ids\" :\t[ 4294967295 ,0\r] }", &ids));
  EXPECT_THAT(ids, ::testing::ElementsAre(4294967295u, 0));
  for (const char* line :
       {R"({"ids": [4294967296]})", R"({"ids": [-1]})", R"({"ids": [1.0]})", R"({"ids": [1e3]})",
        R"({"ids": [01]})", R"({"ids": [1,]})", R"({"ids": [,1]})", R"({"ids": [1 2]})",
        R"({"ids": "1"})", R"({"ids": [1], "x": 0})", R"({"ids": [1]}])", R"({"ids": [1})",
        R"({"ids": [99999999999]})", R"({"ids": [null]})", R"({"ids": [1]} 2)"}) {
    EXPECT_FALSE(ParseIdsObject(line, &ids)) << line;
  }
  // Random arrays as nlohmann writes them, and mutations of them.
  std::mt19937 rng(9);
  for (int round = 0; round < 20000; ++round) {
    std::vector<uint64_t> values(rng() % 5);
    for (uint64_t& v : values) {
      v = rng() % 3 == 0 ? rng() % 10 : (uint64_t{rng()} << (rng() % 8));
    }
    std::string line = nlohmann::json{{"ids", values}}.dump();
    if (rng() % 2 == 0) line.insert(rng() % line.size(), 1, " -.e0,]"[rng() % 7]);
    const bool fast = ParseIdsObject(line, &ids);
    const nlohmann::json j = Parse(line);
    if (!fast) continue;
    ASSERT_TRUE(j.is_object() && j.size() == 1 && j.contains("ids") && j["ids"].is_array()) << line;
    ASSERT_EQ(j["ids"].size(), ids.size()) << line;
    for (size_t k = 0; k < ids.size(); ++k) {
      ASSERT_TRUE(j["ids"][k].is_number_unsigned()) << line;
      ASSERT_EQ(j["ids"][k].get<uint64_t>(), ids[k]) << line;
    }
  }
}

TEST(JsonLinesTest, WritersGiveNlohmannsBytes) {
  std::mt19937 rng(4);
  for (int round = 0; round < 5000; ++round) {
    std::vector<uint32_t> ids(rng() % 20);
    for (uint32_t& id : ids) id = round % 7 == 0 ? UINT32_MAX - rng() % 3 : rng() >> (rng() % 32);
    std::string out = "prefix";
    AppendIdsLine(ids, &out);
    EXPECT_EQ(out, "prefix" + Dump(nlohmann::json{{"ids", ids}}));
    // Any bytes: valid UTF-8 is written as nlohmann writes it, the rest is
    // left to nlohmann.
    std::string text(rng() % 12, ' ');
    for (char& c : text) c = static_cast<char>(rng() % 4 == 0 ? rng() : rng() % 0x80);
    std::string line;
    bool valid = true;
    try {
      line = nlohmann::json{{"text", text}}.dump();  // strict: throws on invalid UTF-8
    } catch (const nlohmann::json::type_error&) {
      valid = false;
    }
    EXPECT_EQ(IsStrictUtf8(text), valid) << ::testing::PrintToString(text);
    std::string written;
    EXPECT_EQ(AppendTextLine(text, &written), valid);
    if (valid) {
      EXPECT_EQ(written, line + "\n");
    } else {
      EXPECT_EQ(written, "");
    }
  }
  std::string out;
  AppendIdsLine({}, &out);
  EXPECT_EQ(out, "{\"ids\":[]}\n");
}

}  // namespace
}  // namespace llm::tok::jsonl
