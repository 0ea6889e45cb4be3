#include "profiler/worker/gpt_model.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "core/plans.h"
#include "profiler/worker/op_tracer.h"

namespace cs::worker {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t hash_name(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A standard normal number that depends only on (key, index): the same
// element of a full matrix gets the same value on every rank and split.
float normal_at(std::uint64_t key, std::int64_t index) {
  const std::uint64_t a = splitmix64(key ^ splitmix64(2 * static_cast<std::uint64_t>(index)));
  const std::uint64_t b = splitmix64(key ^ splitmix64(2 * static_cast<std::uint64_t>(index) + 1));
  const double u1 = (static_cast<double>(a >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2));
}

std::vector<std::int64_t> range(std::int64_t begin, std::int64_t count) {
  std::vector<std::int64_t> v(count);
  for (std::int64_t i = 0; i < count; ++i) v[i] = begin + i;
  return v;
}

}  // namespace

std::vector<ParamInfo> gpt_parameter_layout(const GptConfig& c, const ModelParallel& parallel) {
  std::vector<ParamInfo> params;
  std::int64_t offset = 0;
  auto add = [&](const std::string& name, std::int64_t full_rows, std::int64_t full_cols,
                 std::vector<std::int64_t> rows, std::int64_t col_begin, std::int64_t cols,
                 float std, float value, bool replicated) {
    ParamInfo p;
    p.name = name;
    p.full_rows = full_rows;
    p.full_cols = full_cols;
    p.rows = std::move(rows);
    p.col_begin = col_begin;
    p.cols = cols;
    p.offset = offset;
    p.init_std = std;
    p.init_value = value;
    p.replicated_over_tp = replicated;
    offset += p.numel();
    params.push_back(std::move(p));
  };
  const int per_stage = c.layers / parallel.pp;
  const int first = parallel.pp_rank * per_stage;
  const std::int64_t C = c.hidden;
  const std::int64_t Cl = C / c.heads * (c.heads / parallel.tp);
  const std::int64_t Fl = c.ffn / parallel.tp;
  const std::int64_t tr = parallel.tp_rank;
  const float residual_std = 0.02f / std::sqrt(2.0f * c.layers);

  if (parallel.pp_rank == 0) {
    add("wte", c.vocab, C, range(0, c.vocab), 0, C, 0.02f, 0, true);
    add("wpe", c.seq, C, range(0, c.seq), 0, C, 0.02f, 0, true);
  }
  // Rows of the QKV projection this rank holds: its heads' rows of q, k and v.
  std::vector<std::int64_t> qkv_rows;
  for (int part = 0; part < 3; ++part) {
    for (std::int64_t r = 0; r < Cl; ++r) qkv_rows.push_back(part * C + tr * Cl + r);
  }
  for (int l = first; l < first + per_stage; ++l) {
    const std::string p = "h" + std::to_string(l) + ".";
    add(p + "ln1.weight", C, 1, range(0, C), 0, 1, 0.0f, 1.0f, true);
    add(p + "ln1.bias", C, 1, range(0, C), 0, 1, 0.0f, 0.0f, true);
    add(p + "attn.qkv.weight", 3 * C, C, qkv_rows, 0, C, 0.02f, 0.0f, false);
    add(p + "attn.qkv.bias", 3 * C, 1, qkv_rows, 0, 1, 0.0f, 0.0f, false);
    add(p + "attn.proj.weight", C, C, range(0, C), tr * Cl, Cl, residual_std, 0.0f, false);
    add(p + "attn.proj.bias", C, 1, range(0, C), 0, 1, 0.0f, 0.0f, true);
    add(p + "ln2.weight", C, 1, range(0, C), 0, 1, 0.0f, 1.0f, true);
    add(p + "ln2.bias", C, 1, range(0, C), 0, 1, 0.0f, 0.0f, true);
    add(p + "mlp.fc.weight", c.ffn, C, range(tr * Fl, Fl), 0, C, 0.02f, 0.0f, false);
    add(p + "mlp.fc.bias", c.ffn, 1, range(tr * Fl, Fl), 0, 1, 0.0f, 0.0f, false);
    add(p + "mlp.proj.weight", C, c.ffn, range(0, C), tr * Fl, Fl, residual_std, 0.0f, false);
    add(p + "mlp.proj.bias", C, 1, range(0, C), 0, 1, 0.0f, 0.0f, true);
  }
  if (parallel.pp_rank == parallel.pp - 1) {
    add("lnf.weight", C, 1, range(0, C), 0, 1, 0.0f, 1.0f, true);
    add("lnf.bias", C, 1, range(0, C), 0, 1, 0.0f, 0.0f, true);
    add("lm_head.weight", c.vocab, C, range(0, c.vocab), 0, C, 0.02f, 0.0f, true);
  }
  return params;
}

// Activations of one micro-batch in flight on this stage.
struct ActivationStack {
  std::vector<Tensor> residual;  // nl + 1: input of each layer, then the stage output
  // Each layer's (none with full recomputation; selective keeps no scores).
  std::vector<GptModel::LayerActivations> layers;
  Tensor projection;  // scratch: attention and MLP projections before the residual add

  std::int64_t bytes() {
    std::int64_t total = projection.bytes();
    for (const Tensor& t : residual)
      total += t.bytes();
    for (GptModel::LayerActivations& a : layers)
      a.for_each([&](const Tensor& t) { total += t.bytes(); });
    return total;
  }
  void release(Backend& backend) {
    for (Tensor& t : residual)
      backend.release(t);
    for (GptModel::LayerActivations& a : layers)
      a.for_each([&](Tensor& t) { backend.release(t); });
    backend.release(projection);
  }
};

ActivationPool::~ActivationPool() {
  for (ActivationStack* stack : all_) {
    stack->release(backend_);
    delete stack;
  }
}

struct GptModel::Slot {
  ActivationStack* stack = nullptr;  // its own, or claimed from the pool
  Tensor tokens;      // first stage: kept for the embedding's backward
  Tensor lnf, lnf_mean, lnf_rstd, logits, losses;  // last stage
};

GptModel::GptModel(Backend& backend, const GptConfig& config, const ModelParallel& parallel,
                   DType compute, int micro_batch, int slots, Communicator* tp_comm,
                   Recompute recompute,
                   std::function<void(std::string_view, std::int64_t)> annotate,
                   ActivationPool* pool)
    : backend_(backend),
      config_(config),
      parallel_(parallel),
      compute_(compute),
      B_(micro_batch),
      slot_count_(slots),
      tp_comm_(tp_comm),
      recompute_(recompute),
      annotate_(std::move(annotate)),
      pool_(pool) {
  const GptConfig& c = config_;
  const auto n = [](int v) { return std::to_string(v); };
  if (c.hidden % c.heads != 0) {
    throw std::invalid_argument("the hidden size " + n(c.hidden) + " must be divisible by the " +
                                n(c.heads) + " heads");
  }
  if (c.heads % parallel.tp != 0 || c.ffn % parallel.tp != 0) {
    throw std::invalid_argument("tensor parallelism (tp " + n(parallel.tp) + ") must divide the " +
                                n(c.heads) + " heads and the MLP width " + n(c.ffn));
  }
  if (c.layers % parallel.pp != 0) {
    throw std::invalid_argument("pipeline parallelism (pp " + n(parallel.pp) +
                                ") must divide the " + n(c.layers) + " layers");
  }
  const int per_stage = c.layers / parallel.pp;
  first_layer_ = parallel.pp_rank * per_stage;
  last_layer_ = first_layer_ + per_stage;
  local_heads_ = c.heads / parallel.tp;
  local_ffn_ = c.ffn / parallel.tp;
  sp_ = parallel.sequence_parallel && parallel.tp > 1;
  const int tokens = micro_batch * c.seq;
  if (sp_ && tokens % parallel.tp != 0) {
    throw std::invalid_argument("sequence parallelism splits a micro-batch's " + n(tokens) +
                                " tokens over tp " + n(parallel.tp) +
                                ": they must be a multiple of it");
  }
  rows_ = sp_ ? tokens / parallel.tp : tokens;
  params_ = gpt_parameter_layout(c, parallel);
  for (const ParamInfo& p : params_) num_params_ += p.numel();

  auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].name == name) return static_cast<int>(i);
    }
    throw std::logic_error("no parameter " + name);
  };
  if (first_stage()) {
    wte_ = index("wte");
    wpe_ = index("wpe");
  }
  for (int l = first_layer_; l < last_layer_; ++l) {
    const std::string p = "h" + std::to_string(l) + ".";
    layer_params_.push_back({index(p + "ln1.weight"), index(p + "ln1.bias"),
                             index(p + "attn.qkv.weight"), index(p + "attn.qkv.bias"),
                             index(p + "attn.proj.weight"), index(p + "attn.proj.bias"),
                             index(p + "ln2.weight"), index(p + "ln2.bias"),
                             index(p + "mlp.fc.weight"), index(p + "mlp.fc.bias"),
                             index(p + "mlp.proj.weight"), index(p + "mlp.proj.bias")});
  }
  if (last_stage()) {
    lnf_w_ = index("lnf.weight");
    lnf_b_ = index("lnf.bias");
    lm_head_ = index("lm_head.weight");
  }
  groups_ = gpt_parameter_groups(params_);
  alloc_activations();
}

GptModel::~GptModel() {
  const auto release = [&](Tensor& t) { backend_.release(t); };
  for (Slot* s : slots_) {
    if (s->stack && !pool_) {
      s->stack->release(backend_);
      delete s->stack;
    }
    if (s->stack && pool_) pool_->free_.push_back(s->stack);
    for (Tensor* t : {&s->tokens, &s->lnf, &s->lnf_mean, &s->lnf_rstd, &s->logits, &s->losses}) {
      backend_.release(*t);
    }
    delete s;
  }
  for (Tensor* t :
       {&d_residual_, &d_ln_, &d_qkv_, &d_atty_, &d_fch_, &d_fch_gelu_, &d_output_, &tokens_,
        &targets_, &gathered_, &proj_full_, &d_full_, &d_ln_rows_, &lnf_rows_, &norm_grads_}) {
    backend_.release(*t);
  }
  recomputed_.for_each(release);
}

std::int64_t GptModel::activation_bytes() const {
  std::int64_t bytes = tokens_.bytes() + targets_.bytes();
  for (Slot* s : slots_) {
    if (s->stack && !pool_) bytes += s->stack->bytes();
    for (const Tensor* t :
         {&s->tokens, &s->lnf, &s->lnf_mean, &s->lnf_rstd, &s->logits, &s->losses}) {
      bytes += t->bytes();
    }
  }
  return bytes;
}

Tensor GptModel::weight(int index) const {
  const ParamInfo& p = params_[index];
  return weights_view_.slice(p.offset - weights_base_, p.numel());
}

Tensor GptModel::grad(int index) const {
  const ParamInfo& p = params_[index];
  return grads_view_.slice(p.offset - grads_base_, p.numel());
}

void GptModel::open_group(std::size_t index, bool backward) {
  const ParameterGroup& g = groups_[index];
  if (weight_window_) {
    weights_view_ = weight_window_(g.begin, g.end, backward);
    weights_base_ = g.begin;
  }
  if (!backward) return;
  if (window_) {
    grads_view_ = window_(g.begin, g.end);
    grads_base_ = g.begin;
  } else {
    grads_view_ = grads_;
    grads_base_ = 0;
  }
}

std::vector<ParameterGroup> gpt_parameter_groups(const std::vector<ParamInfo>& layout) {
  // A group begins with the layout, with each layer's first parameter and
  // with the final norm; each ends where the next begins.
  auto ends_with = [](const std::string& s, std::string_view tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  std::vector<ParameterGroup> groups;
  for (const ParamInfo& p : layout) {
    if (groups.empty() || ends_with(p.name, ".ln1.weight") || p.name == "lnf.weight") {
      if (!groups.empty()) groups.back().end = p.offset;
      groups.push_back({p.offset, p.offset});
    }
    groups.back().end = p.offset + p.numel();
  }
  return groups;
}

GptModel::LayerActivations GptModel::allocate_layer(bool with_scores) {
  const GptConfig& c = config_;
  const std::int64_t N = static_cast<std::int64_t>(B_) * c.seq;
  const std::int64_t C = c.hidden;
  const std::int64_t Cl = C / c.heads * local_heads_;
  const std::int64_t Fl = local_ffn_;
  auto act = [&](std::int64_t n, const char* what) { return backend_.alloc(n, compute_, what); };
  auto f32 = [&](std::int64_t n, const char* what) { return backend_.alloc(n, DType::f32, what); };
  const std::int64_t R = rows_;  // the norms' rows
  LayerActivations a;
  a.ln1 = act(R * C, "ln1");
  a.ln1_mean = f32(R, "ln1.mean");
  a.ln1_rstd = f32(R, "ln1.rstd");
  a.qkv = act(N * 3 * Cl, "qkv");
  if (with_scores) a.att = act(static_cast<std::int64_t>(B_) * local_heads_ * c.seq * c.seq, "att");
  a.atty = act(N * Cl, "attn.out");
  a.residual2 = act(R * C, "residual2");
  a.ln2 = act(R * C, "ln2");
  a.ln2_mean = f32(R, "ln2.mean");
  a.ln2_rstd = f32(R, "ln2.rstd");
  a.fch = act(N * Fl, "mlp.fc");
  a.fch_gelu = act(N * Fl, "mlp.gelu");
  return a;
}

void GptModel::alloc_activations() {
  const GptConfig& c = config_;
  const std::int64_t N = static_cast<std::int64_t>(B_) * c.seq;
  const std::int64_t C = c.hidden;
  const std::int64_t Cl = C / c.heads * local_heads_;
  const std::int64_t Fl = local_ffn_;
  auto act = [&](std::int64_t n, const char* what) { return backend_.alloc(n, compute_, what); };
  auto f32 = [&](std::int64_t n, const char* what) { return backend_.alloc(n, DType::f32, what); };
  const std::int64_t R = rows_;  // the norms' rows
  for (int s = 0; s < slot_count_; ++s) {
    auto* slot = new Slot;
    if (!pool_) slot->stack = make_stack();
    if (first_stage()) slot->tokens = backend_.alloc(N, DType::i32, "tokens");
    if (last_stage()) {
      slot->lnf = act(N * C, "lnf");
      slot->lnf_mean = f32(R, "lnf.mean");
      slot->lnf_rstd = f32(R, "lnf.rstd");
      slot->logits = act(N * c.vocab, "logits");
      slot->losses = f32(N, "losses");
    }
    slots_.push_back(slot);
  }
  d_residual_ = act(R * C, "grad.residual");
  d_ln_ = act(N * C, "grad.ln");
  d_qkv_ = act(N * 3 * Cl, "grad.qkv");
  d_atty_ = act(N * Cl, "grad.attn.out");
  d_fch_ = act(N * Fl, "grad.mlp.fc");
  d_fch_gelu_ = act(N * Fl, "grad.mlp.gelu");
  d_output_ = act(R * C, "grad.stage.output");
  if (sp_) {
    gathered_ = act(N * C, "sp.gathered");
    proj_full_ = act(N * C, "sp.projection");
    d_full_ = act(N * C, "sp.grad.residual");
    d_ln_rows_ = act(R * C, "sp.grad.ln");
    if (last_stage()) lnf_rows_ = act(R * C, "sp.lnf");
    norm_grads_ = f32(2 * C, "sp.norm.grads");
  }
  if (last_stage()) targets_ = backend_.alloc(N, DType::i32, "targets");
  if (recompute_ == Recompute::full) {
    // One layer's activations, rebuilt from the layer's input before its
    // backward (not its output: backward does not read it).
    recomputed_ = allocate_layer(true);
  } else if (recompute_ == Recompute::selective) {
    recomputed_.att = act(static_cast<std::int64_t>(B_) * local_heads_ * c.seq * c.seq, "att");
    recomputed_.atty = act(N * Cl, "attn.out");  // written again, not read
  }
}

ActivationStack* GptModel::make_stack() {
  const std::int64_t C = config_.hidden;
  const std::int64_t R = rows_;  // the norms' rows
  const int nl = last_layer_ - first_layer_;
  auto* stack = new ActivationStack;
  for (int l = 0; l <= nl; ++l)
    stack->residual.push_back(backend_.alloc(R * C, compute_, "residual"));
  if (recompute_ != Recompute::full) {
    for (int l = 0; l < nl; ++l)
      stack->layers.push_back(allocate_layer(recompute_ == Recompute::none));
  }
  stack->projection = backend_.alloc(R * C, compute_, "projection");
  return stack;
}

ActivationStack& GptModel::stack_of(int slot) const {
  ActivationStack* stack = slots_.at(static_cast<std::size_t>(slot))->stack;
  if (!stack) throw std::logic_error("activation slot " + std::to_string(slot) + " not claimed");
  return *stack;
}

void GptModel::claim(int slot) {
  Slot& s = *slots_[static_cast<std::size_t>(slot)];
  if (!pool_ || s.stack) return;
  if (pool_->free_.empty()) {
    // As many layers, as wide, in every chunk of the rank: any stack fits.
    s.stack = make_stack();
    pool_->all_.push_back(s.stack);
    pool_->bytes_ += s.stack->bytes();
  } else {
    s.stack = pool_->free_.back();
    pool_->free_.pop_back();
  }
}

void GptModel::release(int slot) {
  Slot& s = *slots_[static_cast<std::size_t>(slot)];
  if (!pool_ || !s.stack) return;
  pool_->free_.push_back(s.stack);
  s.stack = nullptr;
}

GptModel::LayerActivations GptModel::layer(Slot& slot, int li) const {
  if (recompute_ == Recompute::full) return recomputed_;
  LayerActivations a = slot.stack->layers[li];
  if (recompute_ == Recompute::selective) a.att = recomputed_.att;
  return a;
}

Tensor GptModel::stage_input(int slot) const {
  return stack_of(slot).residual.front();
}
Tensor GptModel::stage_output(int slot) const {
  return stack_of(slot).residual.back();
}

double GptModel::forward_flops() const {
  const GptConfig& c = config_;
  const double N = static_cast<double>(B_) * c.seq;
  const double C = c.hidden;
  const double Cl = C / c.heads * local_heads_;
  const double Fl = local_ffn_;
  const double per_layer = 2 * N * (C * 3 * Cl + Cl * C + C * Fl + Fl * C) +
                           4.0 * B_ * static_cast<double>(c.seq) * c.seq * Cl;
  double total = per_layer * (last_layer_ - first_layer_);
  if (last_stage()) total += 2 * N * C * c.vocab;
  return total;
}

void GptModel::initialize(std::uint64_t seed, Tensor master) {
  std::vector<float> host(static_cast<std::size_t>(master.numel), 0.0f);
  for (const ParamInfo& p : params_) {
    const std::uint64_t key = splitmix64(seed ^ hash_name(p.name));
    float* out = host.data() + p.offset;
    for (std::size_t i = 0; i < p.rows.size(); ++i) {
      for (std::int64_t j = 0; j < p.cols; ++j) {
        const std::int64_t full = p.rows[i] * p.full_cols + p.col_begin + j;
        out[i * p.cols + j] = p.init_std > 0 ? p.init_std * normal_at(key, full) : p.init_value;
      }
    }
  }
  backend_.upload(master, host.data());
}

Tensor GptModel::all_rows(Tensor rows, Tensor into) {
  if (!sp_) return rows;
  tp_comm_->all_gather(rows, into);
  return into;
}

void GptModel::norm_backward(Tensor dinp, int weight_index, int bias_index, Tensor dout, Tensor inp,
                             Tensor mean, Tensor rstd) {
  const int C = config_.hidden;
  if (!sp_) {
    backend_.layernorm_backward(dinp, grad(weight_index), grad(bias_index), dout, inp,
                                weight(weight_index), mean, rstd, rows_, C);
    return;
  }
  // This rank's rows' share, summed over the group, then added (the
  // gradients accumulate over micro-batches: the sum must not see them).
  backend_.zero(norm_grads_);
  const Tensor dweight = norm_grads_.slice(0, C), dbias = norm_grads_.slice(C, C);
  backend_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight(weight_index), mean, rstd,
                              rows_, C);
  tp_comm_->all_reduce(norm_grads_);
  backend_.accumulate(grad(weight_index), dweight);
  backend_.accumulate(grad(bias_index), dbias);
}

void GptModel::layer_forward(int li, const LayerActivations& a, Tensor input, Tensor output,
                             Tensor projection) {
  const LayerParams& L = layer_params_[li];
  const GptConfig& c = config_;
  const int N = B_ * c.seq;
  const int R = rows_;
  const int C = c.hidden;
  const int Cl = C / c.heads * local_heads_;
  const int Fl = local_ffn_;
  const bool tp = tp_comm_ && tp_comm_->size() > 1;
  const bool adds_bias = parallel_.tp_rank == 0;  // row-parallel biases are added once
  // A row-parallel GEMM's partial sums: all-reduced, or under sequence
  // parallelism reduce-scattered to this rank's rows.
  const Tensor partial = sp_ ? proj_full_ : projection;
  auto reduce_partial = [&] {
    if (sp_) {
      tp_comm_->reduce_scatter(proj_full_, projection);
    } else if (tp) {
      tp_comm_->all_reduce(projection);
    }
  };
  backend_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, input, weight(L.ln1_w), weight(L.ln1_b),
                             R, C);
  backend_.matmul_forward(a.qkv, all_rows(a.ln1, gathered_), weight(L.qkv_w), weight(L.qkv_b), N, C,
                          3 * Cl, "attn.qkv");
  backend_.attention_forward(a.atty, a.att, a.qkv, B_, c.seq, Cl, local_heads_);
  backend_.matmul_forward(partial, a.atty, weight(L.proj_w),
                          adds_bias ? weight(L.proj_b) : Tensor{}, N, Cl, C, "attn.proj");
  reduce_partial();
  backend_.residual_forward(a.residual2, input, projection, static_cast<std::int64_t>(R) * C);
  backend_.layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, weight(L.ln2_w),
                             weight(L.ln2_b), R, C);
  backend_.matmul_forward(a.fch, all_rows(a.ln2, gathered_), weight(L.fc_w), weight(L.fc_b), N, C,
                          Fl, "mlp.fc");
  backend_.gelu_forward(a.fch_gelu, a.fch, static_cast<std::int64_t>(N) * Fl);
  backend_.matmul_forward(partial, a.fch_gelu, weight(L.fcproj_w),
                          adds_bias ? weight(L.fcproj_b) : Tensor{}, N, Fl, C, "mlp.proj");
  reduce_partial();
  if (!output.empty()) {
    backend_.residual_forward(output, a.residual2, projection, static_cast<std::int64_t>(R) * C);
  }
}

double GptModel::forward(int slot_index, const std::int32_t* tokens, const std::int32_t* targets) {
  stack_of(slot_index);  // claimed
  Slot& s = *slots_[slot_index];
  const GptConfig& c = config_;
  const int N = B_ * c.seq;
  const int C = c.hidden;

  std::size_t group = 0;
  if (first_stage()) {
    open_group(group++, false);
    backend_.upload(s.tokens, tokens);
    if (sp_) {
      // Every token embedded, this rank's rows kept.
      backend_.embedding_forward(proj_full_, s.tokens, weight(wte_), weight(wpe_), B_, c.seq, C);
      const std::int64_t rows = static_cast<std::int64_t>(rows_) * C;
      backend_.convert(s.stack->residual[0], proj_full_.slice(parallel_.tp_rank * rows, rows));
    } else {
      backend_.embedding_forward(s.stack->residual[0], s.tokens, weight(wte_), weight(wpe_), B_,
                                 c.seq, C);
    }
  }
  for (std::size_t li = 0; li < layer_params_.size(); ++li) {
    open_group(group++, false);
    layer_forward(static_cast<int>(li), layer(s, static_cast<int>(li)), s.stack->residual[li],
                  s.stack->residual[li + 1], s.stack->projection);
  }
  if (!last_stage()) return 0;

  open_group(group, false);
  // The LM head, whole on every tensor-parallel rank, reads every row.
  backend_.layernorm_forward(sp_ ? lnf_rows_ : s.lnf, s.lnf_mean, s.lnf_rstd,
                             s.stack->residual.back(), weight(lnf_w_), weight(lnf_b_), rows_, C);
  if (sp_) tp_comm_->all_gather(lnf_rows_, s.lnf);
  backend_.matmul_forward(s.logits, s.lnf, weight(lm_head_), Tensor{}, N, C, c.vocab, "lm_head");
  backend_.upload(targets_, targets);
  // The logits become (softmax - onehot); backward scales them.
  backend_.crossentropy_forward_backward(s.losses, s.logits, targets_, N, c.vocab, 1.0f);
  return backend_.sum(s.losses) / N;
}

void GptModel::backward(int slot_index, float dloss,
                        const std::function<void(std::int64_t)>& on_grads_ready) {
  stack_of(slot_index);  // claimed
  Slot& s = *slots_[slot_index];
  const GptConfig& c = config_;
  const int N = B_ * c.seq;
  const int C = c.hidden;
  const int Cl = C / c.heads * local_heads_;
  const int Fl = local_ffn_;
  const bool tp = tp_comm_ && tp_comm_->size() > 1;
  // A column-parallel GEMM's input gradient (partial sums in d_ln_) for
  // the layer norm before it: all-reduced, or under sequence parallelism
  // reduce-scattered to this rank's rows.
  auto reduce_input_grad = [&] {
    if (sp_) {
      tp_comm_->reduce_scatter(d_ln_, d_ln_rows_);
      return d_ln_rows_;
    }
    if (tp) tp_comm_->all_reduce(d_ln_);
    return d_ln_;
  };
  // The groups from the last to the first.
  std::size_t group = groups_.size();
  if (last_stage()) {
    open_group(--group, true);
    backend_.scale(s.logits, dloss / N);  // d(mean loss)/d(logits)
    backend_.matmul_backward(d_ln_, grad(lm_head_), Tensor{}, s.logits, s.lnf, weight(lm_head_), N,
                             C, c.vocab, "lm_head");
    backend_.zero(d_residual_);
    // Every rank computed the head's whole input gradient: its rows' part.
    const std::int64_t rows = static_cast<std::int64_t>(rows_) * C;
    const Tensor d_lnf = sp_ ? d_ln_.slice(parallel_.tp_rank * rows, rows) : d_ln_;
    norm_backward(d_residual_, lnf_w_, lnf_b_, d_lnf, s.stack->residual.back(), s.lnf_mean,
                  s.lnf_rstd);
    if (on_grads_ready) on_grads_ready(params_[lnf_w_].offset);
  } else {
    backend_.convert(d_residual_, d_output_);
  }

  for (int li = static_cast<int>(layer_params_.size()) - 1; li >= 0; --li) {
    const LayerParams& L = layer_params_[li];
    const LayerActivations a = layer(s, li);
    open_group(--group, true);
    if (recompute_ == Recompute::full) {
      const std::int64_t start = annotate_ ? OpTracer::now_ns() : 0;
      layer_forward(li, a, s.stack->residual[li], Tensor{}, s.stack->projection);
      if (annotate_) annotate_("recompute", start);
    }
    // MLP: the gradient reaching its output is the residual stream's.
    backend_.matmul_backward(d_fch_gelu_, grad(L.fcproj_w), grad(L.fcproj_b),
                             all_rows(d_residual_, d_full_), a.fch_gelu, weight(L.fcproj_w), N, Fl,
                             C, "mlp.proj");
    backend_.gelu_backward(d_fch_, a.fch, d_fch_gelu_, static_cast<std::int64_t>(N) * Fl);
    backend_.matmul_backward(d_ln_, grad(L.fc_w), grad(L.fc_b), d_fch_, all_rows(a.ln2, gathered_),
                             weight(L.fc_w), N, C, Fl, "mlp.fc");
    norm_backward(d_residual_, L.ln2_w, L.ln2_b, reduce_input_grad(), a.residual2, a.ln2_mean,
                  a.ln2_rstd);
    // Attention.
    backend_.matmul_backward(d_atty_, grad(L.proj_w), grad(L.proj_b),
                             all_rows(d_residual_, d_full_), a.atty, weight(L.proj_w), N, Cl, C,
                             "attn.proj");
    if (recompute_ == Recompute::selective) {
      // The scores again (its output, already read above, goes to a buffer of its own).
      const std::int64_t start = annotate_ ? OpTracer::now_ns() : 0;
      backend_.attention_forward(recomputed_.atty, a.att, a.qkv, B_, c.seq, Cl, local_heads_);
      if (annotate_) annotate_("recompute", start);
    }
    backend_.attention_backward(d_qkv_, d_atty_, a.qkv, a.att, B_, c.seq, Cl, local_heads_);
    backend_.matmul_backward(d_ln_, grad(L.qkv_w), grad(L.qkv_b), d_qkv_,
                             all_rows(a.ln1, gathered_), weight(L.qkv_w), N, C, 3 * Cl, "attn.qkv");
    norm_backward(d_residual_, L.ln1_w, L.ln1_b, reduce_input_grad(), s.stack->residual[li],
                  a.ln1_mean, a.ln1_rstd);
    if (on_grads_ready) on_grads_ready(params_[L.ln1_w].offset);
  }

  if (first_stage()) {
    open_group(--group, true);
    backend_.embedding_backward(grad(wte_), grad(wpe_), all_rows(d_residual_, d_full_), s.tokens,
                                B_, c.seq, C);
    if (on_grads_ready) on_grads_ready(0);
  }
}

}  // namespace cs::worker
