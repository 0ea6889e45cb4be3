#include "profiler/worker_shape.h"

#include <algorithm>

namespace cs {

Result<WorkerShape> worker_shape_for(const Workload& w, int tp, int pp, int chunks,
                                     const ShapeLimits& limits) {
  if (w.kind != WorkloadKind::transformer) {
    return Error{"the worker trains GPT-style transformers; \"" + w.name +
                 "\" is a generic model, which the planner estimates but the engines do not run"};
  }
  // Past these the reshaped model fits no rank: each tensor-parallel rank
  // gets at least one head, each stage a layer (tp = 10^6 grew the hidden
  // size to 1.6e7, and the app ran out of memory laying out its weights).
  constexpr int kMaxGrownHidden = 8192;
  constexpr int kMaxGrownLayers = 1024;
  if (tp < 1 || pp < 1 || chunks < 1) return Error{"tp, pp and virtual stages must be >= 1"};
  const TransformerShape& s = w.transformer;
  if (s.heads < 1 || s.hidden < 1) return Error{"the model has no heads or no hidden size"};
  // Heads of the model's width (at most 64), at least the minimum.
  const int head_dim = std::max(limits.min_head_dim, std::min(s.hidden / s.heads, 64));
  if (static_cast<long long>(tp) * head_dim > kMaxGrownHidden) {
    return Error{"tp = " + std::to_string(tp) +
                 ": the engines give each tensor-parallel rank a head (" +
                 std::to_string(head_dim) +
                 " wide for this model), so the model would grow "
                 "past a hidden size of " +
                 std::to_string(kMaxGrownHidden) + "; they run tp up to " +
                 std::to_string(kMaxGrownHidden / head_dim)};
  }
  if (static_cast<long long>(pp) * chunks > kMaxGrownLayers) {
    return Error{
        (chunks > 1 ? "pp x virtual stages = " + std::to_string(static_cast<long long>(pp) * chunks)
                    : "pp = " + std::to_string(pp)) +
        ": the engines run at most " + std::to_string(kMaxGrownLayers) +
        " pipeline stages (a layer each)"};
  }
  worker::GptConfig c;
  c.vocab = 256;  // byte-level tokens of the built-in corpus

  // Layers: at most the limit, a multiple of pp (times its chunks).
  const int stages = pp * chunks;
  c.layers = std::min(s.layers, std::max(limits.max_layers, stages));
  c.layers = std::max(stages, c.layers / stages * stages);

  // As many heads as the hidden limit holds, a multiple of tp.
  int heads = std::min(s.heads, std::max(1, limits.max_hidden / head_dim));
  heads = std::max(tp, heads / tp * tp);
  c.heads = heads;
  c.hidden = heads * head_dim;
  c.ffn = static_cast<int>(static_cast<long long>(s.ffn_hidden) * c.hidden / s.hidden);
  c.ffn = std::max(tp, c.ffn / tp * tp);
  c.seq = std::min(s.seq_len, limits.max_seq);

  if (s.heads % tp != 0 && c.heads % tp != 0) {
    return Error{"tp = " + std::to_string(tp) + " does not divide the heads"};
  }
  WorkerShape out;
  out.config = c;
  auto note = [&](const char* what, long from, long to) {
    if (from == to) return;
    if (!out.scaled.empty()) out.scaled += ", ";
    out.scaled += std::string(what) + " " + std::to_string(from) + " -> " + std::to_string(to);
  };
  note("layers", s.layers, c.layers);
  note("hidden", s.hidden, c.hidden);
  note("heads", s.heads, c.heads);
  note("ffn", s.ffn_hidden, c.ffn);
  note("sequence", s.seq_len, c.seq);
  note("vocabulary", s.vocab, c.vocab);
  if (s.gated_mlp) out.scaled += std::string(out.scaled.empty() ? "" : ", ") + "gated MLP -> GELU MLP";
  if (s.kv_heads != s.heads) {
    out.scaled += std::string(out.scaled.empty() ? "" : ", ") + "grouped-query -> multi-head attention";
  }
  return out;
}

}  // namespace cs
