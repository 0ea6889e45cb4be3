#pragma once
// Two runs side by side, as Holistic Trace Analysis's trace comparison does:
// a baseline and a run after a change (another plan, precision, library),
// their step, where the time went, and the kernels and collectives whose
// time changed most. Figures are per rank and per step where both runs
// record steps (else per rank over the run), so that runs of other world
// sizes or step counts compare.

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace_analysis.h"

namespace cs::trace {

struct ComparedFigure {
  std::string name;
  double a_ns = 0;  // the baseline's
  double b_ns = 0;  // the other run's
  std::int64_t a_count = 0, b_count = 0;  // instances, for kernels and collectives
  double change_ns() const { return b_ns - a_ns; }
};

struct RunComparison {
  bool per_step = false;        // figures per rank and step (else per rank over the run)
  int a_ranks = 0, b_ranks = 0;
  int a_steps = 0, b_steps = 0;  // steps per rank (the most any rank has)
  double a_step_ns = 0, b_step_ns = 0;  // median step over ranks (0: no steps)
  std::vector<ComparedFigure> parts;    // compute, exposed communication, exposed memory, other, idle, span
  // Compute kernels by the kind of operation their names say ("GEMM
  // compute", ...): a change of precision or library renames the kernels
  // (sm80_xmma_gemm_f32 becomes sm90_xmma_gemm_bf16), never their kind.
  std::vector<ComparedFigure> operation_kinds;  // by |change|, largest first
  std::vector<ComparedFigure> kernels;      // by |change|, largest first
  std::vector<ComparedFigure> collectives;  // "all_reduce fp32 1.30 MiB", by |change|
  // HTA's trace diff beyond the kernels: the CUDA API calls, the copies and
  // sets, and the annotation ranges, by name and |change|.
  std::vector<ComparedFigure> api_calls;
  std::vector<ComparedFigure> memory_ops;
  std::vector<ComparedFigure> annotations;
};

// a_step_ns and b_step_ns where they are shown, named by the steps they are
// the median of: each rank's median over all its steps, the warm-up's
// included (as the straggler test counts them), then the median over the
// ranks. A prediction's median step leaves the warm-up out (describe_steps).
inline constexpr const char* kComparedStepName = "step (median of all steps, warm-up included)";

RunComparison compare_runs(const RunAnalysis& a, const RunAnalysis& b);

// Two stores analysed and compared. Where both record steps, each is read
// from its first step's start to its last step's end (over all ranks): the
// time outside them (start-up, warm-up, a profiler's tail) would otherwise
// be spread over the steps as if each step held a share of it.
Result<RunComparison> compare_stores(const TraceReader& a, const TraceReader& b,
                                     AnalysisOptions options = {});

}  // namespace cs::trace
