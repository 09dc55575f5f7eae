// The CUDA emulator's runtime API (include/cuda_runtime_api.h): device
// memory as host allocations with a map of what is device memory, copies
// checked against their direction, synchronous streams, stream capture into
// graphs, and CUDA's error reporting.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "model_svc/backend/cuda/emu/emulator.h"

struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;
  std::thread::id capture_thread;
  std::vector<std::function<cudaError_t()>> ops;
};
struct CUgraph_st {
  std::vector<std::function<cudaError_t()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<cudaError_t()>> ops;
};

namespace llm::cuda::emu {
namespace {

constexpr size_t kAlignment = 256;  // cudaMalloc's

struct Allocation {
  size_t bytes;
  bool pinned;  // cudaHostAlloc (host memory), not device memory
};

struct Memory {
  std::mutex mu;
  std::map<uintptr_t, Allocation> allocations;  // by start address
  size_t device_bytes = 0;
  size_t limit = 0;  // 0: none
};

Memory& Mem() {
  static Memory* m = [] {
    auto* m = new Memory;
    if (const char* mb = std::getenv("LLM_CUDA_EMU_MEMORY_MB")) {
      m->limit = static_cast<size_t>(std::strtoull(mb, nullptr, 10)) << 20;
    }
    return m;
  }();
  return *m;
}

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local std::string t_message;  // detail of the last SetError
thread_local cudaError_t t_message_code = cudaSuccess;
thread_local CUstream_st* t_capturing = nullptr;  // this thread's capture, if any

// Where [p, p + bytes) lies: in a device allocation, a pinned one, or
// neither (0: none; 1: device; 2: pinned).
int Classify(const void* p, size_t bytes) {
  Memory& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = m.allocations.upper_bound(a);
  if (it == m.allocations.begin()) return 0;
  --it;
  if (a + bytes > it->first + it->second.bytes) return 0;
  return it->second.pinned ? 2 : 1;
}

// A synchronous call during this thread's capture: unsupported, and the
// capture is invalidated (as CUDA does in global and thread-local modes).
bool CaptureForbids(const char* call) {
  if (t_capturing == nullptr) return false;
  t_capturing->invalidated = true;
  SetError(cudaErrorStreamCaptureUnsupported,
           StrCat("CUDA emulator: ", call, " during a stream capture"));
  return true;
}

cudaError_t CheckCopy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  const int d = Classify(dst, bytes), s = Classify(src, bytes);
  const char* problem = nullptr;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      if (d != 1) problem = "the destination is not device memory";
      if (s == 1) problem = "the source is device memory";
      break;
    case cudaMemcpyDeviceToHost:
      if (s != 1) problem = "the source is not device memory";
      if (d == 1) problem = "the destination is device memory";
      break;
    case cudaMemcpyDeviceToDevice:
      if (s != 1 || d != 1) problem = "an operand is not (all) device memory";
      break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
      break;
    default:
      problem = "invalid direction";
  }
  if (problem == nullptr) return cudaSuccess;
  return SetError(cudaErrorInvalidValue,
                  StrCat("CUDA emulator: cudaMemcpy of ", bytes, " bytes, kind ",
                         static_cast<int>(kind), ": ", problem));
}

}  // namespace

cudaError_t SetError(cudaError_t error, std::string message) {
  if (error == cudaSuccess) return error;
  t_last_error = error;
  t_message = std::move(message);
  t_message_code = error;
  return error;
}

cudaError_t Enqueue(cudaStream_t stream, std::function<cudaError_t()> op) {
  if (stream != nullptr && stream->capturing) {
    stream->ops.push_back(std::move(op));
    return cudaSuccess;
  }
  const cudaError_t e = op();
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

bool IsDeviceRange(const void* p, size_t bytes) { return Classify(p, bytes) == 1; }

}  // namespace llm::cuda::emu

using llm::StrCat;
using llm::cuda::emu::CaptureForbids;
using llm::cuda::emu::CheckCopy;
using llm::cuda::emu::Classify;
using llm::cuda::emu::Enqueue;
using llm::cuda::emu::Mem;
using llm::cuda::emu::SetError;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return SetError(cudaErrorInvalidDevice, "CUDA emulator: one device, 0");
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "CUDA emulator (host CPU)", sizeof(prop->name) - 1);
  const size_t limit = Mem().limit;
  prop->totalGlobalMem = limit != 0 ? limit : size_t{80} << 30;
  prop->sharedMemPerBlock = llm::cuda::emu::kMaxSharedBytes;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess
                     : SetError(cudaErrorInvalidDevice, "CUDA emulator: one device, 0");
}

cudaError_t cudaDeviceSynchronize() {
  if (CaptureForbids("cudaDeviceSynchronize")) return cudaErrorStreamCaptureUnsupported;
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  const cudaError_t e = llm::cuda::emu::t_last_error;
  llm::cuda::emu::t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError() { return llm::cuda::emu::t_last_error; }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define LLM_EMU_NAME(e) \
  case e:               \
    return #e;
    LLM_EMU_NAME(cudaSuccess)
    LLM_EMU_NAME(cudaErrorInvalidValue)
    LLM_EMU_NAME(cudaErrorMemoryAllocation)
    LLM_EMU_NAME(cudaErrorInitializationError)
    LLM_EMU_NAME(cudaErrorInvalidConfiguration)
    LLM_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    LLM_EMU_NAME(cudaErrorInsufficientDriver)
    LLM_EMU_NAME(cudaErrorDevicesUnavailable)
    LLM_EMU_NAME(cudaErrorNoDevice)
    LLM_EMU_NAME(cudaErrorInvalidDevice)
    LLM_EMU_NAME(cudaErrorInvalidResourceHandle)
    LLM_EMU_NAME(cudaErrorIllegalState)
    LLM_EMU_NAME(cudaErrorIllegalAddress)
    LLM_EMU_NAME(cudaErrorLaunchFailure)
    LLM_EMU_NAME(cudaErrorNotSupported)
    LLM_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    LLM_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    LLM_EMU_NAME(cudaErrorStreamCaptureUnmatched)
    LLM_EMU_NAME(cudaErrorStreamCaptureWrongThread)
#undef LLM_EMU_NAME
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  if (error != cudaSuccess && error == llm::cuda::emu::t_message_code) {
    return llm::cuda::emu::t_message.c_str();
  }
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidValue:
      return "invalid argument";
    default:
      return cudaGetErrorName(error);
  }
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (CaptureForbids("cudaMalloc")) return cudaErrorStreamCaptureUnsupported;
  if (bytes == 0) return cudaSuccess;
  auto& m = Mem();
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.limit != 0 && m.device_bytes + bytes > m.limit) {
      return SetError(cudaErrorMemoryAllocation,
                      StrCat("out of memory (the emulator's limit, LLM_CUDA_EMU_MEMORY_MB: ",
                             m.device_bytes, " bytes in use, ", bytes, " asked for)"));
    }
  }
  // Exactly `bytes` (no rounding up), so that ASan sees one past the end.
  void* p = nullptr;
  if (posix_memalign(&p, llm::cuda::emu::kAlignment, bytes) != 0) {
    return SetError(cudaErrorMemoryAllocation, "out of memory");
  }
  std::lock_guard<std::mutex> lock(m.mu);
  m.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, false};
  m.device_bytes += bytes;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  if (CaptureForbids("cudaFree")) return cudaErrorStreamCaptureUnsupported;
  auto& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.allocations.end() || it->second.pinned) {
    return SetError(cudaErrorInvalidValue,
                    "CUDA emulator: cudaFree of a pointer cudaMalloc did "
                    "not return (or freed twice)");
  }
  m.device_bytes -= it->second.bytes;
  m.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  *ptr = nullptr;
  if (CaptureForbids("cudaHostAlloc")) return cudaErrorStreamCaptureUnsupported;
  void* p = nullptr;
  if (posix_memalign(&p, 4096, bytes == 0 ? 1 : bytes) != 0) {
    return SetError(cudaErrorMemoryAllocation, "out of memory (page-locked host memory)");
  }
  auto& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  m.allocations[reinterpret_cast<uintptr_t>(p)] = {bytes, true};
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  auto& m = Mem();
  std::lock_guard<std::mutex> lock(m.mu);
  auto it = m.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.allocations.end() || !it->second.pinned) {
    return SetError(cudaErrorInvalidValue,
                    "CUDA emulator: cudaFreeHost of a pointer cudaHostAlloc did not return");
  }
  m.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes != 0 && Classify(ptr, bytes) != 1) {
    return SetError(cudaErrorInvalidValue,
                    StrCat("CUDA emulator: cudaMemset of ", bytes, " bytes outside device memory"));
  }
  return Enqueue(stream, [=] {
    std::memset(ptr, value, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (CaptureForbids("cudaMemset")) return cudaErrorStreamCaptureUnsupported;
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t e = CheckCopy(dst, src, bytes, kind); e != cudaSuccess) return e;
  return Enqueue(stream, [=] {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (CaptureForbids("cudaMemcpy")) return cudaErrorStreamCaptureUnsupported;
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (stream == nullptr) return SetError(cudaErrorInvalidResourceHandle, "null stream");
  if (llm::cuda::emu::t_capturing == stream) llm::cuda::emu::t_capturing = nullptr;
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream != nullptr && stream->capturing) {
    stream->invalidated = true;
    return SetError(cudaErrorStreamCaptureUnsupported,
                    "CUDA emulator: cudaStreamSynchronize of a capturing stream");
  }
  if (CaptureForbids("cudaStreamSynchronize")) return cudaErrorStreamCaptureUnsupported;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (stream == nullptr) {
    return SetError(cudaErrorStreamCaptureUnsupported,
                    "CUDA emulator: the legacy stream cannot be captured");
  }
  if (stream->capturing || llm::cuda::emu::t_capturing != nullptr) {
    return SetError(cudaErrorIllegalState, "CUDA emulator: a capture is already under way");
  }
  stream->capturing = true;
  stream->invalidated = false;
  stream->capture_thread = std::this_thread::get_id();
  stream->ops.clear();
  if (mode != cudaStreamCaptureModeRelaxed) llm::cuda::emu::t_capturing = stream;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  *graph = nullptr;
  if (stream == nullptr || !stream->capturing) {
    return SetError(cudaErrorIllegalState, "CUDA emulator: the stream is not capturing");
  }
  if (stream->capture_thread != std::this_thread::get_id()) {
    return SetError(cudaErrorStreamCaptureWrongThread,
                    "CUDA emulator: a capture ended by another thread");
  }
  stream->capturing = false;
  if (llm::cuda::emu::t_capturing == stream) llm::cuda::emu::t_capturing = nullptr;
  auto ops = std::move(stream->ops);
  stream->ops.clear();
  if (stream->invalidated) {
    return SetError(cudaErrorStreamCaptureInvalidated,
                    "CUDA emulator: the capture was invalidated by an unsupported call");
  }
  *graph = new CUgraph_st{std::move(ops)};
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (graph == nullptr) return SetError(cudaErrorInvalidValue, "CUDA emulator: null graph");
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return SetError(cudaErrorInvalidValue, "CUDA emulator: null graph exec");
  return Enqueue(stream, [exec] {
    for (const auto& op : exec->ops) {
      if (cudaError_t e = op(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
