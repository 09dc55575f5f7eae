#include "client/constrain/matcher.h"

#include <dlpack/dlpack.h>
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/constrain/xgrammar_impl.h"
#include "client/constrain/xgrammar_log.h"
#include "common/strings.h"

namespace llm::constrain {

struct Matcher::Impl {
  explicit Impl(std::shared_ptr<const Constraint> c)
      : constraint(std::move(c)),
        matcher(constraint->impl().compiled),
        vocab_size(constraint->vocab_size()) {}

  std::shared_ptr<const Constraint> constraint;
  xgrammar::GrammarMatcher matcher;
  int32_t vocab_size;
};

Matcher::Matcher(std::shared_ptr<const Constraint> constraint)
    : impl_(std::make_unique<Impl>(std::move(constraint))) {}
Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

int32_t Matcher::vocab_size() const { return impl_->vocab_size; }
int32_t Matcher::mask_words() const { return (impl_->vocab_size + 31) / 32; }

absl::Status Matcher::FillMask(std::span<uint32_t> mask) {
  if (static_cast<int64_t>(mask.size()) != mask_words()) {
    return absl::InvalidArgumentError(llm::StrCat("mask of ", mask.size(),
                                                  " words; the vocabulary of ", impl_->vocab_size,
                                                  " tokens needs ", mask_words()));
  }
  if (IsTerminated()) return absl::FailedPreconditionError("the matcher has terminated");
  int64_t shape = static_cast<int64_t>(mask.size());
  DLTensor tensor{};
  tensor.data = mask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = &shape;
  try {
    impl_->matcher.FillNextTokenBitmask(&tensor);
  } catch (const std::exception& e) {
    return absl::InternalError(llm::StrCat("xgrammar: ", XgrammarErrorMessage(e)));
  }
  if (const int32_t tail = impl_->vocab_size % 32; tail != 0) {
    mask.back() &= (uint32_t{1} << tail) - 1;
  }
  // xgrammar allows a token whose bytes the grammar's prefix admits, so a
  // state can have no continuation a token spells (an empty character
  // class, a character the vocabulary lacks): say so here, once, rather
  // than leave a mask that allows nothing to the sampler or the server.
  if (std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; })) {
    return absl::InvalidArgumentError(llm::StrCat(
        "the constraint allows no token after the ", accepted_,
        " tokens accepted: no token of the vocabulary continues the output (an empty language, "
        "or text the vocabulary cannot spell)"));
  }
  return absl::OkStatus();
}

bool Matcher::Accept(int32_t id) {
  if (id < 0 || id >= impl_->vocab_size || IsTerminated()) return false;
  try {
    if (!impl_->matcher.AcceptToken(id)) return false;
  } catch (const std::exception&) {
    return false;
  }
  ++accepted_;
  return true;
}

absl::Status Matcher::Rollback(int n) {
  if (n < 0 || n > accepted_) {
    return absl::InvalidArgumentError(
        llm::StrCat("cannot roll back ", n, " tokens; ", accepted_, " were accepted"));
  }
  if (n == 0) return absl::OkStatus();
  try {
    impl_->matcher.Rollback(n);
  } catch (const std::exception& e) {
    return absl::InternalError(llm::StrCat("xgrammar: ", XgrammarErrorMessage(e)));
  }
  accepted_ -= n;
  return absl::OkStatus();
}

std::vector<int32_t> Matcher::ForcedTokens() const {
  if (IsTerminated()) return {};
  try {
    return impl_->matcher.FindJumpForwardTokens();
  } catch (const std::exception&) {
    return {};
  }
}

std::string Matcher::ForcedText() {
  if (IsTerminated()) return {};
  try {
    return impl_->matcher.FindJumpForwardString();
  } catch (const std::exception&) {
    return {};
  }
}

bool Matcher::CanEnd() const { return impl_->matcher.IsCompleted(); }
bool Matcher::IsTerminated() const { return impl_->matcher.IsTerminated(); }

void Matcher::Reset() {
  impl_->matcher.Reset();
  accepted_ = 0;
}

}  // namespace llm::constrain
