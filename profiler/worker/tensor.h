#pragma once
// A tensor is a handle to memory owned by a backend (host memory for the CPU
// backend, device memory for CUDA): a pointer, an element count and a type.
// Shapes are carried by the model code that knows them; ops take sizes.

#include <cassert>
#include <cstdint>

#include "profiler/worker/dtype.h"

namespace cs::worker {

struct Tensor {
  void* data = nullptr;
  std::int64_t numel = 0;
  DType dtype = DType::f32;

  std::int64_t bytes() const { return numel * dtype_bytes(dtype); }
  bool empty() const { return numel == 0; }
  // The elements [offset, offset + count) as a tensor of their own.
  Tensor slice(std::int64_t offset, std::int64_t count) const {
    assert(offset >= 0 && offset + count <= numel);
    return {static_cast<char*>(data) + offset * dtype_bytes(dtype), count, dtype};
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace cs::worker
