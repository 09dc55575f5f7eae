#include "common/jinja/evaluator.h"

#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/jinja/builtins.h"
#include "common/jinja/text.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::jinja {
namespace {

using Frame = std::vector<std::pair<std::string, Value>>;

enum class Flow { kNormal, kBreak, kContinue };

bool IsInt(const Value& v) {
  return v.kind() == Value::Kind::kInt || v.kind() == Value::Kind::kBool;
}

class Evaluator {
 public:
  Evaluator(const Limits& limits, const RenderOptions& options)
      : limits_(limits), options_(options) {}

  absl::StatusOr<std::string> Run(const Body& body, const Dict& variables) {
    Frame root;
    AddGlobals(root);
    for (const auto& [k, v] : variables) Assign(root, k, v);
    frames_.push_back(std::move(root));
    std::string out;
    LLM_ASSIGN_OR_RETURN(Flow flow, Exec(body, out));
    (void)flow;
    return out;
  }

 private:
  // --- scopes ---

  static void Assign(Frame& f, const std::string& name, Value v) {
    for (auto& [k, old] : f) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    f.emplace_back(name, std::move(v));
  }

  const Value* Lookup(const std::string& name) const {
    for (auto frame = frames_.rbegin(); frame != frames_.rend(); ++frame) {
      for (const auto& [k, v] : *frame) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }

  absl::Status Error(int line, int column, std::string_view message) const {
    return absl::InvalidArgumentError(StrCat("line ", line, ", column ", column, ": ", message));
  }
  static absl::Status At(const absl::Status& s, const Expr& e) {
    if (s.ok() || std::string_view(s.message().data(), s.message().size()).starts_with("line ")) {
      return s;
    }
    return absl::Status(s.code(),
                        StrCat("line ", e.line, ", column ", e.column, ": ", s.message()));
  }

  absl::Status Append(std::string& out, std::string_view s) const {
    if (out.size() + s.size() > limits_.max_output_bytes) {
      return absl::ResourceExhaustedError(
          StrCat("template output larger than the limit (", limits_.max_output_bytes, " bytes)"));
    }
    out.append(s);
    return absl::OkStatus();
  }

  absl::Status CountIteration() {
    if (++iterations_ > limits_.max_iterations) {
      return absl::ResourceExhaustedError(
          StrCat("template ran more than ", limits_.max_iterations, " loop iterations"));
    }
    return absl::OkStatus();
  }

  // --- globals ---

  void AddGlobals(Frame& f) {
    f.emplace_back("range", Value::Func([this](const CallArgs& a) -> absl::StatusOr<Value> {
                     std::vector<int64_t> n;
                     for (const Value& v : a.positional) {
                       if (!IsInt(v)) return absl::InvalidArgumentError("range: expected integers");
                       n.push_back(v.as_int());
                     }
                     if (n.empty() || n.size() > 3)
                       return absl::InvalidArgumentError("range: 1 to 3 arguments");
                     const int64_t start = n.size() == 1 ? 0 : n[0];
                     const int64_t stop = n.size() == 1 ? n[0] : n[1];
                     const int64_t step = n.size() == 3 ? n[2] : 1;
                     if (step == 0)
                       return absl::InvalidArgumentError("range: step must not be zero");
                     List out;
                     for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                       LLM_RETURN_IF_ERROR(CountIteration());
                       out.emplace_back(i);
                       if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
                         break;
                     }
                     return Value(std::move(out));
                   }));
    f.emplace_back("namespace", Value::Func([](const CallArgs& a) -> absl::StatusOr<Value> {
                     Dict attributes;
                     for (const Value& v : a.positional) {
                       if (!v.is_dict())
                         return absl::InvalidArgumentError("namespace: expected a dict");
                       for (const auto& item : v.as_dict()) attributes.push_back(item);
                     }
                     for (const auto& item : a.keyword) attributes.push_back(item);
                     return Value::Namespace(std::move(attributes));
                   }));
    f.emplace_back("dict", Value::Func([](const CallArgs& a) -> absl::StatusOr<Value> {
                     Dict d;
                     for (const auto& item : a.keyword) d.push_back(item);
                     return Value(std::move(d));
                   }));
    f.emplace_back("raise_exception", Value::Func([](const CallArgs& a) -> absl::StatusOr<Value> {
                     const std::string message = a.positional.empty() ? "" : a.positional[0].Str();
                     return absl::InvalidArgumentError(StrCat("raise_exception: ", message));
                   }));
    f.emplace_back(
        "strftime_now", Value::Func([this](const CallArgs& a) -> absl::StatusOr<Value> {
          if (a.positional.empty() || !a.positional[0].is_string()) {
            return absl::InvalidArgumentError("strftime_now: expected a format string");
          }
          const absl::Time now =
              options_.now == absl::InfiniteFuture() ? absl::Now() : options_.now;
          return Value(absl::FormatTime(a.positional[0].as_string(), now, options_.zone));
        }));
  }

  // --- statements ---

  absl::StatusOr<Flow> Exec(const Body& body, std::string& out) {
    for (const Stmt& s : body) {
      LLM_ASSIGN_OR_RETURN(Flow flow, ExecOne(s, out));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  absl::StatusOr<Flow> ExecOne(const Stmt& s, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        LLM_RETURN_IF_ERROR(Append(out, s.text));
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        LLM_RETURN_IF_ERROR(Append(out, v.Str()));
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          bool take = true;
          if (cond) {
            LLM_ASSIGN_OR_RETURN(Value c, Eval(*cond));
            take = c.Truthy();
          }
          if (take) return Exec(body, out);
        }
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        LLM_RETURN_IF_ERROR(ExecFor(s, out));
        return Flow::kNormal;
      case Stmt::Kind::kSet: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
        if (!s.attribute.empty()) {
          const Value* target = Lookup(s.targets[0]);
          if (target == nullptr || target->kind() != Value::Kind::kNamespace) {
            return Error(s.line, s.column,
                         StrCat("cannot set attribute '", s.attribute, "' of '", s.targets[0],
                                "': only namespace() attributes can be set"));
          }
          if (HoldsNamespace(v)) {
            // A namespace inside a namespace could hold itself: a cycle that
            // printing would follow for ever.
            return Error(s.line, s.column, "a namespace attribute cannot hold a namespace");
          }
          target->SetAttribute(s.attribute, std::move(v));
          return Flow::kNormal;
        }
        LLM_RETURN_IF_ERROR(Bind(s.targets, std::move(v), frames_.back(), s.line, s.column));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        LLM_ASSIGN_OR_RETURN(Flow flow, Exec(s.body, captured));
        (void)flow;
        Assign(frames_.back(), s.targets[0], Value(std::move(captured)));
        return Flow::kNormal;
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kMacro:
        Assign(frames_.back(), s.text, MakeMacro(s));
        return Flow::kNormal;
    }
    return Flow::kNormal;
  }

  // Whether `v` is or contains a namespace (values are depth-bounded).
  static bool HoldsNamespace(const Value& v) {
    if (v.kind() == Value::Kind::kNamespace) return true;
    if (v.is_list()) {
      for (const Value& item : v.as_list()) {
        if (HoldsNamespace(item)) return true;
      }
    }
    if (v.is_dict()) {
      for (const auto& [k, item] : v.as_dict()) {
        if (HoldsNamespace(item)) return true;
      }
    }
    return false;
  }

  absl::Status Bind(const std::vector<std::string>& targets, Value v, Frame& frame, int line,
                    int column) {
    if (targets.size() == 1) {
      Assign(frame, targets[0], std::move(v));
      return absl::OkStatus();
    }
    LLM_ASSIGN_OR_RETURN(List items, Iterate(v));
    if (items.size() != targets.size()) {
      return Error(
          line, column,
          StrCat("cannot unpack ", items.size(), " values into ", targets.size(), " names"));
    }
    for (size_t i = 0; i < targets.size(); ++i) Assign(frame, targets[i], std::move(items[i]));
    return absl::OkStatus();
  }

  absl::Status ExecFor(const Stmt& s, std::string& out) {
    LLM_ASSIGN_OR_RETURN(Value seq, Eval(*s.expr));
    absl::StatusOr<List> all = Iterate(seq);
    if (!all.ok()) return Error(s.line, s.column, std::string(all.status().message()));
    List items;
    if (s.filter) {
      for (Value& item : *all) {
        LLM_RETURN_IF_ERROR(CountIteration());
        frames_.emplace_back();
        absl::Status bound = Bind(s.targets, item, frames_.back(), s.line, s.column);
        absl::StatusOr<Value> keep = bound.ok() ? Eval(*s.filter) : bound;
        frames_.pop_back();
        if (!keep.ok()) return keep.status();
        if (keep->Truthy()) items.push_back(std::move(item));
      }
    } else {
      items = *std::move(all);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      LLM_RETURN_IF_ERROR(CountIteration());
      Dict loop = {
          {"index0", Value(i)},
          {"index", Value(i + 1)},
          {"revindex0", Value(n - i - 1)},
          {"revindex", Value(n - i)},
          {"first", Value(i == 0)},
          {"last", Value(i == n - 1)},
          {"length", Value(n)},
          {"previtem", i > 0 ? items[i - 1] : Value()},
          {"nextitem", i + 1 < n ? items[i + 1] : Value()},
      };
      frames_.emplace_back();
      frames_.back().emplace_back("loop", Value(std::move(loop)));
      absl::Status bound = Bind(s.targets, items[i], frames_.back(), s.line, s.column);
      absl::StatusOr<Flow> flow = bound.ok() ? Exec(s.body, out) : bound;
      frames_.pop_back();
      if (!flow.ok()) return flow.status();
      if (*flow == Flow::kBreak) break;
    }
    if (n == 0 && !s.else_body.empty()) {
      LLM_ASSIGN_OR_RETURN(Flow flow, Exec(s.else_body, out));
      (void)flow;
    }
    return absl::OkStatus();
  }

  Value MakeMacro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::Func([this, macro](const CallArgs& a) -> absl::StatusOr<Value> {
      if (++call_depth_ > limits_.max_depth) {
        --call_depth_;
        return absl::ResourceExhaustedError(
            StrCat("macro calls nested deeper than ", limits_.max_depth));
      }
      Frame args;
      for (size_t i = 0; i < macro->targets.size(); ++i) {
        Value v;
        if (i < a.positional.size()) {
          v = a.positional[i];
        } else if (macro->defaults[i]) {
          absl::StatusOr<Value> d = Eval(*macro->defaults[i]);
          if (!d.ok()) {
            --call_depth_;
            return d.status();
          }
          v = *std::move(d);
        }
        for (const auto& [k, kv] : a.keyword) {
          if (k == macro->targets[i]) v = kv;
        }
        args.emplace_back(macro->targets[i], std::move(v));
      }
      // The macro sees the top-level scope and its arguments only.
      std::vector<Frame> saved(frames_.begin() + 1, frames_.end());
      frames_.resize(1);
      frames_.push_back(std::move(args));
      std::string out;
      absl::StatusOr<Flow> flow = Exec(macro->body, out);
      frames_.resize(1);
      for (Frame& f : saved) frames_.push_back(std::move(f));
      --call_depth_;
      if (!flow.ok()) return flow.status();
      return Value(std::move(out));
    });
  }

  // --- expressions ---

  absl::StatusOr<Value> Eval(const Expr& e) {
    absl::StatusOr<Value> v = EvalInner(e);
    if (!v.ok()) return At(v.status(), e);
    if (v->depth() > limits_.max_depth) {
      return At(absl::ResourceExhaustedError(
                    StrCat("a value nested deeper than ", limits_.max_depth, " levels")),
                e);
    }
    return v;
  }

  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first) {
    CallArgs a;
    for (size_t i = first; i < e.args.size(); ++i) {
      LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i]));
      a.positional.push_back(std::move(v));
    }
    for (const auto& [k, ex] : e.kwargs) {
      LLM_ASSIGN_OR_RETURN(Value v, Eval(*ex));
      a.keyword.emplace_back(k, std::move(v));
    }
    return a;
  }

  static std::string Describe(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kName:
        return StrCat("'", e.name, "'");
      case Expr::Kind::kGetAttr:
        return StrCat(Describe(*e.args[0]), ".", e.name);
      default:
        return "a value";
    }
  }

  absl::StatusOr<Value> EvalInner(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = Lookup(e.name);
        return v == nullptr ? Value() : *v;
      }
      case Expr::Kind::kList: {
        List items;
        for (const ExprPtr& x : e.args) {
          LLM_ASSIGN_OR_RETURN(Value v, Eval(*x));
          items.push_back(std::move(v));
        }
        return Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          LLM_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i]));
          LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
          if (!k.is_string()) return absl::InvalidArgumentError("dict keys must be strings");
          bool replaced = false;
          for (auto& [old_k, old_v] : d) {
            if (old_k == k.as_string()) {
              old_v = v;
              replaced = true;
            }
          }
          if (!replaced) d.emplace_back(k.as_string(), std::move(v));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kGetAttr: {
        LLM_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        if (obj.is_undefined()) {
          return absl::InvalidArgumentError(
              StrCat(Describe(*e.args[0]), " is undefined (reading .", e.name, ")"));
        }
        if (std::optional<Value> m = BoundMethod(obj, e.name, limits_.max_output_bytes)) {
          return *std::move(m);
        }
        return obj.Get(e.name);
      }
      case Expr::Kind::kGetItem: {
        LLM_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(Value key, Eval(*e.args[1]));
        return GetItem(obj, key, *e.args[0]);
      }
      case Expr::Kind::kSlice:
        return EvalSlice(e);
      case Expr::Kind::kCall: {
        LLM_ASSIGN_OR_RETURN(Value f, Eval(*e.args[0]));
        if (f.kind() != Value::Kind::kFunction) {
          return absl::InvalidArgumentError(StrCat(
              Describe(*e.args[0]), f.is_undefined() ? " is undefined" : " is not callable"));
        }
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e, 1));
        return f.as_function()(a);
      }
      case Expr::Kind::kFilter: {
        LLM_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e, 1));
        LLM_ASSIGN_OR_RETURN(Value out, ApplyFilter(e.name, in, a, limits_.max_output_bytes));
        if (out.is_list() && static_cast<int64_t>(out.as_list().size()) > limits_.max_iterations) {
          return absl::ResourceExhaustedError("filter result has too many items");
        }
        return out;
      }
      case Expr::Kind::kTest: {
        LLM_ASSIGN_OR_RETURN(Value in, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(CallArgs a, EvalArgs(e, 1));
        LLM_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, in, a));
        return Value(r != e.negated);
      }
      case Expr::Kind::kNegate: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        if (v.kind() == Value::Kind::kFloat) return Value(-v.as_float());
        if (IsInt(v) && v.as_int() != INT64_MIN) return Value(-v.as_int());
        return absl::InvalidArgumentError(StrCat("cannot negate ", v.TypeName()));
      }
      case Expr::Kind::kNot: {
        LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[0]));
        return Value(!v.Truthy());
      }
      case Expr::Kind::kAnd: {
        LLM_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        if (!a.Truthy()) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kOr: {
        LLM_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        if (a.Truthy()) return a;
        return Eval(*e.args[1]);
      }
      case Expr::Kind::kCompare:
        return EvalCompare(e);
      case Expr::Kind::kCondition: {
        LLM_ASSIGN_OR_RETURN(Value c, Eval(*e.args[0]));
        if (c.Truthy()) return Eval(*e.args[1]);
        if (e.args[2]) return Eval(*e.args[2]);
        return Value();
      }
      case Expr::Kind::kBinary: {
        LLM_ASSIGN_OR_RETURN(Value a, Eval(*e.args[0]));
        LLM_ASSIGN_OR_RETURN(Value b, Eval(*e.args[1]));
        return Arithmetic(e.name, a, b);
      }
    }
    return absl::InternalError("unknown expression");
  }

  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key, const Expr& what) {
    switch (obj.kind()) {
      case Value::Kind::kUndefined:
        return absl::InvalidArgumentError(
            StrCat(Describe(what), " is undefined (reading [", key.Repr(), "])"));
      case Value::Kind::kDict:
      case Value::Kind::kNamespace:
        if (key.is_string()) {
          Value v = obj.Get(key.as_string());
          if (v.is_undefined() && obj.is_dict()) {
            if (std::optional<Value> m =
                    BoundMethod(obj, key.as_string(), limits_.max_output_bytes)) {
              return *std::move(m);
            }
          }
          return v;
        }
        return Value();
      case Value::Kind::kList:
      case Value::Kind::kString: {
        if (!IsInt(key)) {
          if (obj.is_string() && key.is_string()) {
            if (std::optional<Value> m =
                    BoundMethod(obj, key.as_string(), limits_.max_output_bytes)) {
              return *std::move(m);
            }
          }
          return Value();
        }
        if (obj.is_list()) {
          const List& l = obj.as_list();
          int64_t i = key.as_int();
          if (i < 0) i += static_cast<int64_t>(l.size());
          if (i < 0 || i >= static_cast<int64_t>(l.size())) return Value();
          return l[static_cast<size_t>(i)];
        }
        const std::vector<size_t> off = CharOffsets(obj.as_string());
        const int64_t len = static_cast<int64_t>(off.size()) - 1;
        int64_t i = key.as_int();
        if (i < 0) i += len;
        if (i < 0 || i >= len) return Value();
        return Value(obj.as_string().substr(off[i], off[i + 1] - off[i]));
      }
      default:
        return Value();
    }
  }

  absl::StatusOr<Value> EvalSlice(const Expr& e) {
    LLM_ASSIGN_OR_RETURN(Value obj, Eval(*e.args[0]));
    std::optional<int64_t> parts[3];
    for (int i = 0; i < 3; ++i) {
      if (!e.args[i + 1]) continue;
      LLM_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1]));
      if (v.is_none()) continue;
      if (!IsInt(v)) return absl::InvalidArgumentError("slice indices must be integers");
      parts[i] = v.as_int();
    }
    const int64_t step = parts[2].value_or(1);
    if (step == 0) return absl::InvalidArgumentError("slice step cannot be zero");
    if (obj.is_list()) {
      const List& l = obj.as_list();
      List out;
      for (int64_t i : SliceIndices(static_cast<int64_t>(l.size()), parts[0], parts[1], step)) {
        out.push_back(l[static_cast<size_t>(i)]);
      }
      return Value(std::move(out));
    }
    if (obj.is_string()) {
      const std::string& s = obj.as_string();
      const std::vector<size_t> off = CharOffsets(s);
      std::string out;
      for (int64_t i :
           SliceIndices(static_cast<int64_t>(off.size()) - 1, parts[0], parts[1], step)) {
        out.append(s, off[i], off[i + 1] - off[i]);
      }
      return Value(std::move(out));
    }
    if (obj.is_undefined()) {
      return absl::InvalidArgumentError(StrCat(Describe(*e.args[0]), " is undefined"));
    }
    return absl::InvalidArgumentError(StrCat("cannot slice ", obj.TypeName()));
  }

  absl::StatusOr<Value> EvalCompare(const Expr& e) {
    LLM_ASSIGN_OR_RETURN(Value left, Eval(*e.args[0]));
    for (size_t i = 0; i < e.ops.size(); ++i) {
      LLM_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i + 1]));
      const std::string& op = e.ops[i];
      bool r;
      if (op == "==") {
        r = left.Equals(right);
      } else if (op == "!=") {
        r = !left.Equals(right);
      } else if (op == "in" || op == "not in") {
        LLM_ASSIGN_OR_RETURN(bool in, Contains(right, left));
        r = in == (op == "in");
      } else {
        LLM_ASSIGN_OR_RETURN(int c, Compare(left, right));
        r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
      }
      if (!r) return Value(false);
      left = std::move(right);
    }
    return Value(true);
  }

  absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b) {
    const size_t max = limits_.max_output_bytes;
    if (op == "~") {
      std::string s = a.Str() + b.Str();
      if (s.size() > max) return absl::ResourceExhaustedError("string larger than the limit");
      return Value(std::move(s));
    }
    const auto type_error = [&] {
      return absl::InvalidArgumentError(
          StrCat("unsupported operand types for ", op, ": ", a.TypeName(), " and ", b.TypeName()));
    };
    const bool num_a = a.is_number() || a.kind() == Value::Kind::kBool;
    const bool num_b = b.is_number() || b.kind() == Value::Kind::kBool;
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        if (a.as_string().size() + b.as_string().size() > max) {
          return absl::ResourceExhaustedError("string larger than the limit");
        }
        return Value(a.as_string() + b.as_string());
      }
      if (a.is_list() && b.is_list()) {
        List out = a.as_list();
        out.insert(out.end(), b.as_list().begin(), b.as_list().end());
        if (static_cast<int64_t>(out.size()) > limits_.max_iterations) {
          return absl::ResourceExhaustedError("list longer than the limit");
        }
        return Value(std::move(out));
      }
    }
    if (op == "*" && ((a.is_string() || a.is_list()) && IsInt(b))) return Repeat(a, b.as_int());
    if (op == "*" && ((b.is_string() || b.is_list()) && IsInt(a))) return Repeat(b, a.as_int());
    if (!num_a || !num_b) return type_error();
    const bool ints = IsInt(a) && IsInt(b);
    const int64_t x = a.as_int(), y = b.as_int();
    const double fx = a.as_float(), fy = b.as_float();
    int64_t r = 0;
    if (op == "+") {
      if (!ints) return Value(fx + fy);
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value(r);
    }
    if (op == "-") {
      if (!ints) return Value(fx - fy);
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value(r);
    }
    if (op == "*") {
      if (!ints) return Value(fx * fy);
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value(r);
    }
    if (op == "/") {
      if (fy == 0) return absl::InvalidArgumentError("division by zero");
      return Value(fx / fy);
    }
    if (op == "//" || op == "%") {
      if (ints) {
        if (y == 0) return absl::InvalidArgumentError("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) return Overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          q -= 1;
          m += y;
        }
        return Value(op == "//" ? q : m);
      }
      if (fy == 0) return absl::InvalidArgumentError("float division or modulo by zero");
      if (op == "//") return Value(std::floor(fx / fy));
      double m = std::fmod(fx, fy);
      if (m != 0 && ((m < 0) != (fy < 0))) m += fy;
      return Value(m);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t result = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(result, x, &result)) return Overflow();
          if (result == 0 || result == 1) break;
          if (result == -1) {
            result = (y - i - 1) % 2 == 0 ? -1 : 1;
            break;
          }
        }
        return Value(result);
      }
      return Value(std::pow(fx, fy));
    }
    return type_error();
  }

  static absl::Status Overflow() {
    return absl::InvalidArgumentError("integer overflow (beyond 64 bits)");
  }

  absl::StatusOr<Value> Repeat(const Value& v, int64_t n) {
    if (n <= 0) return v.is_string() ? Value("") : Value(List());
    if (v.is_string()) {
      if (v.as_string().size() * static_cast<uint64_t>(n) > limits_.max_output_bytes ||
          n > static_cast<int64_t>(limits_.max_output_bytes)) {
        return absl::ResourceExhaustedError("string larger than the limit");
      }
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += v.as_string();
      return Value(std::move(out));
    }
    if (v.as_list().size() * static_cast<uint64_t>(n) >
            static_cast<uint64_t>(limits_.max_iterations) ||
        n > limits_.max_iterations) {
      return absl::ResourceExhaustedError("list longer than the limit");
    }
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), v.as_list().begin(), v.as_list().end());
    return Value(std::move(out));
  }

  const Limits limits_;
  const RenderOptions options_;
  std::vector<Frame> frames_;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
};

}  // namespace

absl::StatusOr<std::string> Evaluate(const Body& body, const Dict& variables, const Limits& limits,
                                     const RenderOptions& options) {
  return Evaluator(limits, options).Run(body, variables);
}

}  // namespace llm::jinja
