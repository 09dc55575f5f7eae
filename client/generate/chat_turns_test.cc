#include "client/generate/chat_turns.h"

#include <string>

#include "client/generate/builtin_templates.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

// SmolLM2-135M-Instruct's tokenizer.chat_template, as its GGUF holds it.
constexpr char kSmolLm2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

// Qwen3's handling of earlier answers, reduced: the reasoning of old
// assistant turns is dropped when the conversation is rendered again.
constexpr char kDropsThinkTemplate[] =
    "{%- for m in messages %}{%- set c = m.content %}"
    "{%- if m.role == 'assistant' and '</think>' in c %}{%- set c = c.split('</think>')[-1]"
    ".lstrip('\\n') %}{%- endif %}"
    "{{- '<|im_start|>' + m.role + '\\n' + c + '<|im_end|>\\n' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

ChatTemplate Jinja(std::string_view text) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromJinja(text, "test", "<s>", "</s>");
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The Jinja rendering of SmolLM2's own template gives, turn by turn, exactly
// the text of the written-out ChatML format the client used before.
TEST(ChatTurnsTest, SmolLm2JinjaTurnsEqualTheChatMlFormat) {
  for (const std::string system : {"", "Be brief."}) {
    ChatTurns jinja(Jinja(kSmolLm2Template), system);
    ChatTurns chatml(ChatTemplate::Detect(kSmolLm2Template), system);
    ASSERT_EQ(chatml.chat_template().kind(), ChatTemplate::Kind::kChatMl);
    const std::string users[] = {"What is the capital of France?", "And of Italy?", "Thanks"};
    const std::string answers[] = {"The capital of France is Paris.", "Rome.",
                                   " You're welcome!\n"};
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::string> a = jinja.Render(users[i]);
      absl::StatusOr<std::string> b = chatml.Render(users[i]);
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_EQ(*a, *b) << "turn " << i;
      jinja.Commit(users[i], answers[i], *a);
      chatml.Commit(users[i], answers[i], *b);
    }
  }
}

TEST(ChatTurnsTest, FirstTurnIsTheWholeRendering) {
  ChatTurns turns(Jinja(*BuiltinTemplate("gemma")), "");
  absl::StatusOr<std::string> p = turns.Render("Hi");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTurnsTest, LaterTurnsRenderTheWholeConversation) {
  ChatTurns turns(Jinja(*BuiltinTemplate("gemma")), "Be brief.");
  absl::StatusOr<std::string> p = turns.Render("Hi");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, "<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  turns.Commit("Hi", "Hello!", *p);
  const std::string first = *p + "Hello!";
  p = turns.Render("Bye");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, first +
                    "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
                    "<start_of_turn>model\n");
}

// The written-out formats keep the turns as they were rendered and answered.
TEST(ChatTurnsTest, WrittenOutFormatsAppendTurns) {
  ChatTurns turns(ChatTemplate::Detect(kSmolLm2Template), "");
  absl::StatusOr<std::string> p = turns.Render("Hi");
  ASSERT_TRUE(p.ok());
  turns.Commit("Hi", "Hello!", *p);
  absl::StatusOr<std::string> next = turns.Render("Bye");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->substr(0, p->size() + 6), *p + "Hello!");
  EXPECT_EQ(next->substr(p->size() + 6),
            "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

// A template that re-renders history: the rendering is what the template
// gives now (the old reasoning dropped), not the text the session holds.
TEST(ChatTurnsTest, RerenderedHistoryIsRenderedAnew) {
  ChatTurns turns(Jinja(kDropsThinkTemplate), "");
  absl::StatusOr<std::string> p = turns.Render("Hi");
  ASSERT_TRUE(p.ok());
  turns.Commit("Hi", "<think>\nshort\n</think>\n\nHello!", *p);
  p = turns.Render("Bye");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTurnsTest, TemplateErrorsAreReturned) {
  ChatTurns turns(Jinja(*BuiltinTemplate("mistral")), "");
  ASSERT_TRUE(turns.Render("Hi").ok());
  ChatTurns gemma2(Jinja("{{ raise_exception('System role not supported') }}"), "sys");
  absl::StatusOr<std::string> p = gemma2.Render("Hi");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("System role not supported"), std::string::npos);
}

}  // namespace
}  // namespace llm::client
