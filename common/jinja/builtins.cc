#include "common/jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/jinja/text.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::jinja {
namespace {

absl::Status Error(std::string_view what, std::string_view message) {
  return absl::InvalidArgumentError(StrCat(what, ": ", message));
}

// Argument `i` (positional) or `key` (keyword); undefined when absent.
Value Arg(const CallArgs& args, size_t i, std::string_view key) {
  for (const auto& [k, v] : args.keyword) {
    if (k == key) return v;
  }
  return i < args.positional.size() ? args.positional[i] : Value();
}

absl::Status CheckSize(std::string_view what, size_t size, size_t max_bytes) {
  if (size > max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(what, ": result larger than the output limit (", max_bytes, " bytes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> StringArg(std::string_view what, const Value& v) {
  if (!v.is_string()) return Error(what, StrCat("expected a string, got ", v.TypeName()));
  return v.as_string();
}

absl::StatusOr<std::string> Replace(const std::string& s, const std::string& from,
                                    const std::string& to, int64_t count, size_t max_bytes) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    const std::vector<size_t> offsets = CharOffsets(s);
    for (size_t i = 0; i < offsets.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i + 1 < offsets.size()) out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
      LLM_RETURN_IF_ERROR(CheckSize("replace", out.size(), max_bytes));
    }
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += to;
    pos = at + from.size();
    ++done;
    LLM_RETURN_IF_ERROR(CheckSize("replace", out.size(), max_bytes));
  }
  out.append(s, pos);
  LLM_RETURN_IF_ERROR(CheckSize("replace", out.size(), max_bytes));
  return out;
}

// value[attribute], with dotted paths ("function.name") as jinja2 allows.
Value Attribute(const Value& v, std::string_view path) {
  Value cur = v;
  while (true) {
    const size_t dot = path.find('.');
    cur = cur.Get(path.substr(0, dot));
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

// select/reject/selectattr/rejectattr: the items for which the test (or
// truthiness when none is named) is `keep`.
absl::StatusOr<Value> SelectItems(std::string_view filter, const Value& input, const CallArgs& args,
                                  bool by_attribute, bool keep) {
  // jinja2 visits nothing when the input is false (none, undefined, empty).
  if (!input.Truthy()) return Value(List());
  LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    LLM_ASSIGN_OR_RETURN(attribute, StringArg(filter, Arg(args, next++, "")));
  }
  std::string test;
  if (next < args.positional.size()) {
    LLM_ASSIGN_OR_RETURN(test, StringArg(filter, args.positional[next++]));
  }
  CallArgs test_args;
  for (size_t i = next; i < args.positional.size(); ++i) {
    test_args.positional.push_back(args.positional[i]);
  }
  List out;
  for (const Value& item : items) {
    const Value subject = by_attribute ? Attribute(item, attribute) : item;
    bool pass;
    if (test.empty()) {
      pass = subject.Truthy();
    } else {
      LLM_ASSIGN_OR_RETURN(pass, ApplyTest(test, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> ToJsonFilter(const Value& input, const CallArgs& args, size_t max_bytes) {
  const Value indent = Arg(args, 0, "indent");
  int n = -1;
  if (indent.kind() == Value::Kind::kInt) {
    if (indent.as_int() < 0 || indent.as_int() > 64) return Error("tojson", "indent out of range");
    n = static_cast<int>(indent.as_int());
  } else if (!indent.is_undefined() && !indent.is_none()) {
    return Error("tojson", "indent must be an integer");
  }
  const Value sort = Arg(args, 99, "sort_keys");
  LLM_ASSIGN_OR_RETURN(std::string s, ToJson(input, n, sort.Truthy()));
  LLM_RETURN_IF_ERROR(CheckSize("tojson", s.size(), max_bytes));
  return Value(std::move(s));
}

absl::StatusOr<Value> Join(const Value& input, const CallArgs& args, size_t max_bytes) {
  LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
  const Value sep = Arg(args, 0, "d");
  const Value attribute = Arg(args, 1, "attribute");
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep.Str();
    out +=
        attribute.is_string() ? Attribute(items[i], attribute.as_string()).Str() : items[i].Str();
    LLM_RETURN_IF_ERROR(CheckSize("join", out.size(), max_bytes));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Sort(const Value& input, const CallArgs& args) {
  LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
  const bool reverse = Arg(args, 0, "reverse").Truthy();
  const Value attribute = Arg(args, 2, "attribute");
  absl::Status error;
  const auto key = [&](const Value& v) {
    return attribute.is_string() ? Attribute(v, attribute.as_string()) : v;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    absl::StatusOr<int> c = Compare(key(a), key(b));
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  LLM_RETURN_IF_ERROR(error);
  return Value(std::move(items));
}

absl::StatusOr<Value> Map(const Value& input, const CallArgs& args, size_t max_bytes) {
  if (!input.Truthy()) return Value(List());  // as jinja2
  LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
  const Value attribute = Arg(args, 99, "attribute");
  List out;
  if (attribute.is_string()) {
    const Value fallback = Arg(args, 99, "default");
    for (const Value& item : items) {
      Value v = Attribute(item, attribute.as_string());
      out.push_back(v.is_undefined() ? fallback : v);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return Error("map", "needs a filter name or attribute=");
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  for (const Value& item : items) {
    LLM_ASSIGN_OR_RETURN(Value v,
                         ApplyFilter(args.positional[0].as_string(), item, rest, max_bytes));
    out.push_back(std::move(v));
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return Value(0);
    case Value::Kind::kString:
      return Value(static_cast<int64_t>(CharLength(v.as_string())));
    case Value::Kind::kList:
      return Value(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::kDict:
      return Value(static_cast<int64_t>(v.as_dict().size()));
    default:
      return Error("length", StrCat(v.TypeName(), " has no length"));
  }
}

// str.format with {} / {0} / {name} fields and {{ }} escapes; format
// specifications and conversions ({0:>3}, {0!r}) are not supported.
absl::StatusOr<Value> Format(const std::string& s, const CallArgs& args, size_t max_bytes) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '}') {
      if (i + 1 >= s.size() || s[i + 1] != '}') {
        return Error("str.format()", "single '}' in the format string");
      }
      ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t end = s.find('}', i);
    if (end == std::string::npos) return Error("str.format()", "unterminated '{' field");
    const std::string field = s.substr(i + 1, end - i - 1);
    i = end;
    if (field.find_first_of(":!.[") != std::string::npos) {
      return Error("str.format()", "format specifications are not supported");
    }
    Value v;
    if (field.empty()) {
      if (next >= args.positional.size()) return Error("str.format()", "too few arguments");
      v = args.positional[next++];
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      const size_t k = std::stoul(field.substr(0, 9));
      if (k >= args.positional.size()) return Error("str.format()", "too few arguments");
      v = args.positional[k];
    } else {
      v = Arg(args, SIZE_MAX, field);
      if (v.is_undefined()) return Error("str.format()", StrCat("no argument '", field, "'"));
    }
    out += v.Str();
    LLM_RETURN_IF_ERROR(CheckSize("str.format()", out.size(), max_bytes));
  }
  return Value(std::move(out));
}

}  // namespace

absl::StatusOr<List> Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List();
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, unused] : v.as_dict()) keys.emplace_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      const std::vector<size_t> off = CharOffsets(v.as_string());
      for (size_t i = 0; i + 1 < off.size(); ++i) {
        chars.emplace_back(v.as_string().substr(off[i], off[i + 1] - off[i]));
      }
      return chars;
    }
    default:
      return absl::InvalidArgumentError(StrCat("cannot iterate over ", v.TypeName()));
  }
}

absl::StatusOr<int> Compare(const Value& a, const Value& b) {
  const bool num_a = a.is_number() || a.kind() == Value::Kind::kBool;
  const bool num_b = b.is_number() || b.kind() == Value::Kind::kBool;
  if (num_a && num_b) {
    if (a.kind() != Value::Kind::kFloat && b.kind() != Value::Kind::kFloat) {
      return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
    }
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.as_string().compare(b.as_string());
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].Equals(y[i])) continue;
      return Compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return absl::InvalidArgumentError(
      StrCat("cannot compare ", a.TypeName(), " with ", b.TypeName()));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return absl::InvalidArgumentError(
            StrCat("'in <string>' needs a string on the left, not ", item.TypeName()));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (v.Equals(item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      return item.is_string() && !container.Get(item.as_string()).is_undefined();
    case Value::Kind::kUndefined:
      return false;  // jinja2 iterates it: nothing
    default:
      return absl::InvalidArgumentError(
          StrCat("'in' needs a string, list or dict, not ", container.TypeName()));
  }
}

absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input, const CallArgs& args,
                                  size_t max_bytes) {
  const std::string what = StrCat("filter '", name, "'");
  if (name == "trim") {
    const Value chars = Arg(args, 0, "chars");
    const std::string in = input.Str();
    return Value(PyStrip(in, chars.is_string() ? &chars.as_string() : nullptr, true, true));
  }
  if (name == "length" || name == "count") return Length(input);
  if (name == "string") return Value(input.Str());
  if (name == "safe") return input;
  if (name == "upper") return Value(PyUpper(input.Str()));
  if (name == "lower") return Value(PyLower(input.Str()));
  if (name == "title") return Value(PyTitle(input.Str()));
  if (name == "capitalize") return Value(PyCapitalize(input.Str()));
  if (name == "tojson") return ToJsonFilter(input, args, max_bytes);
  if (name == "default" || name == "d") {
    const bool boolean = Arg(args, 1, "boolean").Truthy();
    const bool use_default = input.is_undefined() || (boolean && !input.Truthy());
    if (!use_default) return input;
    const Value d = Arg(args, 0, "default_value");
    return d.is_undefined() ? Value("") : d;
  }
  if (name == "first" || name == "last") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") return Join(input, args, max_bytes);
  if (name == "replace") {
    LLM_ASSIGN_OR_RETURN(std::string from, StringArg(what, Arg(args, 0, "old")));
    LLM_ASSIGN_OR_RETURN(std::string to, StringArg(what, Arg(args, 1, "new")));
    const Value count = Arg(args, 2, "count");
    LLM_ASSIGN_OR_RETURN(
        std::string out,
        Replace(input.Str(), from, to, count.kind() == Value::Kind::kInt ? count.as_int() : -1,
                max_bytes));
    return Value(std::move(out));
  }
  if (name == "items") {
    if (input.is_undefined()) return Value(List());
    if (!input.is_dict()) return Error(what, StrCat("expected a dict, got ", input.TypeName()));
    List out;
    for (const auto& [k, v] : input.as_dict()) out.emplace_back(List{Value(k), v});
    return Value(std::move(out));
  }
  if (name == "list") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
    return Value(std::move(items));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      const std::vector<size_t> off = CharOffsets(input.as_string());
      std::string out;
      for (size_t i = off.size() - 1; i > 0; --i) {
        out.append(input.as_string(), off[i - 1], off[i] - off[i - 1]);
      }
      return Value(std::move(out));
    }
    LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "unique") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
    List out;
    for (const Value& v : items) {
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return o.Equals(v); })) {
        out.push_back(v);
      }
    }
    return Value(std::move(out));
  }
  if (name == "select") return SelectItems(what, input, args, false, true);
  if (name == "reject") return SelectItems(what, input, args, false, false);
  if (name == "selectattr") return SelectItems(what, input, args, true, true);
  if (name == "rejectattr") return SelectItems(what, input, args, true, false);
  if (name == "map") return Map(input, args, max_bytes);
  if (name == "sort") return Sort(input, args);
  if (name == "sum") {
    LLM_ASSIGN_OR_RETURN(List items, Iterate(input));
    int64_t isum = 0;
    double fsum = 0;
    bool is_float = false;
    for (const Value& v : items) {
      if (!v.is_number() && v.kind() != Value::Kind::kBool) return Error(what, "not a number");
      if (v.kind() == Value::Kind::kFloat) is_float = true;
      isum += v.as_int();
      fsum += v.as_float();
    }
    return is_float ? Value(fsum) : Value(isum);
  }
  if (name == "int") {
    if (input.is_number() || input.kind() == Value::Kind::kBool) {
      return Value(static_cast<int64_t>(
          input.kind() == Value::Kind::kFloat ? std::trunc(input.as_float()) : input.as_int()));
    }
    if (input.is_string()) {
      char* end = nullptr;
      const std::string s = PyStrip(input.as_string(), nullptr, true, true);
      const long long v = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end == s.c_str() + s.size()) return Value(static_cast<int64_t>(v));
    }
    return Arg(args, 0, "default").is_undefined() ? Value(0) : Arg(args, 0, "default");
  }
  if (name == "float") {
    if (input.is_number() || input.kind() == Value::Kind::kBool) return Value(input.as_float());
    if (input.is_string()) {
      char* end = nullptr;
      const std::string s = PyStrip(input.as_string(), nullptr, true, true);
      const double v = std::strtod(s.c_str(), &end);
      if (!s.empty() && end == s.c_str() + s.size()) return Value(v);
    }
    return Value(0.0);
  }
  if (name == "abs") {
    if (input.kind() == Value::Kind::kFloat) return Value(std::fabs(input.as_float()));
    if (input.is_number()) {
      if (input.as_int() == INT64_MIN) return Error(what, "integer overflow");
      return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
    }
    return Error(what, StrCat("expected a number, got ", input.TypeName()));
  }
  if (name == "round") {
    if (!input.is_number()) return Error(what, "expected a number");
    const Value precision = Arg(args, 0, "precision");
    const int64_t p =
        precision.kind() == Value::Kind::kInt ? std::clamp<int64_t>(precision.as_int(), 0, 15) : 0;
    const double scale = std::pow(10.0, static_cast<double>(p));
    return Value(std::nearbyint(input.as_float() * scale) / scale);
  }
  if (name == "wordcount") {
    return Value(static_cast<int64_t>(PySplit(input.Str(), nullptr, -1).size()));
  }
  return Error(what, "unknown filter");
}

absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const Value arg = Arg(args, 0, "");
  using K = Value::Kind;
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind() == K::kBool;
  if (name == "true") return v.kind() == K::kBool && v.as_bool();
  if (name == "false") return v.kind() == K::kBool && !v.as_bool();
  if (name == "integer") return v.kind() == K::kInt;
  if (name == "float") return v.kind() == K::kFloat;
  if (name == "number") return v.is_number() || v.kind() == K::kBool;
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") {
    return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  }
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.kind() == K::kFunction;
  if (name == "lower") return v.is_string() && PyLower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && PyUpper(v.as_string()) == v.as_string();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind() != K::kInt && v.kind() != K::kBool) {
      return Error(StrCat("test '", name, "'"), "expected an integer");
    }
    int64_t d = 2;
    if (name == "divisibleby") {
      if (arg.kind() != K::kInt || arg.as_int() == 0) {
        return Error("test 'divisibleby'", "expected a non-zero integer");
      }
      d = arg.as_int();
    }
    const int64_t r = d == -1 ? 0 : v.as_int() % d;
    if (name == "odd") return r != 0;
    return r == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.Equals(arg);
  if (name == "ne" || name == "!=") return !v.Equals(arg);
  if (name == "sameas") {
    return v.kind() == arg.kind() && (v.is_none() || v.is_undefined() || v.Equals(arg));
  }
  if (name == "lt" || name == "<" || name == "lessthan" || name == "le" || name == "<=" ||
      name == "gt" || name == ">" || name == "greaterthan" || name == "ge" || name == ">=") {
    LLM_ASSIGN_OR_RETURN(int c, Compare(v, arg));
    if (name == "lt" || name == "<" || name == "lessthan") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == ">" || name == "greaterthan") return c > 0;
    return c >= 0;
  }
  if (name == "in") return Contains(arg, v);
  return Error(StrCat("test '", name, "'"), "unknown test");
}

std::optional<Value> BoundMethod(const Value& receiver, std::string_view name, size_t max_bytes) {
  const std::string method(name);
  if (receiver.is_dict()) {
    if (name != "items" && name != "keys" && name != "values" && name != "get") return std::nullopt;
    return Value::Func([receiver, method](const CallArgs& args) -> absl::StatusOr<Value> {
      const Dict& d = receiver.as_dict();
      if (method == "get") {
        const Value key = Arg(args, 0, "key");
        Value v = key.is_string() ? receiver.Get(key.as_string()) : Value();
        if (!v.is_undefined()) return v;
        const Value fallback = Arg(args, 1, "default");
        return fallback.is_undefined() ? Value::None() : fallback;
      }
      List out;
      for (const auto& [k, v] : d) {
        if (method == "items") out.emplace_back(List{Value(k), v});
        if (method == "keys") out.emplace_back(k);
        if (method == "values") out.push_back(v);
      }
      return Value(std::move(out));
    });
  }
  if (!receiver.is_string()) return std::nullopt;
  static constexpr std::string_view kMethods[] = {
      "strip",   "lstrip",  "rstrip",  "startswith", "endswith", "split",   "rsplit", "upper",
      "lower",   "title",   "replace", "capitalize", "find",     "count",   "join",   "splitlines",
      "isdigit", "isspace", "isalpha", "isalnum",    "isupper",  "islower", "format"};
  if (std::find(std::begin(kMethods), std::end(kMethods), name) == std::end(kMethods)) {
    return std::nullopt;
  }
  return Value::Func([receiver, method, max_bytes](const CallArgs& args) -> absl::StatusOr<Value> {
    const std::string& s = receiver.as_string();
    const std::string what = StrCat("str.", method, "()");
    const Value a0 = Arg(args, 0, "");
    const auto optional_string = [&](const Value& v) -> absl::StatusOr<const std::string*> {
      if (v.is_undefined() || v.is_none()) return nullptr;
      if (!v.is_string()) return Error(what, "expected a string argument");
      return &v.as_string();
    };
    if (method == "strip" || method == "lstrip" || method == "rstrip") {
      LLM_ASSIGN_OR_RETURN(const std::string* chars, optional_string(a0));
      return Value(PyStrip(s, chars, method != "rstrip", method != "lstrip"));
    }
    if (method == "startswith" || method == "endswith") {
      std::vector<std::string> candidates;
      if (a0.is_string()) {
        candidates.push_back(a0.as_string());
      } else if (a0.is_list()) {
        for (const Value& v : a0.as_list()) {
          if (!v.is_string()) return Error(what, "expected strings");
          candidates.push_back(v.as_string());
        }
      } else {
        return Error(what, "expected a string argument");
      }
      for (const std::string& c : candidates) {
        const bool hit =
            method == "startswith"
                ? s.compare(0, c.size(), c) == 0
                : s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0;
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (method == "split" || method == "rsplit") {
      const Value sep_value = Arg(args, 0, "sep");  // outlives `sep`, which points into it
      LLM_ASSIGN_OR_RETURN(const std::string* sep, optional_string(sep_value));
      if (sep != nullptr && sep->empty()) return Error(what, "empty separator");
      const Value maxsplit = Arg(args, 1, "maxsplit");
      const int64_t n = maxsplit.kind() == Value::Kind::kInt ? maxsplit.as_int() : -1;
      if (method == "rsplit" && n >= 0) return Error(what, "maxsplit is not supported");
      List out;
      for (std::string& part : PySplit(s, sep, n)) out.emplace_back(std::move(part));
      return Value(std::move(out));
    }
    if (method == "splitlines") {
      List out;
      size_t pos = 0;
      while (pos < s.size()) {
        const size_t nl = s.find('\n', pos);
        if (nl == std::string::npos) {
          out.emplace_back(s.substr(pos));
          break;
        }
        out.emplace_back(s.substr(pos, nl - pos));
        pos = nl + 1;
      }
      return Value(std::move(out));
    }
    if (method == "format") return Format(s, args, max_bytes);
    if (method == "upper") return Value(PyUpper(s));
    if (method == "lower") return Value(PyLower(s));
    if (method == "title") return Value(PyTitle(s));
    if (method == "capitalize") return Value(PyCapitalize(s));
    if (method == "replace") {
      if (!a0.is_string() || !Arg(args, 1, "").is_string()) return Error(what, "expected strings");
      const Value count = Arg(args, 2, "count");
      LLM_ASSIGN_OR_RETURN(
          std::string out,
          Replace(s, a0.as_string(), Arg(args, 1, "").as_string(),
                  count.kind() == Value::Kind::kInt ? count.as_int() : -1, max_bytes));
      return Value(std::move(out));
    }
    if (method == "find" || method == "count") {
      if (!a0.is_string()) return Error(what, "expected a string argument");
      if (method == "find") {
        const size_t at = s.find(a0.as_string());
        if (at == std::string::npos) return Value(-1);
        return Value(static_cast<int64_t>(CharLength(std::string_view(s).substr(0, at))));
      }
      if (a0.as_string().empty()) return Value(static_cast<int64_t>(CharLength(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(a0.as_string()); at != std::string::npos;
           at = s.find(a0.as_string(), at + a0.as_string().size())) {
        ++n;
      }
      return Value(n);
    }
    if (method == "join") {
      LLM_ASSIGN_OR_RETURN(List items, Iterate(a0));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) return Error(what, "expected strings");
        if (i > 0) out += s;
        out += items[i].as_string();
        LLM_RETURN_IF_ERROR(CheckSize(what, out.size(), max_bytes));
      }
      return Value(std::move(out));
    }
    // is* predicates (ASCII classes).
    if (s.empty()) return Value(false);
    bool all = true, any_cased = false;
    for (unsigned char c : s) {
      const bool digit = c >= '0' && c <= '9';
      const bool upper = c >= 'A' && c <= 'Z';
      const bool lower = c >= 'a' && c <= 'z';
      const bool space = c == ' ' || (c >= '\t' && c <= '\r');
      any_cased = any_cased || upper || lower;
      if (method == "isdigit") all = all && digit;
      if (method == "isspace") all = all && space;
      if (method == "isalpha") all = all && (upper || lower);
      if (method == "isalnum") all = all && (upper || lower || digit);
      if (method == "isupper") all = all && !lower;
      if (method == "islower") all = all && !upper;
    }
    if (method == "isupper" || method == "islower") all = all && any_cased;
    return Value(all);
  });
}

}  // namespace llm::jinja
