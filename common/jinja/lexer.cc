#include "common/jinja/lexer.h"

#include <cstdint>

#include "absl/status/status.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace llm::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// "\r\n" and "\r" -> "\n"; one trailing newline dropped.
std::string Normalize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out.push_back(in[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      const size_t tag = FindTag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      const size_t text_pos = pos_;
      if (tag < src_.size()) {
        const char type = src_[tag + 1];
        const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
        if (modifier == '-') {
          size_t n = text.size();
          while (n > 0 && IsSpace(text[n - 1])) --n;
          text.resize(n);
        } else if (modifier != '+' && type != '{') {
          // lstrip_blocks: only spaces between the line's start and the tag.
          const size_t nl = text.rfind('\n');
          const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
          if (l_pos > 0 || line_starting) {
            bool all_space = l_pos < text.size();
            for (size_t i = l_pos; i < text.size(); ++i) all_space = all_space && IsSpace(text[i]);
            if (all_space) text.resize(l_pos);
          }
        }
      }
      if (!text.empty()) Emit(Token::Kind::kText, std::move(text), text_pos);
      if (tag >= src_.size()) break;
      pos_ = tag;
      absl::Status s = Tag();
      if (!s.ok()) return s;
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    Emit(Token::Kind::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindTag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  void Emit(Token::Kind kind, std::string text, size_t at) {
    Token t{kind, std::move(text), 1, 1};
    Position(at, &t.line, &t.column);
    tokens_.push_back(std::move(t));
  }

  void Position(size_t at, int* line, int* column) const {
    // Incremental: tokens come in source order (an error may look back).
    if (at < line_scan_) line_scan_ = line_start_ = 0, line_ = 1;
    while (line_scan_ < at && line_scan_ < src_.size()) {
      if (src_[line_scan_] == '\n') {
        ++line_;
        line_start_ = line_scan_ + 1;
      }
      ++line_scan_;
    }
    *line = line_;
    *column = static_cast<int>(at - line_start_) + 1;
  }

  absl::Status Error(size_t at, std::string_view message) const {
    int line, column;
    Position(at, &line, &column);
    return absl::InvalidArgumentError(StrCat("line ", line, ", column ", column, ": ", message));
  }

  // After a closing delimiter ending at pos_: "-" strips all whitespace,
  // trim_blocks one newline (block and comment tags, without "+").
  void AfterClose(char strip, bool block) {
    if (strip == '-') {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
    } else if (strip != '+' && block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  absl::Status Tag() {
    const size_t start = pos_;
    const char type = src_[pos_ + 1];
    pos_ += 2;
    if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
    if (type == '#') {
      const size_t end = src_.find("#}", pos_);
      if (end == std::string::npos) return Error(start, "unterminated comment");
      const char strip =
          end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
      pos_ = end + 2;
      AfterClose(strip, true);
      return absl::OkStatus();
    }
    const bool block = type == '%';
    Emit(block ? Token::Kind::kStmtBegin : Token::Kind::kExprBegin, block ? "{%" : "{{", start);
    const char close = block ? '%' : '}';
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && IsSpace(src_[pos_])) ++pos_;
      if (pos_ >= src_.size())
        return Error(start, block ? "unterminated '{%'" : "unterminated '{{'");
      if (depth == 0) {
        char strip = '\0';
        size_t p = pos_;
        if ((src_[p] == '-' || src_[p] == '+') && p + 2 < src_.size() && src_[p + 1] == close &&
            src_[p + 2] == '}') {
          strip = src_[p];
          ++p;
        }
        if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}') {
          Emit(block ? Token::Kind::kStmtEnd : Token::Kind::kExprEnd, block ? "%}" : "}}", pos_);
          pos_ = p + 2;
          AfterClose(strip, block);
          return absl::OkStatus();
        }
      }
      absl::Status s = ExpressionToken(&depth);
      if (!s.ok()) return s;
    }
  }

  absl::Status ExpressionToken(int* depth) {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (IsNameStart(c)) {
      while (pos_ < src_.size() && IsNameChar(src_[pos_])) ++pos_;
      Emit(Token::Kind::kName, src_.substr(start, pos_ - start), start);
      return absl::OkStatus();
    }
    if (IsDigit(c)) return Number();
    if (c == '\'' || c == '"') return String();
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        pos_ += 2;
        Emit(Token::Kind::kOperator, std::string(op), start);
        return absl::OkStatus();
      }
    }
    static constexpr std::string_view kOne = "+-*/%~<>=()[]{},.:|";
    if (kOne.find(c) == std::string_view::npos) {
      return Error(start, StrCat("unexpected character '", std::string(1, c), "'"));
    }
    if (c == '(' || c == '[' || c == '{') ++*depth;
    if ((c == ')' || c == ']' || c == '}') && *depth > 0) --*depth;
    ++pos_;
    Emit(Token::Kind::kOperator, std::string(1, c), start);
    return absl::OkStatus();
  }

  absl::Status Number() {
    const size_t start = pos_;
    std::string digits;
    const auto run = [&] {
      while (pos_ < src_.size() && (IsDigit(src_[pos_]) || src_[pos_] == '_')) {
        if (src_[pos_] != '_') digits.push_back(src_[pos_]);
        ++pos_;
      }
    };
    run();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && IsDigit(src_[pos_ + 1])) {
      is_float = true;
      digits.push_back('.');
      ++pos_;
      run();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && IsDigit(src_[p])) {
        is_float = true;
        digits.append(src_, pos_, p - pos_);
        pos_ = p;
        run();
      }
    }
    Emit(is_float ? Token::Kind::kFloat : Token::Kind::kInt, std::move(digits), start);
    return absl::OkStatus();
  }

  absl::Status String() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return Error(start, "unterminated string");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= src_.size()) return Error(start, "unterminated string");
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case '0':
          out.push_back('\0');
          break;
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            const int h = pos_ < src_.size() ? HexValue(src_[pos_]) : -1;
            if (h < 0) return Error(start, StrCat("bad \\", std::string(1, e), " escape"));
            cp = cp * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
          if (cp > 0x10FFFF) return Error(start, "escape beyond U+10FFFF");
          AppendUtf8(cp, out);
          break;
        }
        default:
          out.push_back('\\');
          out.push_back(e);
      }
    }
    Emit(Token::Kind::kString, std::move(out), start);
    return absl::OkStatus();
  }

  const std::string src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  mutable size_t line_scan_ = 0;
  mutable size_t line_start_ = 0;
  mutable int line_ = 1;
};

}  // namespace

absl::StatusOr<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(Normalize(source)).Run();
}

}  // namespace llm::jinja
