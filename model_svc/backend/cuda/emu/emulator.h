// The CUDA emulator's execution model, shared by the device-side API
// (device.h), the launch helper (launch.h) and the runtime (runtime.cc).
//
// A grid runs block after block on the calling thread. A block's threads
// are cooperative fibers (fiber.h) run by a scheduler in thread order; a
// fiber runs until it waits at a barrier (__syncthreads, or a warp
// barrier: every warp shuffle is an exchange among its lanes at a warp
// barrier) or returns. __shared__ arrays (LLM_SHARED_ARRAY) are one
// instance per OS thread, reused by each block in turn, with a shadow per
// element that the race check reads: within one barrier interval, an
// element written by one thread and read or written by another is a race.
//
// A kernel's faults (a race, a barrier that some threads never reach, a
// shuffle whose mask names lanes that are not there, a shared-memory index
// out of bounds) end its grid and are reported as cudaErrorLaunchFailure
// with the kernel's name, the block, the threads and the address
// (cudaGetErrorString gives the detail until the next fault).
//
// Threads: every function here acts on the calling OS thread's grid.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_EMULATOR_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_EMULATOR_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace llm::cuda::emu {

inline constexpr int kWarpSize = 32;
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr size_t kMaxSharedBytes = 48 * 1024;

// The calling fiber's coordinates (valid inside a kernel only).
const uint3& ThreadIdx();
const uint3& BlockIdx();
const dim3& BlockDim();
const dim3& GridDim();

// __syncthreads(): waits until every thread of the block that has not
// returned arrives.
void SyncThreads();
// Waits until every lane of `mask` in the caller's warp arrives (each must
// exist and not have returned; a fault otherwise).
void SyncWarp(unsigned mask);
// One warp exchange: the caller publishes `bytes` of `value`, then reads
// lane `src_lane`'s (its own when src_lane is outside `mask`) into `out`.
void WarpExchange(unsigned mask, const void* value, size_t bytes, int src_lane, void* out);

// The race check's record of one shared element.
struct ShadowCell {
  uint64_t write_epoch = 0, read_epoch = 0;
  int32_t writer = -1, reader = -1;
  bool many_readers = false;
};
// Records an access by the calling thread; reports a race (a fault) when
// another thread wrote the element in this barrier interval, or (for a
// write) read it.
void SharedAccess(ShadowCell& cell, const void* address, bool write, const char* array,
                  int64_t index);
// An index outside a shared array: a fault.
void SharedOutOfBounds(const char* array, int64_t index, size_t size);

// cudaSuccess when a launch of `grid` x `block` is valid; otherwise
// cudaErrorInvalidConfiguration as the last error, naming the kernel.
cudaError_t CheckLaunch(std::string_view name, dim3 grid, dim3 block);

// Runs `body` for every thread of the grid (as a kernel named `name`); the
// first fault, or cudaSuccess. Checks the launch configuration first
// (cudaErrorInvalidConfiguration, as CUDA does).
cudaError_t RunGrid(std::string_view name, dim3 grid, dim3 block,
                    const std::function<void()>& body);

// Runs `op` on `stream` now, or records it when the stream is capturing
// (cudaGraphLaunch runs it later); a launch's or op's error becomes the
// last error (cudaGetLastError).
cudaError_t Enqueue(cudaStream_t stream, std::function<cudaError_t()> op);

// Marks the last error (cudaGetLastError returns and clears it) with a
// message that cudaGetErrorString returns for it.
cudaError_t SetError(cudaError_t error, std::string message);

// Whether [p, p + bytes) lies inside one live device allocation.
bool IsDeviceRange(const void* p, size_t bytes);

// "llm::cuda::{anonymous}::AttentionKernel<__half, 2>" out of a
// __PRETTY_FUNCTION__ that names the kernel as its template argument.
std::string KernelNameFrom(std::string_view pretty_function);

// Grids run since the process started, and the barrier intervals their
// blocks went through (for the emulator's own tests).
struct Counters {
  int64_t grids = 0, blocks = 0, threads = 0, barriers = 0, switches = 0;
};
Counters GetCounters();

// Whether the race check runs (on by default; LLM_CUDA_EMU_RACECHECK=0
// turns it off).
bool RaceCheckEnabled();

}  // namespace llm::cuda::emu

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_EMULATOR_H_
