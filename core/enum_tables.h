#pragma once
// The names of the domain model's enums, as JSON and the CLI spell them.

#include "core/enum_names.h"
#include "core/hardware.h"
#include "core/plans.h"
#include "core/precision.h"
#include "core/workload.h"

namespace cs {

template <class E>
using Named = std::pair<E, std::string_view>;

inline constexpr auto kPrecisionNames = enum_names<Precision>(
    Named<Precision>{Precision::fp32, "fp32"}, Named<Precision>{Precision::tf32, "tf32"}, Named<Precision>{Precision::bf16, "bf16"},
    Named<Precision>{Precision::fp16, "fp16"}, Named<Precision>{Precision::fp8, "fp8"}, Named<Precision>{Precision::int8, "int8"},
    Named<Precision>{Precision::int4, "int4"});

inline constexpr auto kLinkKindNames = enum_names<LinkKind>(
    Named<LinkKind>{LinkKind::nvlink, "nvlink"}, Named<LinkKind>{LinkKind::pcie, "pcie"},
    Named<LinkKind>{LinkKind::infiniband, "infiniband"}, Named<LinkKind>{LinkKind::roce, "roce"},
    Named<LinkKind>{LinkKind::ethernet, "ethernet"}, Named<LinkKind>{LinkKind::infinity_fabric, "infinity_fabric"},
    Named<LinkKind>{LinkKind::shared_memory, "shared_memory"});

inline constexpr auto kNormNames =
    enum_names<Norm>(Named<Norm>{Norm::layernorm, "layernorm"}, Named<Norm>{Norm::rmsnorm, "rmsnorm"});

inline constexpr auto kPositionNames = enum_names<PositionEmbedding>(
    Named<PositionEmbedding>{PositionEmbedding::learned, "learned"}, Named<PositionEmbedding>{PositionEmbedding::rotary, "rotary"});

inline constexpr auto kOptimizerNames =
    enum_names<Optimizer>(Named<Optimizer>{Optimizer::adamw, "adamw"}, Named<Optimizer>{Optimizer::adam, "adam"},
                          Named<Optimizer>{Optimizer::sgd, "sgd"}, Named<Optimizer>{Optimizer::sgd_momentum, "sgd_momentum"});

inline constexpr auto kWorkloadKindNames = enum_names<WorkloadKind>(
    Named<WorkloadKind>{WorkloadKind::transformer, "transformer"}, Named<WorkloadKind>{WorkloadKind::generic, "generic"});

inline constexpr auto kRecomputeNames = enum_names<Recompute>(
    Named<Recompute>{Recompute::none, "none"}, Named<Recompute>{Recompute::selective, "selective"}, Named<Recompute>{Recompute::full, "full"});

inline constexpr auto kScheduleNames = enum_names<PipelineSchedule>(
    Named<PipelineSchedule>{PipelineSchedule::one_f_one_b, "1f1b"}, Named<PipelineSchedule>{PipelineSchedule::interleaved, "interleaved"});

inline constexpr auto kLossScalingNames = enum_names<LossScaling>(
    Named<LossScaling>{LossScaling::none, "none"}, Named<LossScaling>{LossScaling::fixed, "static"},
    Named<LossScaling>{LossScaling::dynamic, "dynamic"});

inline constexpr auto kFp8FormatNames = enum_names<Fp8Format>(
    Named<Fp8Format>{Fp8Format::e4m3, "e4m3"}, Named<Fp8Format>{Fp8Format::hybrid, "hybrid"});

inline constexpr auto kFp8RecipeNames = enum_names<Fp8Recipe>(
    Named<Fp8Recipe>{Fp8Recipe::delayed, "delayed"}, Named<Fp8Recipe>{Fp8Recipe::current, "current"});

}  // namespace cs
