#include "client/generate/chat_template.h"

#include <vector>

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

// Llama 3's (abridged: the markers are what Detect looks at).
constexpr char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}";

// Qwen2-style ChatML whose system message comes from the messages.
constexpr char kQwenLikeTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplateTest, DetectsSmolLm2AsChatMlWithItsDefaultSystem) {
  ChatTemplate t = ChatTemplate::Detect(kSmolLm2Template);
  EXPECT_EQ(t.kind(), ChatTemplate::Kind::kChatMl);
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.default_system(),
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
}

TEST(ChatTemplateTest, DetectsLlama3AndRaw) {
  EXPECT_EQ(ChatTemplate::Detect(kLlama3Template).kind(), ChatTemplate::Kind::kLlama3);
  EXPECT_EQ(ChatTemplate::Detect("").kind(), ChatTemplate::Kind::kRaw);
  EXPECT_EQ(ChatTemplate::Detect("{{ bos_token }}{{ message }}").kind(), ChatTemplate::Kind::kRaw);
}

TEST(ChatTemplateTest, NoDefaultSystemWhenTheTemplateHasNoLiteralOne) {
  ChatTemplate t = ChatTemplate::Detect(kQwenLikeTemplate);
  EXPECT_EQ(t.kind(), ChatTemplate::Kind::kChatMl);
  EXPECT_EQ(t.default_system(), "");
}

TEST(ChatTemplateTest, EscapedNewlineInTheLiteralIsUnescaped) {
  EXPECT_EQ(
      ExtractChatMlDefaultSystem("{{ '<|im_start|>system\\nBe brief.\\nReally.<|im_end|>\\n' }}"),
      "Be brief.\nReally.");
}

// What SmolLM2's template renders for the same conversation (checked
// against Hugging Face's apply_chat_template).
TEST(ChatTemplateTest, ChatMlFirstTurnAddsTheDefaultSystemMessage) {
  ChatTemplate t = ChatTemplate::Detect(kSmolLm2Template);
  const std::vector<ChatMessage> turn = {{"user", "What is the capital of France?"}};
  EXPECT_EQ(t.FormatTurn(turn, /*first=*/true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
            "Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of "
            "France?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatMlGivenSystemReplacesTheDefault) {
  ChatTemplate t = ChatTemplate::Detect(kSmolLm2Template);
  const std::vector<ChatMessage> turn = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(t.FormatTurn(turn, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

// Turn by turn, the texts add up to the whole conversation's rendering.
TEST(ChatTemplateTest, ChatMlTurnsConcatenateToTheWholeConversation) {
  ChatTemplate t = ChatTemplate::ChatMl("S");
  const std::vector<ChatMessage> t1 = {{"user", "A"}};
  const std::vector<ChatMessage> t2 = {{"user", "B"}};
  const std::string conversation =
      t.FormatTurn(t1, true) + "answer one" + t.EndOfAssistantTurn() + t.FormatTurn(t2, false);
  EXPECT_EQ(conversation,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nA<|im_end|>\n"
            "<|im_start|>assistant\nanswer one<|im_end|>\n<|im_start|>user\nB<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, Llama3Format) {
  ChatTemplate t = ChatTemplate::Llama3();
  const std::vector<ChatMessage> t1 = {{"system", "Be brief."}, {"user", "  Hi \n"}};
  const std::vector<ChatMessage> t2 = {{"user", "Bye"}};
  EXPECT_EQ(t.FormatTurn(t1, true) + "Hello" + t.EndOfAssistantTurn() + t.FormatTurn(t2, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, RawIsPlainText) {
  ChatTemplate t = ChatTemplate::Raw();
  const std::vector<ChatMessage> turn = {{"user", "Once upon a time"}};
  EXPECT_EQ(t.FormatTurn(turn, true), "Once upon a time\n");
  EXPECT_EQ(t.EndOfAssistantTurn(), "\n");
}

}  // namespace
}  // namespace llm::client
