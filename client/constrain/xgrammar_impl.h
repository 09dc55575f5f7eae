// The xgrammar objects behind Constraint (constraint.h); internal to
// client/constrain/ (only its .cc files include xgrammar's headers).
#ifndef LLM_CLIENT_CONSTRAIN_XGRAMMAR_IMPL_H_
#define LLM_CLIENT_CONSTRAIN_XGRAMMAR_IMPL_H_

#include <xgrammar/xgrammar.h>

#include <cstdint>

#include "client/constrain/constraint.h"

namespace llm::constrain {

struct Constraint::Impl {
  Kind kind;
  xgrammar::CompiledGrammar compiled;
  double compile_ms = 0;
  bool lazy = false;
};

}  // namespace llm::constrain

#endif  // LLM_CLIENT_CONSTRAIN_XGRAMMAR_IMPL_H_
