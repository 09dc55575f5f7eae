#include "client/tools/tool_call_parser.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <utility>

#include "common/strings.h"

namespace llm::client {
namespace {

using Json = nlohmann::ordered_json;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool IsIdent(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool IsAlnum9(std::string_view id) {
  if (id.size() != 9) return false;
  for (char c : id) {
    if (!IsIdent(c) || c == '_') return false;
  }
  return true;
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// `s` is a proper prefix of `whole` (or equal when `or_equal`).
bool IsPrefixOf(std::string_view s, std::string_view whole) {
  return s.size() <= whole.size() && whole.substr(0, s.size()) == s;
}

enum class Scan { kComplete, kIncomplete, kInvalid };

// The end of the JSON array or object (or, with `python`, the Python list,
// tuple or dict) that opens at s[i]: strings skipped, brackets matched, at
// most kMaxToolJsonDepth levels (deeper is invalid).
Scan ScanValue(std::string_view s, size_t i, bool python, size_t* end) {
  std::string stack;
  char quote = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (quote != 0) {
      if (c == '\\') {
        ++k;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    switch (c) {
      case '"':
        quote = c;
        break;
      case '\'':
        if (!python) return Scan::kInvalid;
        quote = c;
        break;
      case '{':
        stack.push_back('}');
        break;
      case '[':
        stack.push_back(']');
        break;
      case '(':
        if (!python) return Scan::kInvalid;
        stack.push_back(')');
        break;
      case '}':
      case ']':
      case ')':
        if (stack.empty() || stack.back() != c) return Scan::kInvalid;
        stack.pop_back();
        break;
      default:
        if (k == i) return Scan::kInvalid;  // not a container
        break;
    }
    if (static_cast<int>(stack.size()) > kMaxToolJsonDepth) return Scan::kInvalid;
    if (stack.empty()) {
      *end = k + 1;
      return Scan::kComplete;
    }
  }
  return Scan::kIncomplete;
}

// A call as the model wrote it.
struct RawCall {
  std::string name;
  std::string arguments;  // compact JSON text of an object
  std::string id;         // the model's own ("" = none)
};

// Arguments as an object's compact JSON text: an object, a string holding
// one, or nothing ({}).
std::optional<std::string> ArgumentsText(const Json* v) {
  if (v == nullptr || v->is_null()) return "{}";
  if (v->is_string()) {
    Json inner = Json::parse(v->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
    if (inner.is_discarded() || !inner.is_object()) return std::nullopt;
    return inner.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  if (!v->is_object()) return std::nullopt;
  return v->dump(-1, ' ', false, Json::error_handler_t::replace);
}

const Json* Member(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// One call object: {"name", "arguments" | "parameters", "id"?}, or OpenAI's
// {"type": "function", "function": {...}}.
std::optional<RawCall> CallFromJson(const Json& j) {
  if (!j.is_object()) return std::nullopt;
  if (const Json* f = Member(j, "function"); f != nullptr && f->is_object()) {
    std::optional<RawCall> inner = CallFromJson(*f);
    if (inner && inner->id.empty()) {
      if (const Json* id = Member(j, "id"); id != nullptr && id->is_string()) inner->id = *id;
    }
    return inner;
  }
  const Json* name = Member(j, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  const Json* args = Member(j, "arguments");
  if (args == nullptr) args = Member(j, "parameters");
  std::optional<std::string> arguments = ArgumentsText(args);
  if (!arguments) return std::nullopt;
  RawCall call{name->get<std::string>(), *std::move(arguments), ""};
  if (const Json* id = Member(j, "id"); id != nullptr && id->is_string()) call.id = *id;
  return call;
}

// A JSON object (one call) or a non-empty array of them.
std::optional<std::vector<RawCall>> CallsFromJson(std::string_view text) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  std::vector<RawCall> calls;
  if (j.is_array()) {
    if (j.empty()) return std::nullopt;
    for (const Json& one : j) {
      std::optional<RawCall> call = CallFromJson(one);
      if (!call) return std::nullopt;
      calls.push_back(*std::move(call));
    }
  } else {
    std::optional<RawCall> call = CallFromJson(j);
    if (!call) return std::nullopt;
    calls.push_back(*std::move(call));
  }
  return calls;
}

// Python literals (a pythonic call's arguments) as JSON.
class PythonReader {
 public:
  explicit PythonReader(std::string_view s) : s_(s) {}

  // name(k=v, ...) ; at_ left after the ')'.
  std::optional<RawCall> Call() {
    Space();
    const size_t start = at_;
    while (at_ < s_.size() && (IsIdent(s_[at_]) || s_[at_] == '.')) ++at_;
    RawCall call{std::string(s_.substr(start, at_ - start)), "", ""};
    if (at_ == start || !Eat('(')) return std::nullopt;
    Json args = Json::object();
    Space();
    while (!Eat(')')) {
      Space();
      const size_t k = at_;
      while (at_ < s_.size() && IsIdent(s_[at_])) ++at_;
      if (at_ == k) return std::nullopt;
      const std::string key(s_.substr(k, at_ - k));
      Space();
      if (!Eat('=')) return std::nullopt;
      std::optional<Json> v = Value(1);
      if (!v) return std::nullopt;
      args[key] = *std::move(v);
      Space();
      if (Eat(',')) continue;
      Space();
      if (!Eat(')')) return std::nullopt;
      break;
    }
    call.arguments = args.dump(-1, ' ', false, Json::error_handler_t::replace);
    return call;
  }

  bool Eat(char c) {
    Space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void Space() { at_ = SkipSpace(s_, at_); }
  bool AtEnd() {
    Space();
    return at_ == s_.size();
  }

 private:
  std::optional<Json> Value(int depth) {
    if (depth > kMaxToolJsonDepth) return std::nullopt;
    Space();
    if (at_ >= s_.size()) return std::nullopt;
    const char c = s_[at_];
    if (c == '"' || c == '\'') return String();
    if (c == '[' || c == '(') return Sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return Mapping(depth);
    const size_t start = at_;
    while (at_ < s_.size() &&
           (IsIdent(s_[at_]) || s_[at_] == '.' || s_[at_] == '-' || s_[at_] == '+')) {
      ++at_;
    }
    const std::string_view word = s_.substr(start, at_ - start);
    if (word == "True" || word == "true") return Json(true);
    if (word == "False" || word == "false") return Json(false);
    if (word == "None" || word == "null") return Json(nullptr);
    Json number = Json::parse(word, nullptr, /*allow_exceptions=*/false);
    if (number.is_discarded() || !number.is_number()) return std::nullopt;
    return number;
  }
  std::optional<Json> String() {
    const char quote = s_[at_++];
    std::string out;
    while (at_ < s_.size() && s_[at_] != quote) {
      char c = s_[at_++];
      if (c == '\\' && at_ < s_.size()) {
        const char e = s_[at_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          default:
            c = e;  // \\ \' \" and anything else as itself
            break;
        }
      }
      out.push_back(c);
    }
    if (at_ >= s_.size()) return std::nullopt;
    ++at_;
    return Json(std::move(out));
  }
  std::optional<Json> Sequence(char close, int depth) {
    ++at_;
    Json out = Json::array();
    while (!Eat(close)) {
      std::optional<Json> v = Value(depth + 1);
      if (!v) return std::nullopt;
      out.push_back(*std::move(v));
      if (!Eat(',') && !Eat(close)) return std::nullopt;
      if (at_ > 0 && s_[at_ - 1] == close) break;
    }
    return out;
  }
  std::optional<Json> Mapping(int depth) {
    ++at_;
    Json out = Json::object();
    while (!Eat('}')) {
      std::optional<Json> k = Value(depth + 1);
      if (!k || !k->is_string() || !Eat(':')) return std::nullopt;
      std::optional<Json> v = Value(depth + 1);
      if (!v) return std::nullopt;
      out[k->get<std::string>()] = *std::move(v);
      if (!Eat(',') && !Eat('}')) return std::nullopt;
      if (s_[at_ - 1] == '}') break;
    }
    return out;
  }

  std::string_view s_;
  size_t at_ = 0;
};

struct Attempt {
  enum Status { kMore, kDone, kFailed } status = kFailed;
  size_t consumed = 0;
  std::vector<RawCall> calls;
};

Attempt More() { return {Attempt::kMore, 0, {}}; }
Attempt Failed() { return {}; }
Attempt Done(size_t consumed, std::vector<RawCall> calls) {
  return {Attempt::kDone, consumed, std::move(calls)};
}

// The value at s[i] scanned to its end (*end); or what to answer at once
// when it is not whole (more text) or not a value (not a call).
std::optional<Attempt> Scanned(std::string_view s, size_t i, bool python, size_t* end) {
  switch (ScanValue(s, i, python, end)) {
    case Scan::kIncomplete:
      return More();
    case Scan::kInvalid:
      return Failed();
    case Scan::kComplete:
      break;
  }
  return std::nullopt;
}

// `calls` end at s[end], then (after whitespace) `close`: done past it; at
// the end of the generation a missing or partial `close` still ends them.
Attempt Closed(std::string_view s, size_t end, std::string_view close, bool final,
               std::vector<RawCall> calls) {
  const size_t j = SkipSpace(s, end);
  const std::string_view rest = s.substr(j);
  if (rest.substr(0, close.size()) == close) return Done(j + close.size(), std::move(calls));
  if (IsPrefixOf(rest, close)) return final ? Done(s.size(), std::move(calls)) : More();
  return Failed();
}

// A JSON call (or array of calls) at s[i], then `close` (may be empty):
// Hermes' <tool_call>, <|tool_call|>, Mistral's [TOOL_CALLS] (no close).
// With `close` missing at the end of the generation the call is still whole.
Attempt JsonThenClose(std::string_view s, size_t i, std::string_view close, bool final) {
  i = SkipSpace(s, i);
  if (i == s.size()) return More();
  size_t end = 0;
  if (std::optional<Attempt> stop = Scanned(s, i, /*python=*/false, &end)) {
    return *std::move(stop);
  }
  std::optional<std::vector<RawCall>> calls = CallsFromJson(s.substr(i, end - i));
  if (!calls) return Failed();
  if (close.empty()) return Done(end, *std::move(calls));
  return Closed(s, end, close, final, *std::move(calls));
}

// Llama 3: {"name", "parameters"} objects separated by ";" at s[i].
Attempt Llama3Json(std::string_view s, size_t i, bool final) {
  std::vector<RawCall> calls;
  while (true) {
    size_t end = 0;
    if (std::optional<Attempt> stop = Scanned(s, i, /*python=*/false, &end)) {
      return *std::move(stop);
    }
    const Json j = Json::parse(s.substr(i, end - i), nullptr, /*allow_exceptions=*/false);
    // A call names its arguments: a plain JSON answer ({"name": "Bob"}) is not one.
    if (j.is_discarded() || !j.is_object() ||
        (!j.contains("parameters") && !j.contains("arguments"))) {
      return Failed();
    }
    std::optional<RawCall> call = CallFromJson(j);
    if (!call) return Failed();
    call->id.clear();
    calls.push_back(*std::move(call));
    size_t k = SkipSpace(s, end);
    if (k == s.size()) return final ? Done(end, std::move(calls)) : More();
    if (s[k] != ';') return Done(end, std::move(calls));
    k = SkipSpace(s, k + 1);
    if (k == s.size()) return final ? Done(end, std::move(calls)) : More();
    if (s[k] != '{') return Done(end, std::move(calls));
    i = k;
  }
}

// Llama 3's built-in tools after <|python_tag|>: name.call(k="v", ...).
Attempt Llama3Builtin(std::string_view s, size_t i, bool final) {
  size_t k = i;
  while (k < s.size() && IsIdent(s[k])) ++k;
  constexpr std::string_view kCall = ".call(";
  const std::string_view after = s.substr(k);
  if (k == i || after.substr(0, kCall.size()) != kCall) {
    return IsPrefixOf(after, kCall) && !final ? More() : Failed();
  }
  size_t end = 0;
  if (std::optional<Attempt> stop = Scanned(s, k + kCall.size() - 1, /*python=*/true, &end)) {
    return *std::move(stop);
  }
  std::string text = StrCat(s.substr(i, k - i), s.substr(k + kCall.size() - 1, end - k - 5));
  PythonReader reader(text);
  std::optional<RawCall> call = reader.Call();
  if (!call || !reader.AtEnd()) return Failed();
  return Done(end, {*std::move(call)});
}

// Mistral's newer form: name[ARGS]{...}.
Attempt MistralArgs(std::string_view s, size_t i, bool final) {
  size_t k = i;
  while (k < s.size() && (IsIdent(s[k]) || s[k] == '-' || s[k] == '.')) ++k;
  constexpr std::string_view kArgs = "[ARGS]";
  const std::string_view after = s.substr(k);
  if (k == i || after.substr(0, kArgs.size()) != kArgs) {
    return k == s.size() || (IsPrefixOf(after, kArgs) && !final) ? More() : Failed();
  }
  const size_t j = SkipSpace(s, k + kArgs.size());
  if (j == s.size()) return More();
  size_t end = 0;
  if (std::optional<Attempt> stop = Scanned(s, j, /*python=*/false, &end)) {
    return *std::move(stop);
  }
  const Json args = Json::parse(s.substr(j, end - j), nullptr, /*allow_exceptions=*/false);
  std::optional<std::string> arguments = args.is_discarded() ? std::nullopt : ArgumentsText(&args);
  if (!arguments) return Failed();
  return Done(end, {RawCall{std::string(s.substr(i, k - i)), *std::move(arguments), ""}});
}

// Gemma: [name(k=v, ...), ...] (or one name(...)) opening the answer,
// possibly in a ```tool_code fence.
Attempt Pythonic(std::string_view s, size_t i, bool final, const std::vector<std::string>& names) {
  constexpr std::string_view kFences[] = {"```tool_code\n", "```python\n", "```\n"};
  bool fenced = false;
  if (s.substr(i, 1) == "`") {
    for (std::string_view fence : kFences) {
      if (s.substr(i, fence.size()) == fence) {
        i += fence.size();
        fenced = true;
        break;
      }
      if (IsPrefixOf(s.substr(i), fence) && !final) return More();
    }
    if (!fenced) return Failed();
    i = SkipSpace(s, i);
    if (i == s.size()) return More();
  }
  const bool list = s[i] == '[';
  size_t k = list ? SkipSpace(s, i + 1) : i;
  // The first name must be a tool's (or, without names, an identifier).
  const size_t name_start = k;
  while (k < s.size() && IsIdent(s[k])) ++k;
  const std::string_view name = s.substr(name_start, k - name_start);
  if (k == s.size()) {
    if (final) return Failed();
    for (const std::string& n : names) {
      if (IsPrefixOf(name, n)) return More();
    }
    return names.empty() && (name.empty() || !(name[0] >= '0' && name[0] <= '9')) ? More()
                                                                                  : Failed();
  }
  if (name.empty() || s[k] != '(') return Failed();
  if (!names.empty()) {
    bool known = false;
    for (const std::string& n : names) known = known || n == name;
    if (!known) return Failed();
  }
  size_t end = 0;
  if (std::optional<Attempt> stop = Scanned(s, list ? i : k, /*python=*/true, &end)) {
    return *std::move(stop);
  }
  const std::string_view body = list ? s.substr(i + 1, end - i - 2) : s.substr(i, end - i);
  PythonReader reader(body);
  std::vector<RawCall> calls;
  do {
    std::optional<RawCall> call = reader.Call();
    if (!call) return Failed();
    calls.push_back(*std::move(call));
  } while (reader.Eat(','));
  if (!reader.AtEnd()) return Failed();
  if (!fenced) return Done(end, std::move(calls));
  return Closed(s, end, "```", final, std::move(calls));
}

// The markers that open a call anywhere in the answer.
std::vector<std::string_view> Markers(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermes:
      return {"<tool_call>"};
    case ToolSyntax::kLlama3:
      return {"<|python_tag|>"};
    case ToolSyntax::kMistral:
      return {"[TOOL_CALLS]"};
    case ToolSyntax::kToolCall:
      return {"<|tool_call|>", "functools"};
    case ToolSyntax::kPythonic:
    case ToolSyntax::kNone:
      break;
  }
  return {};
}

// Whether a call may open the answer without a marker.
bool StartsBare(ToolSyntax syntax) {
  return syntax == ToolSyntax::kLlama3 || syntax == ToolSyntax::kPythonic;
}

}  // namespace

std::string RandomToolCallId(std::string_view prefix, size_t length) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string out(prefix);
  for (size_t i = 0; i < length; ++i) out.push_back(kChars[rng() % (sizeof(kChars) - 1)]);
  return out;
}

ToolCallParser::ToolCallParser(ToolSyntax syntax, ToolParserOptions options)
    : syntax_(syntax), options_(std::move(options)) {
  opened_ = !StartsBare(syntax_);
}

void ToolCallParser::Feed(std::string_view text, std::vector<ToolCallEvent>* events) {
  buf_.append(text);
  Process(/*final=*/false, events);
}

void ToolCallParser::Finish(std::vector<ToolCallEvent>* events) { Process(/*final=*/true, events); }

size_t ToolCallParser::FindCall(bool final, bool* wait) {
  *wait = false;
  if (!opened_) {
    const size_t i = SkipSpace(buf_, 0);
    if (i == buf_.size()) {
      if (!final) {
        *wait = true;
        return std::string::npos;
      }
      opened_ = true;
    } else {
      const char c = buf_[i];
      const bool candidate =
          syntax_ == ToolSyntax::kLlama3 ? c == '{' : c == '[' || c == '`' || IsIdent(c);
      if (candidate) {
        marker_ = Marker::kStart;
        return i;
      }
      opened_ = true;
    }
  }
  size_t best = std::string::npos;
  for (std::string_view m : Markers(syntax_)) {
    const size_t at = buf_.find(m);
    if (at < best) {
      best = at;
      marker_size_ = m.size();
    }
  }
  if (best != std::string::npos) marker_ = Marker::kTag;
  return best;
}

void ToolCallParser::Process(bool final, std::vector<ToolCallEvent>* events) {
  while (true) {
    if (state_ == State::kText) {
      bool wait = false;
      const size_t at = FindCall(final, &wait);
      if (wait) return;
      if (at == std::string::npos) {
        size_t emit = buf_.size();
        if (!final) {
          // Hold a suffix that may begin a marker, and trailing whitespace.
          size_t keep = 0;
          for (std::string_view m : Markers(syntax_)) {
            for (size_t n = std::min(m.size() - 1, buf_.size()); n > keep; --n) {
              if (std::string_view(buf_).substr(buf_.size() - n) == m.substr(0, n)) {
                keep = n;
                break;
              }
            }
          }
          emit = buf_.size() - keep;
          while (emit > 0 && IsSpace(buf_[emit - 1])) --emit;
        } else if (!calls_.empty() && SkipSpace(buf_, 0) == buf_.size()) {
          emit = 0;  // whitespace after the calls: no content
          buf_.clear();
        }
        EmitContent(std::string_view(buf_).substr(0, emit), events);
        buf_.erase(0, emit);
        return;
      }
      // The whitespace before a call is no content (unless the call fails).
      size_t end = at;
      while (end > 0 && IsSpace(buf_[end - 1])) --end;
      EmitContent(std::string_view(buf_).substr(0, end), events);
      space_ = buf_.substr(end, at - end);
      buf_.erase(0, at);
      state_ = State::kCall;
      continue;
    }
    const std::string_view s = buf_;
    Attempt a;
    if (marker_ == Marker::kStart) {
      a = syntax_ == ToolSyntax::kLlama3 ? Llama3Json(s, 0, final)
                                         : Pythonic(s, 0, final, options_.tool_names);
    } else {
      const std::string_view marker = s.substr(0, marker_size_);
      const size_t i = SkipSpace(s, marker_size_);
      if (marker == "<tool_call>") {
        a = JsonThenClose(s, i, "</tool_call>", final);
      } else if (marker == "<|tool_call|>") {
        a = JsonThenClose(s, i, "<|/tool_call|>", final);
      } else if (marker == "functools") {
        a = i == s.size() ? More() : s[i] == '[' ? JsonThenClose(s, i, "", final) : Failed();
      } else if (marker == "[TOOL_CALLS]") {
        a = i == s.size()                ? More()
            : s[i] == '[' || s[i] == '{' ? JsonThenClose(s, i, "", final)
                                         : MistralArgs(s, i, final);
      } else {  // <|python_tag|>
        a = i == s.size() ? More()
            : s[i] == '{' ? Llama3Json(s, i, final)
                          : Llama3Builtin(s, i, final);
      }
    }
    if (a.status == Attempt::kMore && !final) return;
    state_ = State::kText;
    if (a.status != Attempt::kDone) {
      // Not a call (or not whole at the end): its text is content.
      EmitContent(space_, events);
      space_.clear();
      if (marker_ == Marker::kStart) {
        opened_ = true;
      } else {
        EmitContent(s.substr(0, marker_size_), events);
        buf_.erase(0, marker_size_);
      }
      continue;
    }
    for (RawCall& raw : a.calls) {
      ToolCall call;
      call.id = IsAlnum9(raw.id)  ? raw.id
                : options_.new_id ? options_.new_id()
                                  : RandomToolCallId("call_", 24);
      call.name = std::move(raw.name);
      call.arguments = std::move(raw.arguments);
      EmitCall(std::move(call), events);
    }
    buf_.erase(0, a.consumed);
    space_.clear();
    opened_ = true;
  }
}

void ToolCallParser::EmitContent(std::string_view text, std::vector<ToolCallEvent>* events) {
  if (text.empty()) return;
  content_ += text;
  if (!events->empty() && events->back().index < 0) {
    events->back().content += text;
  } else {
    ToolCallEvent e;
    e.content = std::string(text);
    events->push_back(std::move(e));
  }
}

void ToolCallParser::EmitCall(ToolCall call, std::vector<ToolCallEvent>* events) {
  if (calls_.size() >= options_.max_calls) {
    ++dropped_;
    return;
  }
  ToolCallEvent e;
  e.index = static_cast<int>(calls_.size());
  e.call = call;
  calls_.push_back(std::move(call));
  events->push_back(std::move(e));
}

}  // namespace llm::client
