#include "tokenizer_svc/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm::tok {
namespace {

const std::vector<PretokenizerPreset>& Presets() {
  static const auto* presets = new std::vector<PretokenizerPreset>{
#include "tokenizer_svc/pretokenizer_table.inc"
  };
  return *presets;
}

// Makes `\s` mean Unicode White_Space (adds U+0085, which PCRE2's \s lacks)
// and `\S` its complement, inside and outside character classes.
std::string WidenWhitespace(std::string_view re) {
  std::string out;
  out.reserve(re.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < re.size() && re[i + 1] == '^') out += re[++i];
      if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

const PretokenizerPreset* FindGgufPreset(std::string_view name) {
  for (const auto& p : Presets()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string_view> GgufPresetNames() {
  std::vector<std::string_view> names;
  for (const auto& p : Presets()) names.push_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

Pretokenizer::~Pretokenizer() = default;

absl::StatusOr<std::unique_ptr<Pretokenizer>> Pretokenizer::Create(std::vector<std::string> regexes,
                                                                   bool ascii_scanner) {
  std::unique_ptr<Pretokenizer> p(new Pretokenizer());
  for (const auto& source : regexes) {
    const std::string pattern = WidenWhitespace(source);
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto compiled = std::make_unique<Compiled>();
    compiled->code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                      &error, &offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return absl::InvalidArgumentError(llm::StrCat("pre-tokenizer regex '", source,
                                                    "' does not compile at offset ", offset, ": ",
                                                    reinterpret_cast<char*>(message)));
    }
    // JIT is an optimization: without it (an unsupported platform) matching
    // still works through the interpreter.
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);
    p->compiled_.push_back(std::move(compiled));
  }
  if (ascii_scanner && regexes.size() == 1) p->ascii_ = FindAsciiMatcher(regexes[0]);
  p->sources_ = std::move(regexes);
  return p;
}

void Pretokenizer::ForEachPiece(std::string_view text,
                                absl::FunctionRef<void(std::string_view)> piece) const {
  if (text.empty()) return;
  if (compiled_.empty()) {
    piece(text);
    return;
  }
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (ascii_ != nullptr) {
    ScanWithAscii(text, md, piece);
  } else {
    Split(0, text, md, piece);
  }
  pcre2_match_data_free(md);
}

void Pretokenizer::ScanWithAscii(std::string_view text, void* match_data,
                                 absl::FunctionRef<void(std::string_view)> piece) const {
  auto* md = static_cast<pcre2_match_data*>(match_data);
  const pcre2_code* code = compiled_[0]->code;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t size = text.size();
  size_t pos = 0;   // where the next search starts
  size_t done = 0;  // bytes already handed on
  while (pos < size) {
    if (pos == done) {
      const size_t len = ascii_(text, pos);
      if (len > 0) {
        piece(text.substr(pos, len));
        done = pos = pos + len;
        continue;
      }
    }
    // Not decided by ASCII: PCRE2 from here, exactly as Split does.
    const int rc = pcre2_match(code, subject, size, pos, 0, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end == start) {
      pos = start + 1;
      continue;
    }
    if (start > done) piece(text.substr(done, start - done));
    piece(text.substr(start, end - start));
    done = pos = end;
  }
  if (done < size) piece(text.substr(done));
}

void Pretokenizer::Split(size_t level, std::string_view fragment, void* match_data,
                         absl::FunctionRef<void(std::string_view)> piece) const {
  if (level == compiled_.size()) {
    piece(fragment);
    return;
  }
  auto* md = static_cast<pcre2_match_data*>(match_data);
  const pcre2_code* code = compiled_[level]->code;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(fragment.data());
  const size_t size = fragment.size();
  size_t pos = 0;   // where the next search starts
  size_t done = 0;  // bytes already handed on
  while (pos < size) {
    const int rc = pcre2_match(code, subject, size, pos, 0, md, nullptr);
    if (rc < 0) break;  // no further match (or a matching error): the rest is a gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    size_t end = ov[1];
    if (end == start) {
      // An empty match: skip one byte so the search advances.
      pos = start + 1;
      continue;
    }
    if (start > done) Split(level + 1, fragment.substr(done, start - done), md, piece);
    Split(level + 1, fragment.substr(start, end - start), md, piece);
    done = pos = end;
  }
  if (done < size) Split(level + 1, fragment.substr(done), md, piece);
}

}  // namespace llm::tok
