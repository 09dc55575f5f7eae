#include "client/cli/constrain_cmd.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/check.h"
#include "common/strings.h"

namespace llm::cli {

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(llm::StrCat("cannot read ", what, " ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(llm::StrCat("cannot read ", what, " ", path));
  return text.str();
}

namespace {

// Every line (without its '\n'); a last line without '\n' counts.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

void WriteLine(const nlohmann::ordered_json& j, std::FILE* out) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::fprintf(out, "%s\n", line.c_str());
}

double Round(double v, double unit) { return static_cast<double>(std::llround(v / unit)) * unit; }

}  // namespace

int RunConstrain(const ConstrainArgs& args, std::FILE* out, std::FILE* err) {
  std::vector<std::string> instances;
  if (!args.check.empty()) {
    absl::StatusOr<std::string> text;
    if (args.check == "-") {
      text = std::string(std::istreambuf_iterator<char>(std::cin), {});
    } else {
      text = ReadFile(args.check, "the instances");
    }
    if (!text.ok()) {
      std::fprintf(err, "llm constrain: %s\n", std::string(text.status().message()).c_str());
      return 2;
    }
    instances = Lines(*text);
  }
  auto checker = constrain::ConstraintChecker::Load(args.vocab);
  if (!checker.ok()) {
    std::fprintf(err, "llm constrain: %s: %s\n", args.vocab.c_str(),
                 std::string(checker.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<constrain::ConstraintChecker::Report> report =
      (*checker)->Run(args.spec, instances);
  if (!report.ok()) {
    std::fprintf(err, "llm constrain: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  if (!report->compiled) {
    WriteLine(nlohmann::ordered_json{{"compiled", false}, {"error", report->error}}, out);
    return 0;
  }
  int accepted = 0;
  for (size_t i = 0; i < report->instances.size(); ++i) {
    const auto& instance = report->instances[i];
    nlohmann::ordered_json line = {{"index", i}, {"accepted", instance.accepted}};
    if (!instance.error.empty()) line["error"] = instance.error;
    WriteLine(line, out);
    accepted += instance.accepted;
  }
  WriteLine(
      nlohmann::ordered_json{
          {"compiled", true},
          {"instances", report->instances.size()},
          {"accepted", accepted},
          {"compile_ms", Round(report->compile_ms, 0.001)},
          {"mask_us_p50", Round(constrain::Percentile(report->mask_us, 50), 0.01)},
          {"mask_us_p99", Round(constrain::Percentile(report->mask_us, 99), 0.01)}},
      out);
  return 0;
}

}  // namespace llm::cli
