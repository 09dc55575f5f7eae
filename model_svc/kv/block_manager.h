// KV cache bookkeeping: which pool blocks hold which sequence's positions.
//
// Integers only; no tensors. The pool has `num_blocks` blocks of
// `block_size` positions. A block may be shared by several sequences after a
// fork (reference counted); the first write into a shared block copies it
// (copy-on-write), which the caller performs on the backend.
//
// BlockLease holds one sequence's table and releases its blocks when it is
// destroyed (or reassigned), so that no path that ends a sequence has to
// remember to free them.
//
// Threads: not thread-safe; the engine guards it, and its leases, with its
// mutex. A lease must not outlive its manager.
#ifndef LLM_MODEL_SVC_KV_BLOCK_MANAGER_H_
#define LLM_MODEL_SVC_KV_BLOCK_MANAGER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace llm::kv {

// The blocks of one sequence: position p is in blocks[p / block_size].
struct BlockTable {
  std::vector<int32_t> blocks;
  int64_t num_tokens = 0;
};

// A block copy the backend must perform before the step writes into `dst`.
struct BlockCopy {
  int32_t src;
  int32_t dst;
};

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // Blocks that Reserve(table, new_tokens) would take from the free list.
  int32_t BlocksNeeded(const BlockTable& table, int64_t new_tokens) const;

  // Makes room for positions [num_tokens, num_tokens + new_tokens): adds
  // blocks, and replaces a shared block that those positions fall into by a
  // private copy (appending the copy to `copies`). Does not change
  // num_tokens. All or nothing: RESOURCE_EXHAUSTED leaves everything as it was.
  absl::Status Reserve(BlockTable& table, int64_t new_tokens, std::vector<BlockCopy>* copies);

  // Gives `child` the same blocks as `parent`, shared.
  void Fork(const BlockTable& parent, BlockTable& child);

  // Keeps the first n positions (n <= num_tokens) and releases the blocks
  // past them, including blocks reserved for positions not yet computed
  // (n == num_tokens drops only those).
  void Truncate(BlockTable& table, int64_t n);

  // Releases every block of the table and empties it.
  void Release(BlockTable& table);

 private:
  int32_t Take();
  void Unref(int32_t block);

  int32_t block_size_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack: recently freed blocks are reused first
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
  // Counts n reserved positions as computed (their KV is written).
  void Commit(int64_t n) { table_.num_tokens += n; }
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
