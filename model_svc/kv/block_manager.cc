#include "model_svc/kv/block_manager.h"

#include <algorithm>
#include <cstring>

#include "common/strings.h"

namespace llm::kv {
namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), ref_counts_(num_blocks, 0) {
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockManager::EnablePrefixCache(uint64_t seed) {
  prefix_cache_ = true;
  seed_ = seed;
  const size_t n = ref_counts_.size();
  names_.assign(n, Name());
  block_tokens_.assign(n * static_cast<size_t>(block_size_), 0);
  prev_.assign(n, kNone);
  next_.assign(n, kNone);
}

uint64_t BlockManager::Chain(uint64_t parent, const int32_t* tokens) const {
  uint64_t h = Mix(parent);
  for (int32_t i = 0; i < block_size_; ++i) h = Mix(h ^ static_cast<uint32_t>(tokens[i]));
  return h == kUnnamed ? 1 : h;
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
    } else if (prefix_cache_) {
      // Written in place: its name would no longer say what it holds.
      Unregister(table.blocks[i]);
    }
  }
  while (static_cast<int64_t>(table.blocks.size()) * block_size_ < end) {
    table.blocks.push_back(Take());
  }
  return absl::OkStatus();
}

void BlockManager::Commit(BlockTable& table, int64_t n, const std::vector<int32_t>& tokens) {
  table.num_tokens += n;
  if (!prefix_cache_ || table.foreign) return;
  const size_t full = static_cast<size_t>(table.num_tokens / block_size_);
  while (table.hashes.size() < full) {
    const size_t i = table.hashes.size();
    const uint64_t parent = i == 0 ? seed_ : table.hashes.back();
    const int32_t* block_tokens = tokens.data() + i * block_size_;
    const uint64_t hash = Chain(parent, block_tokens);
    table.hashes.push_back(hash);
    Register(table.blocks[i], parent, hash, block_tokens);
  }
}

bool BlockManager::CanReuse(const BlockTable& table) const {
  return prefix_cache_ && !table.foreign && table.num_tokens % block_size_ == 0 &&
         static_cast<int64_t>(table.blocks.size()) * block_size_ == table.num_tokens;
}

int64_t BlockManager::Reuse(BlockTable& table, const int32_t* tokens, int64_t n) {
  if (!CanReuse(table)) return 0;
  int64_t reused = 0;
  uint64_t parent = table.hashes.empty() ? seed_ : table.hashes.back();
  while (reused + block_size_ < n) {  // the last token stays to compute
    const int32_t* block_tokens = tokens + reused;
    const uint64_t hash = Chain(parent, block_tokens);
    auto it = named_.find(hash);
    if (it == named_.end()) break;
    const int32_t b = it->second;
    if (names_[b].parent != parent ||
        std::memcmp(&block_tokens_[static_cast<size_t>(b) * block_size_], block_tokens,
                    sizeof(int32_t) * block_size_) != 0) {
      break;  // a collision of names: not this prefix
    }
    if (ref_counts_[b] == 0) UnlinkCached(b);
    ++ref_counts_[b];
    table.blocks.push_back(b);
    table.hashes.push_back(hash);
    table.num_tokens += block_size_;
    reused += block_size_;
    parent = hash;
  }
  return reused;
}

void BlockManager::Fork(const BlockTable& parent, BlockTable& child) {
  Release(child);
  // Only the blocks holding positions: blocks reserved past them stay private.
  const size_t used = static_cast<size_t>((parent.num_tokens + block_size_ - 1) / block_size_);
  child.blocks.assign(parent.blocks.begin(),
                      parent.blocks.begin() + std::min(used, parent.blocks.size()));
  child.num_tokens = parent.num_tokens;
  child.hashes = parent.hashes;
  child.foreign = parent.foreign;
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
  // A block that n cuts into keeps its name (what it holds is unchanged)
  // until Reserve writes into it.
  if (prefix_cache_) {
    table.hashes.resize(std::min(table.hashes.size(), static_cast<size_t>(n / block_size_)));
  }
}

void BlockManager::Release(BlockTable& table) {
  for (auto it = table.blocks.rbegin(); it != table.blocks.rend(); ++it) Unref(*it);
  table.blocks.clear();
  table.hashes.clear();
  table.num_tokens = 0;
  table.foreign = false;
}

int32_t BlockManager::Take() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else {  // evict the least recently freed cached block
    b = oldest_;
    UnlinkCached(b);
    Unregister(b);
  }
  ref_counts_[b] = 1;
  return b;
}

void BlockManager::Unref(int32_t block) {
  if (--ref_counts_[block] > 0) return;
  if (prefix_cache_ && names_[block].hash != kUnnamed) {
    LinkCached(block);
  } else {
    free_.push_back(block);
  }
}

void BlockManager::Register(int32_t block, uint64_t parent, uint64_t hash, const int32_t* tokens) {
  // Named already: a reused block, whose name is this one (Reserve unnames a
  // block before writing into it, so a name always says what it holds).
  if (names_[block].hash != kUnnamed) return;
  if (!named_.emplace(hash, block).second) return;  // another block holds this prefix
  names_[block] = Name{hash, parent};
  std::memcpy(&block_tokens_[static_cast<size_t>(block) * block_size_], tokens,
              sizeof(int32_t) * block_size_);
}

void BlockManager::Unregister(int32_t block) {
  Name& name = names_[block];
  if (name.hash == kUnnamed) return;
  named_.erase(name.hash);
  name = Name();
}

void BlockManager::LinkCached(int32_t block) {
  prev_[block] = newest_;
  next_[block] = kNone;
  (newest_ == kNone ? oldest_ : next_[newest_]) = block;
  newest_ = block;
  ++num_cached_;
}

void BlockManager::UnlinkCached(int32_t block) {
  (prev_[block] == kNone ? oldest_ : next_[prev_[block]]) = next_[block];
  (next_[block] == kNone ? newest_ : prev_[next_[block]]) = prev_[block];
  prev_[block] = next_[block] = kNone;
  --num_cached_;
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
