// The values a Jinja template computes with: undefined, none, booleans,
// integers, floats, strings, lists, dicts (insertion-ordered, string keys),
// namespaces (the one mutable object: namespace() attributes can be set) and
// built-in functions. Lists and dicts are immutable once built and shared by
// reference; copying a Value is cheap except for strings.
//
// Printing and comparing follow Python, as Jinja2 does: str(None) is "None",
// str(True) "True", a float prints like Python's repr (1.0, 1e-05), a list
// like ['a', 1], and 1 == 1.0 == True.
//
// Threads: a Value may be read from several threads; a namespace must not be
// written while another thread reads it (the evaluator creates namespaces per
// render, so this does not arise there).
#ifndef LLM_COMMON_JINJA_VALUE_H_
#define LLM_COMMON_JINJA_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using Function = std::function<absl::StatusOr<Value>(const CallArgs&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };

  Value() = default;  // undefined
  static Value None() { return Value(Kind::kNone); }
  Value(bool b) : kind_(Kind::kBool), int_(b) {}       // NOLINT: implicit on purpose
  Value(int v) : kind_(Kind::kInt), int_(v) {}         // NOLINT
  Value(int64_t v) : kind_(Kind::kInt), int_(v) {}     // NOLINT
  Value(double v) : kind_(Kind::kFloat), float_(v) {}  // NOLINT
  Value(std::string s) : kind_(Kind::kString), string_(std::move(s)) {}  // NOLINT
  Value(std::string_view s) : kind_(Kind::kString), string_(s) {}        // NOLINT
  Value(const char* s) : kind_(Kind::kString), string_(s) {}             // NOLINT
  Value(List list);                                                      // NOLINT
  Value(Dict dict);                                                      // NOLINT
  static Value Namespace(Dict attributes);
  static Value Func(Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_float() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return string_; }
  const List& as_list() const { return *list_; }
  // Dicts and namespaces.
  const Dict& as_dict() const { return *dict_; }
  const Function& as_function() const { return *function_; }

  // Dict / namespace member, or undefined.
  Value Get(std::string_view key) const;
  // Sets a namespace attribute (false when this is no namespace).
  bool SetAttribute(std::string_view key, Value v) const;

  // Python truthiness: undefined, none, false, 0, "" and empty containers are false.
  bool Truthy() const;
  // Python str(): what {{ value }} prints ("" for undefined).
  std::string Str() const;
  // Python repr() (strings quoted), as str() of a container shows its items.
  std::string Repr() const;
  // Python's ==.
  bool Equals(const Value& other) const;
  // The type's name for error messages ("string", "list", ...).
  std::string_view TypeName() const;
  // Container nesting: 0 for scalars, 1 + the deepest item for lists, dicts
  // and namespaces (as built; a namespace attribute set later is not
  // counted). The evaluator bounds it, so printing, comparing and
  // destroying a value cannot recurse without end.
  int depth() const { return depth_; }

 private:
  explicit Value(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kUndefined;
  int depth_ = 0;
  int64_t int_ = 0;  // bool and int
  double float_ = 0;
  std::string string_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;  // mutable only for namespaces
  std::shared_ptr<const Function> function_;
};

// Python's repr of a float: "1.0", "0.1", "1e-05", "1e+16", "inf", "nan".
std::string FormatFloat(double v);

// Python's json.dumps(value, ensure_ascii=False, indent=indent,
// sort_keys=sort_keys) with the separators transformers' tojson uses
// (", " and ": "; "," at line ends when indented). indent < 0: one line.
// Undefined is an error (json cannot encode it); so are functions.
absl::StatusOr<std::string> ToJson(const Value& value, int indent, bool sort_keys);

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_VALUE_H_
