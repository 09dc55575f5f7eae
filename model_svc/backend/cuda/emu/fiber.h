// Cooperative fibers for the CUDA emulator: a stack and a saved context per
// emulated thread, switched by hand (no kernel threads, no locks).
//
// On x86-64 a switch saves the callee-saved registers and the stack pointer
// (a dozen instructions, no system call: glibc's swapcontext saves the
// signal mask with one); elsewhere it is ucontext's swapcontext. Under
// AddressSanitizer every switch is announced to it
// (__sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber), so
// that the emulated build runs under the asan preset.
//
// Threads: a fiber runs on the OS thread that created it.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_FIBER_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_FIBER_H_

#include <cstddef>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace llm::cuda::emu {

struct FiberContext {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

// Stack memory for fibers (mmap'd, with a guard page below).
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  char* mapping_ = nullptr;
  size_t mapping_size_ = 0;
  char* base_ = nullptr;
  size_t size_ = 0;
};

// Prepares `ctx` to start `entry` on `stack` at the first switch to it.
// `entry` must never return (it switches away for the last time instead).
void MakeFiber(FiberContext* ctx, const FiberStack& stack, void (*entry)());

// Saves the running context in `from` and resumes `to`. Under ASan the
// caller announces the switch (AsanStartSwitch / AsanFinishSwitch).
void SwitchFiber(FiberContext* from, FiberContext* to);

// AddressSanitizer's fiber annotations; no-ops without ASan.
void AsanStartSwitch(void** fake_stack_save, const void* bottom, size_t size);
void AsanFinishSwitch(void* fake_stack_save, const void** bottom_old, size_t* size_old);
// Clears ASan's poison left on a stack by a fiber that never unwound.
void AsanUnpoison(const void* p, size_t size);

}  // namespace llm::cuda::emu

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_FIBER_H_
