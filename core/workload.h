#pragma once
// What is trained: a transformer given by its shape, or a generic model (a CNN
// such as ResNet) given by its parameters, FLOPs and activations per sample;
// and the training recipe around it (optimizer, how much data).

#include <optional>
#include <string>
#include <string_view>

namespace cs {

enum class Norm { layernorm, rmsnorm };
enum class PositionEmbedding { learned, rotary };
enum class Optimizer { adamw, adam, sgd, sgd_momentum };

std::string_view to_string(Norm n);
std::string_view to_string(PositionEmbedding p);
std::string_view to_string(Optimizer o);

// fp32 words of optimizer state per parameter (Adam: m and v; SGD momentum: one).
int optimizer_state_words(Optimizer o);

struct TransformerShape {
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;     // grouped-query attention when below heads
  int ffn_hidden = 0;   // width of the MLP's inner layer
  bool gated_mlp = false;  // SwiGLU-style: three matrices instead of two
  int seq_len = 0;
  int vocab = 0;
  bool tied_embeddings = true;  // LM head shares the token embedding
  bool bias = true;             // linear layers carry biases (GPT) or not (LLaMA)
  bool dropout = true;          // dropout after attention and MLP (GPT, BERT); LLaMA trains without
  Norm norm = Norm::layernorm;
  PositionEmbedding positions = PositionEmbedding::learned;

  int head_dim() const { return hidden / heads; }
};

struct GenericModel {
  double parameters = 0;
  double forward_flops_per_sample = 0;
  // Activation bytes kept for backward per sample, at 4 bytes per element;
  // planners scale it to the compute precision.
  double activation_bytes_per_sample = 0;
  // Layers with weights (convolutions, linear layers); 0 when unknown. The
  // planners count kernels from it (each such layer runs a few per pass).
  int weight_layers = 0;
  std::string input;  // e.g. "3x32x32", informative
};

enum class WorkloadKind { transformer, generic };

struct Workload {
  std::string name;
  std::string display_name;
  WorkloadKind kind = WorkloadKind::transformer;
  TransformerShape transformer;  // when kind == transformer
  GenericModel generic;          // when kind == generic
  Optimizer optimizer = Optimizer::adamw;
  double training_tokens = 0;    // transformer: tokens to train on
  double dataset_samples = 0;    // generic: samples in the training set
  double epochs = 1;             // generic: passes over the training set
  std::string source;
};

// Parameter count, split so that pipeline stages can find their share.
struct ParameterCount {
  double embedding = 0;   // token (+ learned position) embedding
  double per_layer = 0;   // one transformer block
  double final_norm = 0;
  double lm_head = 0;     // 0 when tied to the embedding
  double total = 0;
};

ParameterCount parameter_count(const TransformerShape& shape);
double parameter_count(const Workload& workload);

// Samples (sequences for a transformer) the whole training run processes.
double training_samples(const Workload& workload);

}  // namespace cs
