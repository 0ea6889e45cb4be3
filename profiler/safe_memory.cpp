#include "profiler/safe_memory.h"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

namespace cs::profiler {

SafeMemoryReader::~SafeMemoryReader() {
  if (pipe_[0] >= 0) close(pipe_[0]);
  if (pipe_[1] >= 0) close(pipe_[1]);
}

bool SafeMemoryReader::read(std::uint64_t address, void* out, std::size_t size) {
  if (address == 0 || size == 0) return false;
  if (use_vm_read_) {
    // process_vm_readv on this process fails with EFAULT on a bad address.
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    const ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got == static_cast<ssize_t>(size)) return true;
    if (got < 0 && errno == EFAULT) return false;
    if (got >= 0) return false;  // part of the range is unmapped
    use_vm_read_ = false;        // not allowed here (a seccomp filter): use a pipe
  }
  return read_through_pipe(address, out, size);
}

// write() from a bad address fails with EFAULT instead of faulting.
bool SafeMemoryReader::read_through_pipe(std::uint64_t address, void* out, std::size_t size) {
  if (size > 4096) return false;  // a pipe takes at least this much at once
  if (pipe_[0] < 0 && pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  const ssize_t wrote = write(pipe_[1], reinterpret_cast<const void*>(address), size);
  if (wrote != static_cast<ssize_t>(size)) {
    if (wrote > 0) drain(static_cast<std::size_t>(wrote));
    return false;
  }
  return ::read(pipe_[0], out, size) == static_cast<ssize_t>(size);
}

void SafeMemoryReader::drain(std::size_t size) {
  char sink[256];
  while (size > 0) {
    const ssize_t got = ::read(pipe_[0], sink, std::min(size, sizeof sink));
    if (got <= 0) return;
    size -= static_cast<std::size_t>(got);
  }
}

}  // namespace cs::profiler
