#include "tokenizer_svc/byte_level.h"

#include <array>

#include "common/utf8.h"

namespace llm::tok {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};  // code points used are < 256 + 68

  Tables() {
    from_cp.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? b : 256 + extra++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t b) { return GetTables().to_cp[b]; }

std::string ByteLevelDecode(std::string_view text, bool* exact) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(text.size());
  if (exact != nullptr) *exact = true;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const int32_t cp = DecodeUtf8(text, pos, &len);
    if (cp >= 0 && static_cast<size_t>(cp) < t.from_cp.size() && t.from_cp[cp] >= 0) {
      out.push_back(static_cast<char>(t.from_cp[cp]));
    } else {
      out.append(text.substr(pos, len));
      if (exact != nullptr) *exact = false;
    }
    pos += len;
  }
  return out;
}

std::string ByteLevelEncode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(ByteToCodePoint(static_cast<uint8_t>(c)), out);
  return out;
}

}  // namespace llm::tok
