#include "client/generate/template_choice.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "client/generate/builtin_templates.h"
#include "common/strings.h"

namespace llm::client {
namespace {

std::string Names() { return StrCat(StrJoin(BuiltinTemplateNames(), ", "), ", raw"); }

absl::StatusOr<ChatTemplate> Builtin(std::string_view name, const ModelTemplateInfo& info) {
  return ChatTemplate::FromJinja(*BuiltinTemplate(name), std::string(name), info.bos_token,
                                 info.eos_token);
}

// The family default, or raw with a warning; `why` starts the note.
absl::StatusOr<TemplateChoice> Fallback(const ModelTemplateInfo& info, std::string why) {
  const std::string_view family = DefaultFamily(info.architecture, info.special_tokens);
  if (family.empty()) {
    return TemplateChoice{
        ChatTemplate::Raw(),
        StrCat("warning: ", why, " and no built-in template fits this vocabulary; prompts go to ",
               "the model as raw text (--template NAME|FILE to choose one: ", Names(), ")")};
  }
  absl::StatusOr<ChatTemplate> t = Builtin(family, info);
  if (!t.ok()) return t.status();
  return TemplateChoice{*std::move(t),
                        StrCat(why, "; using the built-in '", family,
                               "' template (--template NAME|FILE to choose another)")};
}

}  // namespace

absl::StatusOr<TemplateChoice> ChooseChatTemplate(const ModelTemplateInfo& info,
                                                  std::string_view template_flag) {
  if (!template_flag.empty()) {
    if (template_flag == "raw") return TemplateChoice{ChatTemplate::Raw(), ""};
    if (BuiltinTemplate(template_flag)) {
      absl::StatusOr<ChatTemplate> t = Builtin(template_flag, info);
      if (!t.ok()) return t.status();
      return TemplateChoice{*std::move(t), ""};
    }
    std::ifstream in{std::string(template_flag), std::ios::binary};
    if (!in) {
      return absl::InvalidArgumentError(StrCat("--template: '", template_flag,
                                               "' is neither a built-in template (", Names(),
                                               ") nor a readable file"));
    }
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<ChatTemplate> t = ChatTemplate::FromJinja(text.str(), std::string(template_flag),
                                                             info.bos_token, info.eos_token);
    if (!t.ok()) {
      return absl::InvalidArgumentError(
          StrCat("--template ", template_flag, ": ", t.status().message()));
    }
    return TemplateChoice{*std::move(t), ""};
  }
  if (info.chat_template.empty()) return Fallback(info, "the model has no chat template");
  absl::StatusOr<ChatTemplate> t =
      ChatTemplate::FromJinja(info.chat_template, "gguf", info.bos_token, info.eos_token);
  if (t.ok()) return TemplateChoice{*std::move(t), ""};
  return Fallback(
      info, StrCat("the model's chat template is not supported here (", t.status().message(), ")"));
}

}  // namespace llm::client
