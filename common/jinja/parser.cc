#include "common/jinja/parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::jinja {
namespace {

using K = Token::Kind;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : t_(tokens), max_depth_(max_depth) {}

  absl::StatusOr<Body> Run() {
    std::string stop;
    LLM_ASSIGN_OR_RETURN(Body body, ParseBody({}, &stop));
    return body;
  }

 private:
  // Depth guard: every recursive descent goes through one.
  class Nest {
   public:
    explicit Nest(Parser* p) : p_(p) { ++p_->depth_; }
    ~Nest() { --p_->depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser* p_;
  };

  // Left-deep chains (a + b + c, a.b.c, x | f | g) nest the tree one level
  // per link: each link counts as one more level until the chain ends.
  class Grow {
   public:
    explicit Grow(Parser* p) : p_(p) {}
    ~Grow() { p_->depth_ -= n_; }
    Grow(const Grow&) = delete;
    Grow& operator=(const Grow&) = delete;
    absl::Status Add() {
      ++n_;
      ++p_->depth_;
      return p_->CheckDepth();
    }

   private:
    Parser* p_;
    int n_ = 0;
  };

  const Token& Peek(size_t ahead = 0) const {
    const size_t i = std::min(pos_ + ahead, t_.size() - 1);
    return t_[i];
  }
  const Token& Next() {
    const Token& t = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return t;
  }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == K::kOperator && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == K::kName && Peek(ahead).text == name;
  }

  static absl::Status ErrorAt(const Token& t, std::string_view message) {
    return absl::InvalidArgumentError(
        StrCat("line ", t.line, ", column ", t.column, ": ", message));
  }
  static std::string Describe(const Token& t) {
    switch (t.kind) {
      case K::kEnd:
        return "end of template";
      case K::kStmtEnd:
        return "'%}'";
      case K::kExprEnd:
        return "'}}'";
      case K::kString:
        return "a string";
      case K::kText:
        return "text";
      default:
        return StrCat("'", t.text, "'");
    }
  }
  absl::Status Unexpected(std::string_view wanted) const {
    return ErrorAt(Peek(), StrCat("expected ", wanted, ", got ", Describe(Peek())));
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(op)) return Unexpected(StrCat("'", op, "'"));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectKind(K kind, std::string_view what) {
    if (Peek().kind != kind) return Unexpected(what);
    Next();
    return absl::OkStatus();
  }
  absl::Status CheckDepth() const {
    if (depth_ > max_depth_) {
      return ErrorAt(Peek(), StrCat("nesting deeper than ", max_depth_, " levels"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName(std::string_view what) {
    if (Peek().kind != K::kName) return Unexpected(what);
    return Next().text;
  }

  ExprPtr NewExpr(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // Statements up to one of the `stops` tags ("{% endif" ...), whose name
  // is left in *stop with the tag's name token consumed; the end of the
  // template is the stop "" (an error when stops is not empty).
  absl::StatusOr<Body> ParseBody(std::initializer_list<std::string_view> stops, std::string* stop) {
    Nest nest(this);
    LLM_RETURN_IF_ERROR(CheckDepth());
    Body body;
    while (true) {
      const Token& t = Peek();
      if (t.kind == K::kEnd) {
        if (stops.size() > 0) {
          return ErrorAt(
              t, StrCat("unexpected end of template; expected '{% ", *stops.begin(), " %}'"));
        }
        *stop = "";
        return body;
      }
      if (t.kind == K::kText) {
        Stmt s{Stmt::Kind::kText, t.line, t.column};
        s.text = Next().text;
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind == K::kExprBegin) {
        Next();
        Stmt s{Stmt::Kind::kOutput, t.line, t.column};
        LLM_ASSIGN_OR_RETURN(s.expr, ParseTuple(true));
        LLM_RETURN_IF_ERROR(ExpectKind(K::kExprEnd, "'}}'"));
        body.push_back(std::move(s));
        continue;
      }
      if (t.kind != K::kStmtBegin) return Unexpected("text or a tag");
      const Token& keyword = Peek(1);
      if (keyword.kind != K::kName) {
        Next();
        return Unexpected("a statement name");
      }
      for (std::string_view s : stops) {
        if (keyword.text == s) {
          Next();
          Next();
          *stop = keyword.text;
          return body;
        }
      }
      Next();
      LLM_ASSIGN_OR_RETURN(Stmt s, ParseStatement());
      body.push_back(std::move(s));
    }
  }

  absl::StatusOr<Stmt> ParseStatement() {
    const Token& kw = Next();
    const std::string& name = kw.text;
    Stmt s{Stmt::Kind::kText, kw.line, kw.column};
    std::string stop;
    if (name == "if") {
      s.kind = Stmt::Kind::kIf;
      LLM_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(true));
      while (true) {
        LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
        LLM_ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &stop));
        s.branches.emplace_back(std::move(cond), std::move(body));
        if (stop == "endif") break;
        if (stop == "else") {
          LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
          LLM_ASSIGN_OR_RETURN(Body else_body, ParseBody({"endif"}, &stop));
          s.branches.emplace_back(nullptr, std::move(else_body));
          break;
        }
        LLM_ASSIGN_OR_RETURN(cond, ParseTuple(true));
      }
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      return s;
    }
    if (name == "for") {
      s.kind = Stmt::Kind::kFor;
      LLM_ASSIGN_OR_RETURN(s.targets, ParseTargets());
      if (!IsName("in")) return Unexpected("'in'");
      Next();
      LLM_ASSIGN_OR_RETURN(s.expr, ParseTuple(false));
      if (IsName("if")) {
        Next();
        LLM_ASSIGN_OR_RETURN(s.filter, ParseExpression(true));
      }
      if (IsName("recursive")) return ErrorAt(Peek(), "recursive loops are not supported");
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      LLM_ASSIGN_OR_RETURN(s.body, ParseBody({"else", "endfor"}, &stop));
      if (stop == "else") {
        LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
        LLM_ASSIGN_OR_RETURN(s.else_body, ParseBody({"endfor"}, &stop));
      }
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      return s;
    }
    if (name == "set") {
      s.kind = Stmt::Kind::kSet;
      if (Peek().kind == K::kName && IsOp(".", 1)) {
        s.targets.push_back(Next().text);
        Next();
        LLM_ASSIGN_OR_RETURN(s.attribute, ExpectName("an attribute name"));
      } else {
        LLM_ASSIGN_OR_RETURN(s.targets, ParseTargets());
      }
      if (Peek().kind == K::kStmtEnd && s.attribute.empty() && s.targets.size() == 1) {
        Next();
        s.kind = Stmt::Kind::kSetBlock;
        LLM_ASSIGN_OR_RETURN(s.body, ParseBody({"endset"}, &stop));
        LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
        return s;
      }
      LLM_RETURN_IF_ERROR(ExpectOp("="));
      LLM_ASSIGN_OR_RETURN(s.expr, ParseTuple(true));
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      return s;
    }
    if (name == "generation") {
      // transformers' {% generation %}: its body renders as it is (an if true).
      s.kind = Stmt::Kind::kIf;
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      LLM_ASSIGN_OR_RETURN(Body body, ParseBody({"endgeneration"}, &stop));
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      s.branches.emplace_back(nullptr, std::move(body));
      return s;
    }
    if (name == "break" || name == "continue") {
      s.kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      return s;
    }
    if (name == "macro") {
      s.kind = Stmt::Kind::kMacro;
      LLM_ASSIGN_OR_RETURN(s.text, ExpectName("a macro name"));
      LLM_RETURN_IF_ERROR(ExpectOp("("));
      while (!IsOp(")")) {
        LLM_ASSIGN_OR_RETURN(std::string arg, ExpectName("an argument name"));
        s.targets.push_back(std::move(arg));
        ExprPtr def;
        if (IsOp("=")) {
          Next();
          LLM_ASSIGN_OR_RETURN(def, ParseExpression(true));
        }
        s.defaults.push_back(std::move(def));
        if (!IsOp(",")) break;
        Next();
      }
      LLM_RETURN_IF_ERROR(ExpectOp(")"));
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      LLM_ASSIGN_OR_RETURN(s.body, ParseBody({"endmacro"}, &stop));
      LLM_RETURN_IF_ERROR(ExpectKind(K::kStmtEnd, "'%}'"));
      return s;
    }
    if (name == "include" || name == "import" || name == "extends" || name == "from") {
      return ErrorAt(kw, StrCat("'", name, "' is not allowed: templates cannot read other files"));
    }
    return ErrorAt(kw, StrCat("unknown or unsupported tag '", name, "'"));
  }

  // name or name, name, ... (for and set targets).
  absl::StatusOr<std::vector<std::string>> ParseTargets() {
    std::vector<std::string> names;
    const bool paren = IsOp("(");
    if (paren) Next();
    while (true) {
      LLM_ASSIGN_OR_RETURN(std::string n, ExpectName("a variable name"));
      names.push_back(std::move(n));
      if (!IsOp(",")) break;
      Next();
    }
    if (paren) LLM_RETURN_IF_ERROR(ExpectOp(")"));
    return names;
  }

  // expr or expr, expr, ... (a tuple, held as a list).
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condition) {
    const Token& at = Peek();
    LLM_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condition));
    if (!IsOp(",")) return first;
    ExprPtr list = NewExpr(Expr::Kind::kList, at);
    list->args.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().kind == K::kStmtEnd || Peek().kind == K::kExprEnd) break;
      LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condition));
      list->args.push_back(std::move(e));
    }
    return list;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condition) {
    Nest nest(this);
    LLM_RETURN_IF_ERROR(CheckDepth());
    const Token& at = Peek();
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    if (!with_condition) return e;
    Grow grow(this);
    while (IsName("if")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      Next();
      ExprPtr c = NewExpr(Expr::Kind::kCondition, at);
      LLM_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      if (IsName("else")) {
        Next();
        LLM_ASSIGN_OR_RETURN(ExprPtr other, ParseExpression(true));
        c->args.push_back(std::move(other));
      } else {
        c->args.push_back(nullptr);
      }
      e = std::move(c);
    }
    return e;
  }

  absl::StatusOr<ExprPtr> Binary(Expr::Kind kind, std::string op, const Token& at, ExprPtr a,
                                 ExprPtr b) {
    ExprPtr e = NewExpr(kind, at);
    e->name = std::move(op);
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseAnd());
    while (IsName("or")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kOr, "or", at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseNot());
    while (IsName("and")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kAnd, "and", at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      Nest nest(this);
      LLM_RETURN_IF_ERROR(CheckDepth());
      const Token& at = Next();
      ExprPtr e = NewExpr(Expr::Kind::kNot, at);
      LLM_ASSIGN_OR_RETURN(ExprPtr inner, ParseNot());
      e->args.push_back(std::move(inner));
      return e;
    }
    return ParseCompare();
  }

  absl::StatusOr<ExprPtr> ParseCompare() {
    Grow grow(this);
    const Token& at = Peek();
    LLM_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      LLM_RETURN_IF_ERROR(grow.Add());
      std::string op;
      const Token& t = Peek();
      if (t.kind == K::kOperator && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                     t.text == "<=" || t.text == ">" || t.text == ">=")) {
        op = t.text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = NewExpr(Expr::Kind::kCompare, at);
        cmp->args.push_back(std::move(first));
      }
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      cmp->args.push_back(std::move(r));
      cmp->ops.push_back(std::move(op));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, at.text, at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseMath2());
    while (IsOp("~")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseMath2());
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, "~", at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, at.text, at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    Grow grow(this);
    LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseUnary(true));
    while (IsOp("**")) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr r, ParseUnary(true));
      LLM_ASSIGN_OR_RETURN(e, Binary(Expr::Kind::kBinary, "**", at, std::move(e), std::move(r)));
    }
    return e;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    Nest nest(this);
    LLM_RETURN_IF_ERROR(CheckDepth());
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      const Token& at = Next();
      LLM_ASSIGN_OR_RETURN(ExprPtr inner, ParseUnary(false));
      if (at.text == "-") {
        e = NewExpr(Expr::Kind::kNegate, at);
        e->args.push_back(std::move(inner));
      } else {
        e = std::move(inner);
      }
    } else {
      LLM_ASSIGN_OR_RETURN(e, ParsePrimary());
      LLM_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    }
    if (with_filter) return ParseFilters(std::move(e));
    return e;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case K::kName: {
        Next();
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        if (t.text == "true" || t.text == "True") {
          e->literal = Value(true);
        } else if (t.text == "false" || t.text == "False") {
          e->literal = Value(false);
        } else if (t.text == "none" || t.text == "None") {
          e->literal = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case K::kString: {
        std::string s;
        while (Peek().kind == K::kString) s += Next().text;  // adjacent literals join
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        e->literal = Value(std::move(s));
        return e;
      }
      case K::kInt: {
        Next();
        int64_t v = 0;
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc()) return ErrorAt(t, "integer literal out of range");
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        e->literal = Value(v);
        return e;
      }
      case K::kFloat: {
        Next();
        ExprPtr e = NewExpr(Expr::Kind::kLiteral, t);
        e->literal = Value(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case K::kOperator:
        if (t.text == "(") {
          Next();
          if (IsOp(")")) {
            Next();
            return NewExpr(Expr::Kind::kList, t);  // ()
          }
          LLM_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true));
          LLM_RETURN_IF_ERROR(ExpectOp(")"));
          return e;
        }
        if (t.text == "[") {
          Next();
          ExprPtr e = NewExpr(Expr::Kind::kList, t);
          while (!IsOp("]")) {
            LLM_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
            e->args.push_back(std::move(item));
            if (!IsOp(",")) break;
            Next();
          }
          LLM_RETURN_IF_ERROR(ExpectOp("]"));
          return e;
        }
        if (t.text == "{") {
          Next();
          ExprPtr e = NewExpr(Expr::Kind::kDict, t);
          while (!IsOp("}")) {
            LLM_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
            LLM_RETURN_IF_ERROR(ExpectOp(":"));
            LLM_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
            if (!IsOp(",")) break;
            Next();
          }
          LLM_RETURN_IF_ERROR(ExpectOp("}"));
          return e;
        }
        break;
      default:
        break;
    }
    return Unexpected("an expression");
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr e) {
    Grow grow(this);
    while (true) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Peek();
      if (IsOp(".")) {
        Next();
        const Token& n = Peek();
        if (n.kind == K::kInt) {
          Next();
          ExprPtr item = NewExpr(Expr::Kind::kGetItem, at);
          item->args.push_back(std::move(e));
          ExprPtr index = NewExpr(Expr::Kind::kLiteral, n);
          index->literal = Value(static_cast<int64_t>(std::atoll(n.text.c_str())));
          item->args.push_back(std::move(index));
          e = std::move(item);
          continue;
        }
        LLM_ASSIGN_OR_RETURN(std::string name, ExpectName("an attribute name"));
        ExprPtr attr = NewExpr(Expr::Kind::kGetAttr, at);
        attr->name = std::move(name);
        attr->args.push_back(std::move(e));
        e = std::move(attr);
      } else if (IsOp("[")) {
        Next();
        LLM_ASSIGN_OR_RETURN(e, ParseSubscript(std::move(e), at));
      } else if (IsOp("(")) {
        LLM_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  // After "[": an index or a slice, then "]".
  absl::StatusOr<ExprPtr> ParseSubscript(ExprPtr target, const Token& at) {
    ExprPtr parts[3];
    int part = 0;
    bool slice = false;
    while (true) {
      if (IsOp(":")) {
        Next();
        slice = true;
        if (++part > 2) return Unexpected("']'");
        continue;
      }
      if (IsOp("]")) break;
      if (parts[part]) return Unexpected("':' or ']'");
      LLM_ASSIGN_OR_RETURN(parts[part], ParseExpression(true));
    }
    Next();
    if (!slice) {
      if (!parts[0]) return ErrorAt(at, "empty subscript");
      ExprPtr e = NewExpr(Expr::Kind::kGetItem, at);
      e->args.push_back(std::move(target));
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    ExprPtr e = NewExpr(Expr::Kind::kSlice, at);
    e->args.push_back(std::move(target));
    for (ExprPtr& p : parts) e->args.push_back(std::move(p));
    return e;
  }

  // Arguments "(a, b, k=v)" into e.args (after the existing ones) and kwargs.
  absl::Status ParseArgs(Expr& e) {
    LLM_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (Peek().kind == K::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        LLM_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e.kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!e.kwargs.empty()) return Unexpected("a keyword argument");
        LLM_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e.args.push_back(std::move(v));
      }
      if (!IsOp(",")) break;
      Next();
    }
    return ExpectOp(")");
  }

  absl::StatusOr<ExprPtr> ParseCall(ExprPtr callee) {
    ExprPtr e = NewExpr(Expr::Kind::kCall, Peek());
    e->args.push_back(std::move(callee));
    LLM_RETURN_IF_ERROR(ParseArgs(*e));
    return e;
  }

  absl::StatusOr<ExprPtr> ParseFilters(ExprPtr e) {
    Grow grow(this);
    while (true) {
      LLM_RETURN_IF_ERROR(grow.Add());
      const Token& at = Peek();
      if (IsOp("|")) {
        Next();
        ExprPtr f = NewExpr(Expr::Kind::kFilter, at);
        LLM_ASSIGN_OR_RETURN(f->name, ExpectName("a filter name"));
        f->args.push_back(std::move(e));
        if (IsOp("(")) LLM_RETURN_IF_ERROR(ParseArgs(*f));
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        ExprPtr test = NewExpr(Expr::Kind::kTest, at);
        if (IsName("not")) {
          Next();
          test->negated = true;
        }
        LLM_ASSIGN_OR_RETURN(test->name, ExpectName("a test name"));
        test->args.push_back(std::move(e));
        const Token& n = Peek();
        if (IsOp("(")) {
          LLM_RETURN_IF_ERROR(ParseArgs(*test));
        } else if (n.kind == K::kString || n.kind == K::kInt || n.kind == K::kFloat || IsOp("[") ||
                   IsOp("{") ||
                   (n.kind == K::kName && n.text != "else" && n.text != "or" && n.text != "and" &&
                    n.text != "if" && n.text != "is" && n.text != "in" && n.text != "not")) {
          // One argument without parentheses: "is divisibleby 3".
          LLM_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          LLM_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          test->args.push_back(std::move(arg));
        }
        e = std::move(test);
      } else if (IsOp("(")) {
        LLM_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  const int max_depth_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> Parse(const std::vector<Token>& tokens, int max_depth) {
  if (tokens.empty()) return Body();
  return Parser(tokens, max_depth).Run();
}

}  // namespace llm::jinja
