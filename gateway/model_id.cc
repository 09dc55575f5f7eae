#include "gateway/model_id.h"

#include "absl/strings/ascii.h"

namespace llm::gateway {
namespace {

// `name` with blanks and slashes as '-'.
std::string PathSegment(std::string_view name) {
  std::string id(name);
  for (char& c : id) {
    if (c == ' ' || c == '\t' || c == '/') c = '-';
  }
  return id;
}

}  // namespace

bool IsQuantizationName(std::string_view part) {
  std::string p(part);
  absl::AsciiStrToLower(&p);
  if (p == "f32" || p == "f16" || p == "bf16" || p == "fp32" || p == "fp16" || p == "mxfp4") {
    return true;
  }
  size_t i = 0;
  if (p.starts_with("iq") || p.starts_with("tq")) {
    i = 2;
  } else if (p.starts_with("q")) {
    i = 1;
  } else {
    return false;
  }
  if (i >= p.size() || !absl::ascii_isdigit(static_cast<unsigned char>(p[i]))) return false;
  while (i < p.size() && absl::ascii_isdigit(static_cast<unsigned char>(p[i]))) ++i;
  // "_" groups: "_0", "_k", "_m", "_xs", "_xxs", "_nl" ...
  while (i < p.size()) {
    if (p[i] != '_') return false;
    size_t j = i + 1;
    while (j < p.size() && absl::ascii_isalnum(static_cast<unsigned char>(p[j]))) ++j;
    if (j == i + 1 || j - i - 1 > 3) return false;
    i = j;
  }
  return true;
}

std::string ModelIdFromFileName(std::string_view file_name) {
  std::string_view name = file_name.substr(file_name.rfind('/') + 1);
  if (name.size() > 5) {
    std::string ending(name.substr(name.size() - 5));
    absl::AsciiStrToLower(&ending);
    if (ending == ".gguf") name.remove_suffix(5);
  }
  const size_t cut = name.find_last_of(".-");
  if (cut != std::string_view::npos && cut > 0 && IsQuantizationName(name.substr(cut + 1))) {
    name = name.substr(0, cut);
  }
  return PathSegment(name);
}

std::string DefaultModelId(std::string_view file_name, std::string_view general_name,
                           std::string_view architecture) {
  if (!file_name.empty()) return ModelIdFromFileName(file_name);
  return PathSegment(!general_name.empty() ? general_name : architecture);
}

}  // namespace llm::gateway
