#include "client/generate/builtin_templates.h"

#include "client/generate/chat_template.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

TEST(BuiltinTemplatesTest, EveryBuiltinParsesAndRenders) {
  ASSERT_EQ(BuiltinTemplateNames().size(), 7u);
  for (std::string_view name : BuiltinTemplateNames()) {
    absl::StatusOr<ChatTemplate> t =
        ChatTemplate::FromJinja(*BuiltinTemplate(name), std::string(name), "<s>", "</s>");
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    const ChatMessage messages[] = {{"user", "Hi"}};
    absl::StatusOr<std::string> out = t->Render(messages, true);
    ASSERT_TRUE(out.ok()) << name << ": " << out.status();
    EXPECT_NE(out->find("Hi"), std::string::npos) << name;
  }
  EXPECT_FALSE(BuiltinTemplate("nope").has_value());
}

TEST(BuiltinTemplatesTest, FamilyDefaults) {
  EXPECT_EQ(DefaultFamily("gemma3", {}), "gemma");
  EXPECT_EQ(DefaultFamily("", {"<bos>", "<start_of_turn>", "<end_of_turn>"}), "gemma");
  EXPECT_EQ(DefaultFamily("llama", {"<|begin_of_text|>", "<|start_header_id|>"}), "llama3");
  EXPECT_EQ(DefaultFamily("qwen2", {"<|im_start|>", "<|im_end|>"}), "qwen");
  EXPECT_EQ(DefaultFamily("llama", {"<|im_start|>", "<|im_end|>"}), "chatml");
  EXPECT_EQ(DefaultFamily("phi3", {"<|user|>", "<|end|>", "<|assistant|>"}), "phi3");
  EXPECT_EQ(DefaultFamily("llama", {"<s>", "[INST]", "[/INST]"}), "mistral");
  EXPECT_EQ(DefaultFamily("llama", {"<|user|>", "</s>"}), "zephyr");
  EXPECT_EQ(DefaultFamily("gpt2", {"<|endoftext|>"}), "");
}

}  // namespace
}  // namespace llm::client
