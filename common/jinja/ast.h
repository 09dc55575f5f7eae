// The syntax tree of a parsed Jinja template (parser.h builds it,
// evaluator.h walks it). Plain structs; a tree owns its nodes.
#ifndef LLM_COMMON_JINJA_AST_H_
#define LLM_COMMON_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/jinja/value.h"

namespace llm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // args: the items (also tuples)
    kDict,       // args: key, value, key, value, ...
    kGetAttr,    // args[0].name
    kGetItem,    // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]], missing parts null
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..], kwargs)
    kTest,       // args[0] is [not] name(args[1..])
    kNegate,     // -args[0]
    kNot,        // not args[0]
    kBinary,     // args[0] name args[1]: + - * / // % ** ~
    kAnd,        // args[0] and args[1]
    kOr,         // args[0] or args[1]
    kCompare,    // args[0] ops[0] args[1] ops[1] args[2] ... (==, <, in, not in, ...)
    kCondition,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  Value literal;
  std::string name;
  bool negated = false;  // kTest: "is not"
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body); a null condition is the else
    kFor,       // for targets in expr [if filter]: body [else: else_body]
    kSet,       // set targets = expr, or set object.attribute = expr
    kSetBlock,  // set targets[0]: body rendered to a string
    kBreak,
    kContinue,
    kMacro,  // macro name(targets = defaults): body
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attribute;  // kSet on a namespace: targets[0].attribute
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<ExprPtr> defaults;  // kMacro: per target, null when none
};

}  // namespace llm::jinja

#endif  // LLM_COMMON_JINJA_AST_H_
