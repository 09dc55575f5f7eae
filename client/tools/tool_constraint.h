// The constraint that keeps a generation to a tool choice, in the model's
// own call syntax (tool_format.h): the text a grammar engine compiles, for
// the generation loop to mask the logits with. Nothing here compiles or
// applies it; the caller hands the text to the engine (xgrammar's
// structural tags: Grammar::FromStructuralTag / the constraint library's
// structural-tag kind).
//
// The text is an xgrammar (>= 0.2) structural tag, {"type":
// "structural_tag", "format": F}, whose calls are the family's exact
// wrappers around each tool's parameters schema (format "json_schema"):
//
//   choice     F
//   auto       triggered_tags: free text until the family's marker
//              (<tool_call>, [TOOL_CALLS], <|tool_call|>), then a call to
//              one of the tools; free text again after it
//   required   the same with at_least_one: no text before the first call
//   function   only that tool's call, exactly one
//   none       nothing to constrain (nullopt)
//
// parallel_tool_calls false: stop_after_first (one call). A marker that is a
// control token of the vocabulary (Mistral's [TOOL_CALLS], Phi-4-mini's
// <|tool_call|>: `control_token_id` gives its id) is matched as that token
// by id (xgrammar's token-level formats: {"type": "token", "token": ID},
// token_triggered_tags), since its text is no text the model can spell.
//
// Syntaxes without a marker: Llama 3's call is the whole answer, so
// required / function constrain the whole answer to one call, and auto has
// nothing to trigger on (nullopt: unconstrained, parsed after). Gemma's
// pythonic calls write Python literals, which no JSON Schema format of
// xgrammar writes: required / function are Unimplemented (the caller
// answers 400), auto nullopt.
//
// Errors: a function choice naming no tool, InvalidArgument; kNone,
// InvalidArgument; a tool whose parameters are not JSON, InvalidArgument.
// Threads: a pure function.
#ifndef LLM_CLIENT_TOOLS_TOOL_CONSTRAINT_H_
#define LLM_CLIENT_TOOLS_TOOL_CONSTRAINT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "client/tools/tool_format.h"

namespace llm::client {

enum class ToolChoiceMode { kNone, kAuto, kRequired, kFunction };

struct ToolChoice {
  ToolChoiceMode mode = ToolChoiceMode::kAuto;
  std::string function;  // kFunction: the tool's name
  bool parallel = true;  // parallel_tool_calls
};

// A control token's id by its text; nullopt for text that is none.
using ControlTokenId = std::function<std::optional<int32_t>(std::string_view)>;

absl::StatusOr<std::optional<std::string>> ToolCallConstraint(
    ToolSyntax syntax, std::span<const ToolSpec> tools, const ToolChoice& choice,
    const ControlTokenId& control_token_id = nullptr);

}  // namespace llm::client

#endif  // LLM_CLIENT_TOOLS_TOOL_CONSTRAINT_H_
