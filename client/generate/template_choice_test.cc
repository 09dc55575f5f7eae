#include "client/generate/template_choice.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using ::testing::HasSubstr;

constexpr char kChatMl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

ModelTemplateInfo Gemma3WithoutTemplate() {
  return {"", "gemma3", {"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"}, "<bos>", "<eos>"};
}

TEST(TemplateChoiceTest, TheModelsOwnTemplateSilently) {
  absl::StatusOr<TemplateChoice> c =
      ChooseChatTemplate({kChatMl, "llama", {"<|im_start|>"}, "", ""}, "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->chat_template.kind(), ChatTemplate::Kind::kJinja);
  EXPECT_EQ(c->chat_template.name(), "gguf");
  EXPECT_EQ(c->note, "");
}

TEST(TemplateChoiceTest, FamilyDefaultWithANote) {
  absl::StatusOr<TemplateChoice> c = ChooseChatTemplate(Gemma3WithoutTemplate(), "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->chat_template.name(), "gemma");
  EXPECT_THAT(c->note, HasSubstr("no chat template; using the built-in 'gemma' template"));
  const ChatMessage m[] = {{"user", "Hi"}};
  EXPECT_EQ(*c->chat_template.Render(m, true),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(TemplateChoiceTest, UnparsableTemplateFallsBackWithTheReason) {
  ModelTemplateInfo info = Gemma3WithoutTemplate();
  info.chat_template = "{% include 'x' %}";
  absl::StatusOr<TemplateChoice> c = ChooseChatTemplate(info, "");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->chat_template.name(), "gemma");
  EXPECT_THAT(c->note, HasSubstr("not supported here (line 1, column 4: 'include'"));
}

TEST(TemplateChoiceTest, NothingFitsIsRawWithAWarning) {
  absl::StatusOr<TemplateChoice> c =
      ChooseChatTemplate({"", "gpt2", {"<|endoftext|>"}, "", ""}, "");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->chat_template.kind(), ChatTemplate::Kind::kRaw);
  EXPECT_THAT(c->note, HasSubstr("warning: the model has no chat template and no built-in"));
}

TEST(TemplateChoiceTest, FlagNamesABuiltinRawOrAFile) {
  ModelTemplateInfo info = {kChatMl, "llama", {}, "<s>", "</s>"};
  EXPECT_EQ(ChooseChatTemplate(info, "zephyr")->chat_template.name(), "zephyr");
  EXPECT_EQ(ChooseChatTemplate(info, "raw")->chat_template.kind(), ChatTemplate::Kind::kRaw);
  const std::string path = ::testing::TempDir() + "/t.jinja";
  std::ofstream(path) << "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}";
  absl::StatusOr<TemplateChoice> c = ChooseChatTemplate(info, path);
  ASSERT_TRUE(c.ok()) << c.status();
  const ChatMessage m[] = {{"user", "Hi"}};
  EXPECT_EQ(*c->chat_template.Render(m, true), "<s>[Hi]");
  std::ofstream(path) << "{% if %}";
  EXPECT_THAT(std::string(ChooseChatTemplate(info, path).status().message()),
              HasSubstr("line 1, column 7"));
  EXPECT_THAT(std::string(ChooseChatTemplate(info, "nope").status().message()),
              HasSubstr("neither a built-in template (chatml, gemma, llama3"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace llm::client
