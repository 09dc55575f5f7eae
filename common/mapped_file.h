// Read-only memory mapping of a whole file.
//
// Ownership: MappedFile owns the mapping and unmaps it in its destructor; it is
// move-only. Views returned by bytes() live as long as the MappedFile.
// Threads: immutable after Open(); safe to read from any thread.
// Cost: Open() is one mmap(2); pages are read lazily by the kernel.
#ifndef LLM_COMMON_MAPPED_FILE_H_
#define LLM_COMMON_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace llm {

class MappedFile {
 public:
  // Maps `path` read-only. An empty file maps to an empty span.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  void Reset();

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole file into a string (for small text files such as sidecars).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace llm

#endif  // LLM_COMMON_MAPPED_FILE_H_
