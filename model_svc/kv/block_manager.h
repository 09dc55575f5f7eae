// KV cache bookkeeping: which pool blocks hold which sequence's positions.
//
// Integers only; no tensors. The pool has `num_blocks` blocks of
// `block_size` positions. A block may be shared by several sequences after a
// fork or a prefix-cache hit (reference counted); the first write into a
// shared block copies it (copy-on-write), which the caller performs on the
// backend.
//
// Prefix cache (EnablePrefixCache): every full block that a sequence commits
// gets a name, a chained hash of its parent block's name and its own tokens
// (so the name stands for the whole prefix up to the block's end), and is
// registered under it. When its last reference goes, a registered block
// keeps its KV and its name: it is "cached", counts as free, and waits in a
// least-recently-freed list until Take needs a block (it is evicted then:
// blocks without a name go first, then cached ones, oldest first) or Reuse
// revives it for a new sequence with the same prefix. A block loses its
// name before anything is written into it in place (Reserve), so a name
// always says what its block holds. The KV of a position
// depends only on the tokens up to it (one model per pool), so a revived
// block holds exactly what computing the prefix again would write. Names are
// 64-bit; a hit also compares the block's tokens and its parent's name, so a
// wrong reuse needs two prefixes whose 64-bit names collide.
//
// BlockLease holds one sequence's table and releases its blocks when it is
// destroyed (or reassigned), so that no path that ends a sequence has to
// remember to free them.
//
// Threads: not thread-safe; the engine guards it, and its leases, with its
// mutex. A lease must not outlive its manager.
// Cost: Commit and Reuse hash block_size tokens per full block; every other
// call is linear in the blocks it touches.
#ifndef LLM_MODEL_SVC_KV_BLOCK_MANAGER_H_
#define LLM_MODEL_SVC_KV_BLOCK_MANAGER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace llm::kv {

// The blocks of one sequence: position p is in blocks[p / block_size].
struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t num_tokens = 0;
  // With the prefix cache: the names of the full blocks, in order
  // (hashes.size() == num_tokens / block_size).
  std::vector<uint64_t> hashes;
  // Its KV came from outside (a session snapshot, snapshot/snapshot.h): its
  // blocks are never named, so that no other sequence shares KV that this
  // replica did not compute, and it reuses no cached block (it has no
  // names to chain from). Forks inherit it; Release clears it.
  bool foreign = false;
};

// A block copy the backend must perform before the step writes into `dst`.
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size);

  // Turns the prefix cache on (before any block is used). `seed` starts
  // every chain of names.
  void EnablePrefixCache(uint64_t seed);
  bool prefix_cache() const { return prefix_cache_; }

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks that Take can hand out: never used, or cached (evictable).
  int32_t num_free() const { return static_cast<int32_t>(free_.size()) + num_cached_; }
  // Free blocks that hold a cached prefix.
  int32_t num_cached() const { return num_cached_; }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // Blocks that Reserve(table, new_tokens) would take from the free list.
  int32_t BlocksNeeded(const BlockTable& table, int64_t new_tokens) const;

  // Makes room for positions [num_tokens, num_tokens + new_tokens): adds
  // blocks, and replaces a shared block that those positions fall into by a
  // private copy (appending the copy to `copies`); a private named block
  // they fall into (after a truncation) loses its name, as it will be
  // written in place. Does not change num_tokens. All or nothing:
  // RESOURCE_EXHAUSTED leaves everything as it was.
  absl::Status Reserve(BlockTable& table, int64_t new_tokens, std::vector<BlockCopy>* copies);

  // Counts n reserved positions as computed (their KV is written). `tokens`
  // holds the sequence's tokens from position 0, at least num_tokens + n of
  // them: with the prefix cache, the blocks that become full are named and
  // registered.
  void Commit(BlockTable& table, int64_t n, const std::vector<int32_t>& tokens);

  // With the prefix cache, on a table whose blocks are all full
  // (num_tokens a multiple of block_size, nothing reserved past it): appends
  // the longest run of cached blocks that hold `tokens` (the n tokens that
  // follow the table's), sharing them, and returns how many tokens they
  // cover (a multiple of block_size, less than n: the last token is always
  // left to compute, for its logits). 0 without the cache.
  int64_t Reuse(BlockTable& table, const int32_t* tokens, int64_t n);
  // Whether Reuse can extend `table`: the cache is on, and the table's
  // blocks are all full with nothing reserved past them.
  bool CanReuse(const BlockTable& table) const;

  // Gives `child` the same blocks as `parent`, shared.
  void Fork(const BlockTable& parent, BlockTable& child);

  // Keeps the first n positions (n <= num_tokens) and releases the blocks
  // past them, including blocks reserved for positions not yet computed
  // (n == num_tokens drops only those). A named block that n cuts into
  // keeps its name until a write into it (Reserve).
  void Truncate(BlockTable& table, int64_t n);

  // Releases every block of the table (last first, so that a cached chain is
  // evicted from its end) and empties it.
  void Release(BlockTable& table);

 private:
  static constexpr int32_t kNone = -1;
  static constexpr uint64_t kUnnamed = 0;

  struct Name {
    uint64_t hash = kUnnamed;
    uint64_t parent = 0;
  };

  uint64_t Chain(uint64_t parent, const int32_t* tokens) const;
  int32_t Take();
  void Unref(int32_t block);
  void Register(int32_t block, uint64_t parent, uint64_t hash, const int32_t* tokens);
  void Unregister(int32_t block);
  // The least-recently-freed list of cached blocks (intrusive, by id).
  void LinkCached(int32_t block);
  void UnlinkCached(int32_t block);

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // unnamed free blocks, a stack: the latest is reused first

  bool prefix_cache_ = false;
  uint64_t seed_ = 0;
  std::vector<Name> names_;                       // per block
  std::vector<int32_t> block_tokens_;             // per block: its tokens, while named
  absl::flat_hash_map<uint64_t, int32_t> named_;  // name -> block
  std::vector<int32_t> prev_, next_;              // the cached list's links, per block
  int32_t oldest_ = kNone, newest_ = kNone;
  int32_t num_cached_ = 0;
};

// The blocks of one sequence, owned: move-only; the destructor releases them
// to the manager. A default-constructed lease is empty and has no manager
// (it may only be assigned to).
class BlockLease {
 public:
  BlockLease() = default;
  explicit BlockLease(BlockManager* manager) : manager_(manager) {}
  BlockLease(BlockLease&& other) noexcept
      : manager_(std::exchange(other.manager_, nullptr)), table_(std::move(other.table_)) {
    other.table_ = BlockTable();
  }
  BlockLease& operator=(BlockLease&& other) noexcept;
  BlockLease(const BlockLease&) = delete;
  BlockLease& operator=(const BlockLease&) = delete;
  ~BlockLease() { Release(); }

  const BlockTable& table() const { return table_; }
  const std::vector<int32_t>& blocks() const { return table_.blocks; }
  int64_t num_tokens() const { return table_.num_tokens; }

  // As BlockManager's, on this lease's table.
  int32_t BlocksNeeded(int64_t new_tokens) const {
    return manager_->BlocksNeeded(table_, new_tokens);
  }
  absl::Status Reserve(int64_t new_tokens, std::vector<BlockCopy>* copies) {
    return manager_->Reserve(table_, new_tokens, copies);
  }
  void Truncate(int64_t n) { manager_->Truncate(table_, n); }
  void Commit(int64_t n, const std::vector<int32_t>& tokens) {
    manager_->Commit(table_, n, tokens);
  }
  int64_t Reuse(const int32_t* tokens, int64_t n) { return manager_->Reuse(table_, tokens, n); }
  // Marks the table foreign (BlockTable::foreign), before anything is
  // committed to it.
  void MarkForeign() { table_.foreign = true; }
  // A new lease sharing this one's blocks (copy-on-write).
  BlockLease Fork() const;
  // Releases every block now; the lease stays usable, empty.
  void Release() {
    if (manager_ != nullptr) manager_->Release(table_);
  }

 private:
  BlockManager* manager_ = nullptr;
  BlockTable table_;
};

}  // namespace llm::kv

#endif  // LLM_MODEL_SVC_KV_BLOCK_MANAGER_H_
