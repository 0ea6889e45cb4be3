#pragma once
// The CPU engine's backend: GEMMs through OpenBLAS (bf16 operands widened to
// fp32, as bf16 has no BLAS path here), everything else in plain C++ with
// fp32 arithmetic over fp32 or bf16 storage. Ops run synchronously on the
// calling thread and are traced there when a tracer is set.

#include <atomic>
#include <memory>

#include "profiler/worker/backend.h"

namespace cs::worker {

std::unique_ptr<Backend> make_cpu_backend(int blas_threads);

// OpenBLAS called directly: the reference the benchmarks hold the backend to.
void reference_sgemm_nt(const float* a, const float* b, float* c, int m, int n, int k);

}  // namespace cs::worker
