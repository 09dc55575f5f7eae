// The CUDA emulator's grid execution: blocks in turn, each block's threads
// as fibers under a scheduler, barriers, warp exchanges and the race check
// (emulator.h).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/strings.h"
#include "model_svc/backend/cuda/emu/emulator.h"
#include "model_svc/backend/cuda/emu/fiber.h"

namespace llm::cuda::emu {
namespace {

constexpr size_t kStackBytes = size_t{64} << 10;

std::atomic<int64_t> g_grids{0}, g_blocks{0}, g_threads{0}, g_barriers{0}, g_switches{0};

enum class State { kReady, kBlockBarrier, kWarpBarrier, kDone };

struct Thread {
  FiberContext ctx;
  uint3 idx{0, 0, 0};
  int tid = 0;
  State state = State::kReady;
  void* fake_stack = nullptr;  // ASan's, while switched away
};

struct Warp {
  int arrived = 0, expected = 0;
  unsigned mask = 0;     // of the barrier under way
  unsigned present = 0;  // lanes the block has
  unsigned live = 0;     // lanes present and not returned
  // Exchange slots, two sets used in turn: a lane past one exchange's
  // barrier writes the other set, which no lane still reads (none can pass
  // the next barrier before every lane has read this one).
  int parity = 0;
  alignas(8) unsigned char slots[2][kWarpSize][8];
};

// The calling OS thread's running grid.
struct Grid {
  std::string name;
  dim3 grid_dim, block_dim;
  uint3 block_idx{0, 0, 0};
  const std::function<void()>* body = nullptr;

  std::vector<Thread> threads;
  std::vector<Warp> warps;
  std::vector<int> ready;  // run queue (indices into threads)
  size_t ready_head = 0;
  int live = 0;           // threads not returned
  int block_arrived = 0;  // at the block barrier
  Thread* current = nullptr;

  FiberContext scheduler;
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;

  int faults = 0;
  std::string fault;  // the first
};

thread_local Grid* t_grid = nullptr;
thread_local uint64_t t_epoch = 1;  // barrier intervals on this OS thread
thread_local std::vector<std::unique_ptr<FiberStack>> t_stacks;

Grid& G() {
  if (t_grid == nullptr || t_grid->current == nullptr) {
    std::fprintf(stderr, "CUDA emulator: a device function was called outside a kernel\n");
    std::abort();
  }
  return *t_grid;
}

std::string HexStr(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Coords(const uint3& v) { return StrCat("(", v.x, ",", v.y, ",", v.z, ")"); }

std::string ThreadName(const Grid& g, int tid) {
  return StrCat("thread ", Coords(g.threads[tid].idx), " (warp ", tid / kWarpSize, ", lane ",
                tid % kWarpSize, ")");
}

void Fault(Grid& g, std::string what) {
  if (g.faults++ == 0) {
    g.fault = StrCat("CUDA emulator: kernel ", g.name, ", block ", Coords(g.block_idx), ": ", what);
  }
}

void Wake(Grid& g, Thread& t) {
  t.state = State::kReady;
  g.ready.push_back(t.tid);
}

// Back to the scheduler; returns when the scheduler resumes this thread.
void Yield(Grid& g) {
  Thread& t = *g.current;
  AsanStartSwitch(&t.fake_stack, g.scheduler_bottom, g.scheduler_size);
  SwitchFiber(&t.ctx, &g.scheduler);
  AsanFinishSwitch(t.fake_stack, &g.scheduler_bottom, &g.scheduler_size);
}

void CompleteBlockBarrier(Grid& g) {
  g.block_arrived = 0;
  ++t_epoch;
  g_barriers.fetch_add(1, std::memory_order_relaxed);
  for (Thread& t : g.threads) {
    if (t.state == State::kBlockBarrier) Wake(g, t);
  }
}

void ThreadEntry() {
  Grid& g = *t_grid;
  AsanFinishSwitch(nullptr, &g.scheduler_bottom, &g.scheduler_size);
  (*g.body)();
  Thread& t = *g.current;
  t.state = State::kDone;
  --g.live;
  g.warps[t.tid / kWarpSize].live &= ~(1u << (t.tid % kWarpSize));
  // Threads that returned no longer count at the block barrier.
  if (g.block_arrived > 0 && g.block_arrived == g.live) CompleteBlockBarrier(g);
  AsanStartSwitch(nullptr, g.scheduler_bottom, g.scheduler_size);
  SwitchFiber(&t.ctx, &g.scheduler);
  std::abort();  // never resumed
}

void RunBlock(Grid& g) {
  const int n = static_cast<int>(g.block_dim.x * g.block_dim.y * g.block_dim.z);
  while (static_cast<int>(t_stacks.size()) < n) {
    t_stacks.push_back(std::make_unique<FiberStack>(kStackBytes));
  }
  g.threads.assign(n, Thread{});
  g.warps.assign((n + kWarpSize - 1) / kWarpSize, Warp{});
  for (size_t w = 0; w < g.warps.size(); ++w) {
    const int lanes = std::min(kWarpSize, n - static_cast<int>(w) * kWarpSize);
    g.warps[w].present = g.warps[w].live = lanes == 32 ? ~0u : (1u << lanes) - 1;
  }
  g.ready.clear();
  g.ready_head = 0;
  for (int i = 0; i < n; ++i) {
    Thread& t = g.threads[i];
    t.tid = i;
    t.idx = {i % g.block_dim.x, (i / g.block_dim.x) % g.block_dim.y,
             i / (g.block_dim.x * g.block_dim.y)};
    AsanUnpoison(t_stacks[i]->base(), t_stacks[i]->size());
    MakeFiber(&t.ctx, *t_stacks[i], &ThreadEntry);
    g.ready.push_back(i);
  }
  g.live = n;
  g.block_arrived = 0;
  ++t_epoch;
  int64_t switches = 0;
  while (g.ready_head < g.ready.size()) {
    Thread& t = g.threads[g.ready[g.ready_head++]];
    g.current = &t;
    AsanStartSwitch(&g.scheduler_fake_stack, t_stacks[t.tid]->base(), t_stacks[t.tid]->size());
    SwitchFiber(&g.scheduler, &t.ctx);
    AsanFinishSwitch(g.scheduler_fake_stack, nullptr, nullptr);
    ++switches;
    if (g.ready_head > 4096 && g.ready_head * 2 > g.ready.size()) {
      g.ready.erase(g.ready.begin(), g.ready.begin() + static_cast<ptrdiff_t>(g.ready_head));
      g.ready_head = 0;
    }
  }
  g.current = nullptr;
  g_switches.fetch_add(switches, std::memory_order_relaxed);
  if (g.live > 0) {
    // Every remaining thread waits at a barrier that cannot complete.
    int at_block = 0, at_warp = 0, first = -1;
    for (const Thread& t : g.threads) {
      if (t.state == State::kDone) continue;
      if (first < 0) first = t.tid;
      (t.state == State::kBlockBarrier ? at_block : at_warp)++;
    }
    Fault(g, StrCat("deadlock: ", at_block, " threads wait at __syncthreads and ", at_warp,
                    " in a warp shuffle or __syncwarp that cannot complete (first: ",
                    ThreadName(g, first), ")"));
  }
}

}  // namespace

const uint3& ThreadIdx() { return G().current->idx; }
const uint3& BlockIdx() { return G().block_idx; }
const dim3& BlockDim() { return G().block_dim; }
const dim3& GridDim() { return G().grid_dim; }

void SyncThreads() {
  Grid& g = G();
  ++g.block_arrived;
  if (g.block_arrived == g.live) {
    CompleteBlockBarrier(g);  // the caller goes on into the next interval
    return;
  }
  g.current->state = State::kBlockBarrier;
  Yield(g);
}

void SyncWarp(unsigned mask) {
  Grid& g = G();
  Thread& t = *g.current;
  const int lane = t.tid % kWarpSize, base = t.tid - lane;
  Warp& w = g.warps[t.tid / kWarpSize];
  if (((mask >> lane) & 1) == 0) {
    Fault(g, StrCat(ThreadName(g, t.tid), " is not in its own warp mask ", HexStr(mask)));
    return;
  }
  if (const unsigned absent = mask & ~w.live; absent != 0) {
    const int l = std::countr_zero(absent);
    Fault(g,
          StrCat(ThreadName(g, t.tid), ": warp mask ", HexStr(mask), " names lane ", l,
                 ((w.present >> l) & 1) == 0 ? ", which the block lacks" : ", which has returned"));
    return;
  }
  if (w.arrived == 0) {
    w.mask = mask;
    w.expected = std::popcount(mask);
  } else if (w.mask != mask) {
    Fault(g, StrCat(ThreadName(g, t.tid), ": warp mask ", HexStr(mask), " differs from its warp's ",
                    HexStr(w.mask)));
  }
  if (++w.arrived == w.expected) {
    w.arrived = 0;
    w.parity ^= 1;
    for (int l = 0; l < kWarpSize; ++l) {
      if (((w.mask >> l) & 1) && g.threads[base + l].state == State::kWarpBarrier) {
        Wake(g, g.threads[base + l]);
      }
    }
    return;
  }
  t.state = State::kWarpBarrier;
  Yield(g);
}

void WarpExchange(unsigned mask, const void* value, size_t bytes, int src_lane, void* out) {
  Grid& g = G();
  const int tid = g.current->tid;
  Warp& w = g.warps[tid / kWarpSize];
  const int set = w.parity;
  std::memcpy(w.slots[set][tid % kWarpSize], value, bytes);
  SyncWarp(mask);
  const bool from_other = src_lane >= 0 && src_lane < kWarpSize && ((mask >> src_lane) & 1);
  std::memcpy(out, from_other ? w.slots[set][src_lane] : value, bytes);
}

bool RaceCheckEnabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("LLM_CUDA_EMU_RACECHECK");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

void SharedAccess(ShadowCell& cell, const void* address, bool write, const char* array,
                  int64_t index) {
  if (!RaceCheckEnabled()) return;
  Grid& g = G();
  const int tid = g.current->tid;
  const uint64_t epoch = t_epoch;
  auto race = [&](int first, const char* first_did, const char* others) {
    Fault(g, StrCat("shared-memory race on ", array, "[", index, "] (address ",
                    HexStr(reinterpret_cast<uintptr_t>(address)), "): ", ThreadName(g, first), " ",
                    first_did, " it, then ", ThreadName(g, tid), " ", write ? "wrote" : "read",
                    " it", others, " with no barrier between"));
  };
  if (write) {
    if (cell.write_epoch == epoch && cell.writer != tid) {
      race(cell.writer, "wrote", "");
    } else if (cell.read_epoch == epoch && (cell.reader != tid || cell.many_readers)) {
      race(cell.reader, "read", cell.many_readers ? " (other threads read it too)" : "");
    }
    cell.write_epoch = epoch;
    cell.writer = tid;
  } else {
    if (cell.write_epoch == epoch && cell.writer != tid) race(cell.writer, "wrote", "");
    if (cell.read_epoch != epoch) {
      cell.read_epoch = epoch;
      cell.reader = tid;
      cell.many_readers = false;
    } else if (cell.reader != tid) {
      cell.many_readers = true;
    }
  }
}

void SharedOutOfBounds(const char* array, int64_t index, size_t size) {
  Grid& g = G();
  Fault(g, StrCat(ThreadName(g, g.current->tid), ": index ", index, " outside shared array ", array,
                  "[", size, "]"));
}

cudaError_t CheckLaunch(std::string_view name, dim3 grid, dim3 block) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > 64 || grid.x == 0 || grid.y == 0 ||
      grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    return SetError(
        cudaErrorInvalidConfiguration,
        StrCat("CUDA emulator: kernel ", name, ": invalid launch configuration, grid (", grid.x,
               ",", grid.y, ",", grid.z, "), block (", block.x, ",", block.y, ",", block.z, ")"));
  }
  return cudaSuccess;
}

cudaError_t RunGrid(std::string_view name, dim3 grid, dim3 block,
                    const std::function<void()>& body) {
  if (cudaError_t e = CheckLaunch(name, grid, block); e != cudaSuccess) return e;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (t_grid != nullptr) {
    return SetError(cudaErrorNotSupported, "CUDA emulator: a launch inside a kernel");
  }
  Grid g;
  g.name = std::string(name);
  g.grid_dim = grid;
  g.block_dim = block;
  g.body = &body;
  t_grid = &g;
  for (unsigned z = 0; z < grid.z && g.faults == 0; ++z) {
    for (unsigned y = 0; y < grid.y && g.faults == 0; ++y) {
      for (unsigned x = 0; x < grid.x && g.faults == 0; ++x) {
        g.block_idx = {x, y, z};
        RunBlock(g);
        g_blocks.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  t_grid = nullptr;
  g_grids.fetch_add(1, std::memory_order_relaxed);
  g_threads.fetch_add(static_cast<int64_t>(threads) * grid.x * grid.y * grid.z,
                      std::memory_order_relaxed);
  if (g.faults > 0) {
    std::fprintf(stderr, "%s\n", g.fault.c_str());
    return SetError(cudaErrorLaunchFailure,
                    g.faults > 1 ? StrCat(g.fault, " (and ", g.faults - 1, " more)") : g.fault);
  }
  return cudaSuccess;
}

std::string KernelNameFrom(std::string_view pretty) {
  // GCC: "... [with auto Kernel = NAME]"; Clang: "... [Kernel = &NAME]".
  size_t at = pretty.find("Kernel = ");
  if (at == std::string_view::npos) return std::string(pretty);
  std::string_view name = pretty.substr(at + 9);
  if (!name.empty() && name.front() == '&') name.remove_prefix(1);
  if (size_t end = name.rfind(']'); end != std::string_view::npos) name = name.substr(0, end);
  return std::string(name);
}

Counters GetCounters() {
  return {g_grids.load(), g_blocks.load(), g_threads.load(), g_barriers.load(), g_switches.load()};
}

}  // namespace llm::cuda::emu
