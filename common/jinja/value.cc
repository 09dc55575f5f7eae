#include "common/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm::jinja {

namespace {

int DepthOf(const List& list) {
  int d = 0;
  for (const Value& v : list) d = std::max(d, v.depth());
  return d + 1;
}

int DepthOf(const Dict& dict) {
  int d = 0;
  for (const auto& [k, v] : dict) d = std::max(d, v.depth());
  return d + 1;
}

}  // namespace

Value::Value(List list)
    : kind_(Kind::kList),
      depth_(DepthOf(list)),
      list_(std::make_shared<const List>(std::move(list))) {}

Value::Value(Dict dict)
    : kind_(Kind::kDict), depth_(DepthOf(dict)), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::Namespace(Dict attributes) {
  Value v(Kind::kNamespace);
  v.depth_ = DepthOf(attributes);
  v.dict_ = std::make_shared<Dict>(std::move(attributes));
  return v;
}

Value Value::Func(Function f) {
  Value v(Kind::kFunction);
  v.function_ = std::make_shared<const Function>(std::move(f));
  return v;
}

Value Value::Get(std::string_view key) const {
  if (kind_ != Kind::kDict && kind_ != Kind::kNamespace) return Value();
  for (const auto& [k, v] : *dict_) {
    if (k == key) return v;
  }
  return Value();
}

bool Value::SetAttribute(std::string_view key, Value v) const {
  if (kind_ != Kind::kNamespace) return false;
  for (auto& [k, old] : *dict_) {
    if (k == key) {
      old = std::move(v);
      return true;
    }
  }
  dict_->emplace_back(std::string(key), std::move(v));
  return true;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0;
    case Kind::kString:
      return !string_.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string FormatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, then Python's layout: positional
  // for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, end);  // e.g. "-1.2345e+02"
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(exponent) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, exponent + 1);
      out += ".";
      out += digits.substr(exponent + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) StrAppend(&out, ".", digits.substr(1));
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  out += exp;
  return out;
}

namespace {

std::string ReprString(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::Str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return string_;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return int_ ? "True" : "False";
    case Kind::kInt:
      return StrCat(int_);
    case Kind::kFloat:
      return FormatFloat(float_);
    case Kind::kString:
      return ReprString(string_);
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*list_)[i].Repr();
      }
      return out + "]";
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : *dict_) {
        if (!first) out += ", ";
        first = false;
        StrAppend(&out, ReprString(k), ": ", v.Repr());
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kFunction:
      return "<function>";
  }
  return "";
}

bool Value::Equals(const Value& other) const {
  const bool num_a = kind_ == Kind::kBool || is_number();
  const bool num_b = other.kind_ == Kind::kBool || other.is_number();
  if (num_a && num_b) {
    if (kind_ != Kind::kFloat && other.kind_ != Kind::kFloat) return int_ == other.int_;
    return as_float() == other.as_float();
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return string_ == other.string_;
    case Kind::kList:
      return std::equal(list_->begin(), list_->end(), other.list_->begin(), other.list_->end(),
                        [](const Value& a, const Value& b) { return a.Equals(b); });
    case Kind::kDict: {
      if (dict_->size() != other.dict_->size()) return false;
      for (const auto& [k, v] : *dict_) {
        bool found = false;
        for (const auto& [k2, v2] : *other.dict_) {
          if (k == k2) {
            if (!v.Equals(v2)) return false;
            found = true;
            break;
          }
        }
        if (!found) return false;
      }
      return true;
    }
    case Kind::kNamespace:
      return dict_ == other.dict_;
    case Kind::kFunction:
      return function_ == other.function_;
    default:
      return false;
  }
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "namespace";
    case Kind::kFunction:
      return "function";
  }
  return "value";
}

namespace {

void JsonString(std::string_view s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

absl::Status Json(const Value& v, int indent, bool sort_keys, int depth, std::string& out) {
  if (depth > 256) return absl::InvalidArgumentError("tojson: nesting too deep");
  const auto newline = [&](int level) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * level, ' ');
  };
  const std::string_view item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return absl::InvalidArgumentError("tojson: cannot encode an undefined value");
    case Value::Kind::kFunction:
      return absl::InvalidArgumentError("tojson: cannot encode a function");
    case Value::Kind::kNone:
      out += "null";
      return absl::OkStatus();
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return absl::OkStatus();
    case Value::Kind::kInt:
      StrAppend(&out, v.as_int());
      return absl::OkStatus();
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f)) {
        out += "NaN";
      } else if (std::isinf(f)) {
        out += f > 0 ? "Infinity" : "-Infinity";
      } else {
        out += FormatFloat(f);
      }
      return absl::OkStatus();
    }
    case Value::Kind::kString:
      JsonString(v.as_string(), out);
      return absl::OkStatus();
    case Value::Kind::kList: {
      const List& list = v.as_list();
      if (list.empty()) {
        out += "[]";
        return absl::OkStatus();
      }
      out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        if (absl::Status s = Json(list[i], indent, sort_keys, depth + 1, out); !s.ok()) return s;
      }
      newline(depth);
      out += ']';
      return absl::OkStatus();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& item : v.as_dict()) items.push_back(&item);
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        out += "{}";
        return absl::OkStatus();
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        JsonString(items[i]->first, out);
        out += ": ";
        if (absl::Status s = Json(items[i]->second, indent, sort_keys, depth + 1, out); !s.ok()) {
          return s;
        }
      }
      newline(depth);
      out += '}';
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ToJson(const Value& value, int indent, bool sort_keys) {
  std::string out;
  if (absl::Status s = Json(value, indent, sort_keys, 0, out); !s.ok()) return s;
  return out;
}

}  // namespace llm::jinja
