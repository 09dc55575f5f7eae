// Renders the real chat templates in testdata/templates on the conversations
// of testdata/references.json and compares with what Python's jinja2 rendered
// there (testdata/make_references.py: transformers' environment), byte for
// byte; a reference that raised must raise the same message here.
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "common/jinja/template.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::jinja {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// JINJA_TESTDATA overrides the directory (to check other templates the same way).
std::string Dir() {
  const char* env = std::getenv("JINJA_TESTDATA");
  return env != nullptr ? env : llm::testing::SourceDir() + "/common/jinja/testdata";
}

Value FromJson(const nlohmann::json& j) {
  if (j.is_null()) return Value::None();
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<int64_t>());
  if (j.is_number()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const auto& x : j) l.push_back(FromJson(x));
    return Value(std::move(l));
  }
  Dict d;
  for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), FromJson(it.value()));
  return Value(std::move(d));
}

TEST(JinjaReferenceTest, RealTemplatesRenderAsJinja2Does) {
  const nlohmann::json refs = nlohmann::json::parse(ReadFile(Dir() + "/references.json"));
  ASSERT_GT(refs["cases"].size(), 0u);
  RenderOptions options;
  options.now = absl::FromUnixSeconds(refs["date_unix_seconds"].get<int64_t>());
  options.zone = absl::UTCTimeZone();
  int checked = 0;
  for (const auto& c : refs["cases"]) {
    const std::string name = c["template"];
    SCOPED_TRACE(name + " / " + c["conversation"].get<std::string>() +
                 " / add_generation_prompt=" + (c["add_generation_prompt"] ? "true" : "false"));
    absl::StatusOr<Template> t = Template::Parse(ReadFile(Dir() + "/templates/" + name + ".jinja"));
    if (!t.ok()) {
      ADD_FAILURE() << t.status();
      continue;
    }
    const auto& tokens = refs["tokens"][name];
    Dict vars = {
        {"messages", FromJson(refs["conversations"][c["conversation"].get<std::string>()])},
        {"tools", Value::None()},
        {"documents", Value::None()},
        {"add_generation_prompt", Value(c["add_generation_prompt"].get<bool>())},
        {"bos_token", FromJson(tokens["bos_token"])},
        {"eos_token", FromJson(tokens["eos_token"])},
    };
    absl::StatusOr<std::string> out = t->Render(vars, options);
    if (c.contains("error_other")) {  // jinja2 failed otherwise (a TypeError, ...)
      EXPECT_FALSE(out.ok()) << c["error_other"];
    } else if (c.contains("error")) {
      EXPECT_FALSE(out.ok());
      EXPECT_THAT(std::string(out.status().message()),
                  ::testing::HasSubstr("raise_exception: " + c["error"].get<std::string>()));
    } else {
      EXPECT_EQ(out.ok() ? *out : out.status().ToString(), c["output"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(refs["cases"].size()));
}

}  // namespace
}  // namespace llm::jinja
