#pragma once
// Reads memory that a trace record points to without trusting the pointer:
// a bad address gives false, never a crash in the traced program. Used for
// NVTX payloads, whose lifetime CUPTI does not document.

#include <cstddef>
#include <cstdint>

namespace cs::profiler {

class SafeMemoryReader {
 public:
  SafeMemoryReader() = default;
  SafeMemoryReader(const SafeMemoryReader&) = delete;
  SafeMemoryReader& operator=(const SafeMemoryReader&) = delete;
  ~SafeMemoryReader();

  // Copies `size` bytes from `address` of this process into `out`.
  bool read(std::uint64_t address, void* out, std::size_t size);

 private:
  bool read_through_pipe(std::uint64_t address, void* out, std::size_t size);
  void drain(std::size_t size);

  bool use_vm_read_ = true;
  int pipe_[2] = {-1, -1};
};

}  // namespace cs::profiler
