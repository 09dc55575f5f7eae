#include "model_svc/backend/cuda/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if defined(__SANITIZE_ADDRESS__)
#define LLM_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLM_EMU_ASAN 1
#endif
#endif
#if defined(LLM_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace llm::cuda::emu {

FiberStack::FiberStack(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_ = (bytes + page - 1) / page * page;
  mapping_size_ = size_ + page;
  void* p =
      mmap(nullptr, mapping_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("CUDA emulator: mmap of a fiber stack");
    std::abort();
  }
  mapping_ = static_cast<char*>(p);
  mprotect(mapping_, page, PROT_NONE);  // overflow faults instead of corrupting
  base_ = mapping_ + page;
}

FiberStack::~FiberStack() { munmap(mapping_, mapping_size_); }

#if defined(__x86_64__)

// llm_emu_switch(void** save_sp, void* new_sp): pushes the callee-saved
// registers, MXCSR and the x87 control word, stores the stack pointer, loads
// the other's and pops its registers (System V AMD64).
extern "C" void llm_emu_switch(void** save_sp, void* new_sp);
asm(R"(
  .text
  .p2align 4
  .globl llm_emu_switch
  .hidden llm_emu_switch
  .type llm_emu_switch, @function
llm_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size llm_emu_switch, .-llm_emu_switch
)");

void MakeFiber(FiberContext* ctx, const FiberStack& stack, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack.base() + stack.size()) & ~uintptr_t{15};
  auto* sp = reinterpret_cast<uint64_t*>(top);
  *--sp = 0;                                  // entry's return address: never used
  *--sp = reinterpret_cast<uint64_t>(entry);  // popped by llm_emu_switch's ret
  for (int i = 0; i < 6; ++i) *--sp = 0;      // rbp, rbx, r12 .. r15
  *--sp = uint64_t{0x037F} << 32 | 0x1F80;    // x87 control word, MXCSR: the defaults
  ctx->sp = sp;
}

void SwitchFiber(FiberContext* from, FiberContext* to) { llm_emu_switch(&from->sp, to->sp); }

#else

void MakeFiber(FiberContext* ctx, const FiberStack& stack, void (*entry)()) {
  getcontext(&ctx->uc);
  ctx->uc.uc_stack.ss_sp = stack.base();
  ctx->uc.uc_stack.ss_size = stack.size();
  ctx->uc.uc_link = nullptr;
  makecontext(&ctx->uc, entry, 0);
}

void SwitchFiber(FiberContext* from, FiberContext* to) { swapcontext(&from->uc, &to->uc); }

#endif

#if defined(LLM_EMU_ASAN)
void AsanStartSwitch(void** fake_stack_save, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
}
void AsanFinishSwitch(void* fake_stack_save, const void** bottom_old, size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
}
void AsanUnpoison(const void* p, size_t size) { __asan_unpoison_memory_region(p, size); }
#else
void AsanStartSwitch(void**, const void*, size_t) {}
void AsanFinishSwitch(void*, const void**, size_t*) {}
void AsanUnpoison(const void*, size_t) {}
#endif

}  // namespace llm::cuda::emu
