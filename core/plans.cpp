#include "core/plans.h"

#include "core/enum_tables.h"

namespace cs {

std::string_view to_string(Recompute r) { return kRecomputeNames.name(r); }
std::string_view to_string(PipelineSchedule s) { return kScheduleNames.name(s); }
std::optional<Recompute> recompute_from_string(std::string_view text) {
  return kRecomputeNames.parse(text);
}
std::string_view to_string(LossScaling l) { return kLossScalingNames.name(l); }
std::string_view to_string(Fp8Format f) { return kFp8FormatNames.name(f); }
std::string_view to_string(Fp8Recipe r) { return kFp8RecipeNames.name(r); }

PrecisionPlan PrecisionPlan::for_compute(Precision compute) {
  PrecisionPlan plan;
  plan.compute = compute;
  switch (compute) {
    case Precision::fp32:
    case Precision::tf32:
      plan.weights = Precision::fp32;
      plan.master_weights = false;
      plan.gradients = Precision::fp32;
      break;
    case Precision::bf16:
      plan.weights = Precision::bf16;
      plan.gradients = Precision::bf16;
      break;
    case Precision::fp16:
      plan.weights = Precision::fp16;
      plan.gradients = Precision::fp16;
      plan.loss_scaling = LossScaling::dynamic;
      break;
    case Precision::fp8:
      // FP8 GEMMs read bf16 weights cast per step (Transformer Engine);
      // gradients are reduced in bf16.
      plan.weights = Precision::bf16;
      plan.gradients = Precision::bf16;
      break;
    case Precision::int8:
    case Precision::int4:
      plan.weights = compute;
      plan.master_weights = false;
      plan.inference = true;
      break;
  }
  return plan;
}

}  // namespace cs
