#include "core/workload.h"

#include "core/enum_tables.h"

namespace cs {

std::string_view to_string(Norm n) { return kNormNames.name(n); }
std::string_view to_string(PositionEmbedding p) { return kPositionNames.name(p); }
std::string_view to_string(Optimizer o) {
  return kOptimizerNames.name(o);
}

int optimizer_state_words(Optimizer o) {
  switch (o) {
    case Optimizer::adamw:
    case Optimizer::adam: return 2;
    case Optimizer::sgd_momentum: return 1;
    case Optimizer::sgd: return 0;
  }
  return 2;
}

ParameterCount parameter_count(const TransformerShape& s) {
  const double h = s.hidden;
  const double kv_width = static_cast<double>(s.kv_heads) * s.head_dim();
  const double norm_params = (s.norm == Norm::layernorm) ? 2 * h : h;  // gain (+ bias)

  // Attention: Q and output projections h x h, K and V h x kv_width each.
  double attention = 2 * h * h + 2 * h * kv_width;
  if (s.bias) attention += h + 2 * kv_width + h;
  // MLP: up (and gate) h x ffn, down ffn x h.
  const double up_matrices = s.gated_mlp ? 2 : 1;
  double mlp = (up_matrices + 1) * h * s.ffn_hidden;
  if (s.bias) mlp += up_matrices * s.ffn_hidden + h;

  ParameterCount c;
  c.per_layer = attention + mlp + 2 * norm_params;
  c.embedding = static_cast<double>(s.vocab) * h;
  if (s.positions == PositionEmbedding::learned) c.embedding += static_cast<double>(s.seq_len) * h;
  c.final_norm = norm_params;
  c.lm_head = s.tied_embeddings ? 0 : static_cast<double>(s.vocab) * h;
  c.total = c.embedding + s.layers * c.per_layer + c.final_norm + c.lm_head;
  return c;
}

double parameter_count(const Workload& w) {
  if (w.kind == WorkloadKind::generic) return w.generic.parameters;
  return parameter_count(w.transformer).total;
}

double training_samples(const Workload& w) {
  if (w.kind == WorkloadKind::generic) return w.dataset_samples * w.epochs;
  if (w.transformer.seq_len <= 0) return 0;
  return w.training_tokens / w.transformer.seq_len;
}

}  // namespace cs
