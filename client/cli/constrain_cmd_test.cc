#include "client/cli/constrain_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/strings.h"
#include "common/test_paths.h"

namespace llm::cli {
namespace {

using ::testing::HasSubstr;

std::string Model() { return testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = llm::StrCat(::testing::TempDir(), "constrain_cmd_", getpid(), name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string ReadAll(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), f)) > 0) text.append(buffer, n);
  return text;
}

std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    lines.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

class ConstrainCmdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(Model())) GTEST_SKIP() << "missing " << Model();
  }

  // Runs the command; the exit status, stdout's JSON lines and stderr.
  int Run(const ConstrainArgs& args, std::vector<nlohmann::json>* out, std::string* err) {
    std::FILE* o = std::tmpfile();
    std::FILE* e = std::tmpfile();
    const int status = RunConstrain(args, o, e);
    *out = JsonLines(ReadAll(o));
    *err = ReadAll(e);
    std::fclose(o);
    std::fclose(e);
    return status;
  }
};

TEST_F(ConstrainCmdTest, ChecksEachInstanceAndSummarizes) {
  ConstrainArgs args{.vocab = Model()};
  args.spec = {.kind = constrain::Kind::kJsonSchema,
               .text = R"({"type": "object", "properties": {"name": {"type": "string"},
                  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}},
                  "required": ["name"]})"};
  args.check = WriteTemp("instances.jsonl",
                         "{\"name\": \"Ada\", \"tags\": [\"a\", \"b\"]}\n"  // json.dumps
                         "{\"name\":\"Ada\"}\n"                             // compact
                         "{ \"name\" :\t\"\\u00e9t\\u00e9 \u00e9\" }\n"  // spaces, escapes, UTF-8
                         "{\"name\": \"Ada\", \"tags\": [\"a\", \"b\", \"c\"]}\n"
                         "{\"tags\": []}\n"
                         "\n"
                         "{\"name\": \"Ada\"");  // last line, no newline, incomplete
  std::vector<nlohmann::json> out;
  std::string err;
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  ASSERT_EQ(out.size(), 8u);
  const std::vector<bool> expected = {true, true, true, false, false, false, false};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(out[i]["index"], i);
    EXPECT_EQ(out[i]["accepted"], expected[i]) << out[i] << " line " << i;
  }
  const nlohmann::json& summary = out.back();
  EXPECT_EQ(summary["compiled"], true);
  EXPECT_EQ(summary["instances"], 7);
  EXPECT_EQ(summary["accepted"], 3);
  EXPECT_GT(summary["compile_ms"].get<double>(), 0);
  EXPECT_GT(summary["mask_us_p50"].get<double>(), 0);
  EXPECT_GE(summary["mask_us_p99"].get<double>(), summary["mask_us_p50"].get<double>());
}

TEST_F(ConstrainCmdTest, ARefusedConstraintIsReportedWithStatusZero) {
  ConstrainArgs args{.vocab = Model()};
  args.spec = {.kind = constrain::Kind::kJsonSchema,
               .text = R"({"type": "array", "uniqueItems": true})"};
  std::vector<nlohmann::json> out;
  std::string err;
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["compiled"], false);
  EXPECT_THAT(out[0]["error"].get<std::string>(), HasSubstr("'uniqueItems'"));
}

TEST_F(ConstrainCmdTest, RegexChoicesAndAnyObject) {
  ConstrainArgs args{.vocab = Model(), .check = WriteTemp("words", "yes\nno\nmaybe\n")};
  args.spec = {.kind = constrain::Kind::kChoice, .choices = {"yes", "no"}};
  std::vector<nlohmann::json> out;
  std::string err;
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  EXPECT_EQ(out.back()["accepted"], 2);
  args.spec = {.kind = constrain::Kind::kRegex, .text = "(yes|maybe)"};
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  EXPECT_EQ(out.back()["accepted"], 2);
  EXPECT_EQ(out[1]["accepted"], false);
  args.spec = {.kind = constrain::Kind::kJsonObject};
  args.check = WriteTemp("objects", "{\"a\": [1, 2.5, null]}\n[1]\n");
  ASSERT_EQ(Run(args, &out, &err), 0) << err;
  EXPECT_EQ(out[0]["accepted"], true);
  EXPECT_EQ(out[1]["accepted"], false);
}

TEST_F(ConstrainCmdTest, UnreadableFilesExitTwo) {
  ConstrainArgs args{.vocab = Model(), .check = "/nonexistent/instances"};
  args.spec = {.kind = constrain::Kind::kJsonObject};
  std::vector<nlohmann::json> out;
  std::string err;
  EXPECT_EQ(Run(args, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("cannot read the instances /nonexistent/instances"));
  args = {.vocab = "/nonexistent/vocab.gguf"};
  EXPECT_EQ(Run(args, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("/nonexistent/vocab.gguf"));
}

// The binary: flags, --choice repeated, usage errors.
std::pair<int, std::string> RunLlm(const std::string& args) {
  const std::string out = WriteTemp("llm.out", "");
  const std::string command =
      llm::StrCat("'", testing::BinaryDir(), "/bin/llm' constrain ", args, " >'", out, "' 2>&1");
  const int status = std::system(command.c_str());
  std::ifstream in(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          std::string(std::istreambuf_iterator<char>(in), {})};
}

TEST_F(ConstrainCmdTest, TheLlmBinaryTakesTheFlags) {
  const std::string schema = WriteTemp("schema.json", R"({"type": "integer", "minimum": 10})");
  const std::string instances = WriteTemp("numbers", "12\n9\n10\n");
  auto [status, out] = RunLlm(llm::StrCat("--vocab '", Model(), "' --json-schema '", schema,
                                          "' --check '", instances, "'"));
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr(R"({"index":1,"accepted":false})"));
  EXPECT_THAT(out, HasSubstr(R"("instances":3,"accepted":2)"));
  std::tie(status, out) = RunLlm(
      llm::StrCat("--vocab '", Model(), "' --choice yes --choice=no --check '", instances, "'"));
  ASSERT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr(R"("accepted":0)"));
  std::tie(status, out) = RunLlm(llm::StrCat("--vocab '", Model(), "'"));
  EXPECT_EQ(status, 2);
  EXPECT_THAT(out, HasSubstr("give one of --json-schema FILE"));
  std::tie(status, out) = RunLlm("--json");
  EXPECT_EQ(status, 2);
  EXPECT_THAT(out, HasSubstr("--vocab FILE is required"));
}

}  // namespace
}  // namespace llm::cli
