#include "model_svc/kv/block_manager.h"

#include <algorithm>

#include "common/strings.h"

namespace llm::kv {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), ref_counts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockManager::BlocksNeeded(const BlockTable& table, int64_t new_tokens) const {
  const int64_t end = table.num_tokens + new_tokens;
  const int64_t have = static_cast<int64_t>(table.blocks.size());
  int64_t needed = (end + block_size_ - 1) / block_size_ - have;
  if (needed < 0) needed = 0;
  // Existing blocks the new positions fall into that are shared get copied.
  if (new_tokens > 0) {
    const int64_t last = std::min(have, (end + block_size_ - 1) / block_size_);
    for (int64_t i = table.num_tokens / block_size_; i < last; ++i) {
      if (ref_counts_[table.blocks[i]] > 1) ++needed;
    }
  }
  return static_cast<int32_t>(needed);
}

absl::Status BlockManager::Reserve(BlockTable& table, int64_t new_tokens,
                                   std::vector<BlockCopy>* copies) {
  const int32_t needed = BlocksNeeded(table, new_tokens);
  if (needed > num_free()) {
    return absl::ResourceExhaustedError(
        StrCat("KV cache full: ", needed, " blocks needed, ", num_free(), " free"));
  }
  if (new_tokens <= 0) return absl::OkStatus();
  const int64_t end = table.num_tokens + new_tokens;
  const int64_t last =
      std::min<int64_t>(table.blocks.size(), (end + block_size_ - 1) / block_size_);
  for (int64_t i = table.num_tokens / block_size_; i < last; ++i) {
    if (ref_counts_[table.blocks[i]] > 1) {
      const int32_t copy = Take();
      copies->push_back(BlockCopy{table.blocks[i], copy});
      Unref(table.blocks[i]);
      table.blocks[i] = copy;
    }
  }
  while (static_cast<int64_t>(table.blocks.size()) * block_size_ < end) {
    table.blocks.push_back(Take());
  }
  return absl::OkStatus();
}

void BlockManager::Fork(const BlockTable& parent, BlockTable& child) {
  Release(child);
  // Only the blocks holding positions: blocks reserved past them stay private.
  const size_t used = static_cast<size_t>((parent.num_tokens + block_size_ - 1) / block_size_);
  child.blocks.assign(parent.blocks.begin(),
                      parent.blocks.begin() + std::min(used, parent.blocks.size()));
  child.num_tokens = parent.num_tokens;
  for (int32_t b : child.blocks) ++ref_counts_[b];
}

void BlockManager::Truncate(BlockTable& table, int64_t n) {
  if (n > table.num_tokens) return;
  const size_t keep = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  while (table.blocks.size() > keep) {
    Unref(table.blocks.back());
    table.blocks.pop_back();
  }
  table.num_tokens = n;
}

void BlockManager::Release(BlockTable& table) {
  for (int32_t b : table.blocks) Unref(b);
  table.blocks.clear();
  table.num_tokens = 0;
}

int32_t BlockManager::Take() {
  const int32_t b = free_.back();
  free_.pop_back();
  ref_counts_[b] = 1;
  return b;
}

void BlockManager::Unref(int32_t block) {
  if (--ref_counts_[block] == 0) free_.push_back(block);
}

BlockLease& BlockLease::operator=(BlockLease&& other) noexcept {
  if (this != &other) {
    Release();
    manager_ = std::exchange(other.manager_, nullptr);
    table_ = std::move(other.table_);
    other.table_ = BlockTable();
  }
  return *this;
}

BlockLease BlockLease::Fork() const {
  BlockLease child(manager_);
  manager_->Fork(table_, child.table_);
  return child;
}

}  // namespace llm::kv
