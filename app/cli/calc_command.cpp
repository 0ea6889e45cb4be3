// clusterscope calc communication | quantize | flops: the seed articles'
// calculators, headless (the app's Calculators panel does the communication
// and quantisation sums).
// With no options each reproduces the article's own worked example.

#include <cmath>
#include <iostream>
#include <limits>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/cli_options.h"
#include "app/cli/context.h"
#include "app/cli/text_table.h"
#include "core/format.h"
#include "core/json_reader.h"
#include "core/json_text.h"
#include "core/model_json.h"
#include "planners/seed_formulas.h"

namespace cs::cli {

namespace {

// A figure as written: whole numbers whole ("1281167"), others to 6
// significant digits without trailing zeros ("-0.5", "1e-300").
std::string number(double value) {
  if (std::floor(value) == value && std::fabs(value) < 1e15)
    return std::to_string(static_cast<long long>(value));
  return format_significant(value, 6);
}

// --- communication -------------------------------------------------------------

struct CommunicationOptions {
  // The article's example: S = 100 MB, N = 8, B = 10 GB/s, L = 0.1 ms.
  double megabytes = 100;
  int devices = 8;
  double bandwidth_gb_s = 10;
  double latency_ms = 0.1;
  bool json = false;
};

void run_communication(const CommunicationOptions& o) {
  const double bytes = o.megabytes * 1e6;
  const double bandwidth = o.bandwidth_gb_s * 1e9;
  const double latency = o.latency_ms * 1e-3;
  const int n = o.devices;
  const double simple = plan::simple_communication_seconds(bytes, n, bandwidth, latency);
  const double ring = plan::ring_all_reduce_seconds(bytes, n, bandwidth, latency);
  const double ring_sent = 2.0 * (n - 1) / n * bytes;  // per device
  if (o.json) {
    std::cout << json_text(nlohmann::json{{"bytes", bytes},
                                          {"devices", n},
                                          {"bandwidth_bytes_per_s", bandwidth},
                                          {"latency_s", latency},
                                          {"simple_seconds", simple},
                                          {"ring_seconds", ring},
                                          {"ring_bytes_sent_per_device", ring_sent}},
                           2)
              << '\n';
    return;
  }
  std::cout << "S = " << number(o.megabytes) << " MB, N = " << n << ", B = "
            << format_rate(bandwidth, "B/s") << ", L = " << format_seconds(latency) << ":\n";
  if (n == 1) {
    std::cout << "  one device exchanges nothing: 0 s in either model\n";
    return;
  }
  TextTable t({"model", "formula", "time"});
  t.right_align(2);
  t.add({"the articles'", "S*N/B + L*(N-1)", format_seconds(simple)});
  t.add({"ring all-reduce", "2(N-1)/N*S/B + 2(N-1)*L", format_seconds(ring)});
  t.print(std::cout);
  std::cout << "The simple model counts every device's S crossing one link; a ring sends "
            << number(ring_sent / 1e6) << " MB per device (under 2*S whatever N is)";
  // Small S over many devices: the ring's 2(N-1) latencies outweigh the
  // bytes it saves ("0.5x faster" said it was slower).
  if (ring > 0 && simple >= ring) {
    std::cout << ", " << format_fixed(simple / ring, 1) << "x faster here";
  } else if (ring > 0) {
    std::cout << ", yet it is " << format_fixed(ring / simple, 1)
              << "x slower here: its 2(N-1) latencies outweigh the bytes it saves";
  }
  std::cout << ".\n";
}

// --- quantize ------------------------------------------------------------------

struct QuantizeOptions {
  // The article's example: [-0.5, 0.8] in INT8, and the value 0.3.
  double min = -0.5;
  double max = 0.8;
  int bits = 8;
  std::string integers = "article";
  std::vector<double> values{0.3};
  bool json = false;
};

void run_quantize(const QuantizeOptions& o, bool bits_given) {
  if (!(o.min < o.max)) {
    throw UsageError("--min must be below --max (got " + number(o.min) + " and " + number(o.max) +
                     ")");
  }
  // A range narrower than any float32 tensor's gives a scale of 0 (or one
  // that maps every value to the integers' end): "round(x/s)+z = 9e18".
  if (o.max - o.min < std::numeric_limits<float>::min()) {
    throw UsageError(
        "--min " + number(o.min) + " and --max " + number(o.max) +
        " are closer than the smallest normal float32 (1.2e-38): no tensor's range is, "
        "and its scale would be 0; give a wider range");
  }
  const bool article = o.integers == "article";
  if (article && bits_given && o.bits != 8) {
    throw UsageError("--bits " + std::to_string(o.bits) +
                     ": the articles' integers are INT8; give --integers unsigned, signed or "
                     "symmetric for other widths");
  }
  const bool symmetric = o.integers == "symmetric";
  const plan::QuantParams p =
      article     ? plan::article_int8_params(o.min, o.max)
      : symmetric ? plan::symmetric_quant_params(o.min, o.max, o.bits)
                  : plan::quant_params(o.min, o.max, o.bits, o.integers == "signed");
  std::vector<plan::Quantized> mapped;
  for (double x : o.values) mapped.push_back(plan::quantize(x, p));
  const bool widened = p.min != o.min || p.max != o.max;

  if (o.json) {
    nlohmann::json values = nlohmann::json::array();
    for (std::size_t i = 0; i < mapped.size(); ++i) {
      const plan::Quantized& m = mapped[i];
      values.push_back({{"x", o.values[i]},
                        {"unclamped", m.unclamped},
                        {"q", m.q},
                        {"clamped", m.clamped},
                        {"dequantized", m.dequantized},
                        {"error", m.error}});
    }
    std::cout << json_text(nlohmann::json{{"range", {o.min, o.max}},
                                          {"range_quantized", {p.min, p.max}},
                                          {"bits", article ? 8 : o.bits},
                                          {"integers", o.integers},
                                          {"scale", p.scale},
                                          {"zero_point", p.zero_point},
                                          {"q_min", p.q_min},
                                          {"q_max", p.q_max},
                                          {"values", values}},
                           2)
              << '\n';
    return;
  }
  const int bits = article ? 8 : o.bits;
  std::cout << "INT" << bits << " of [" << number(o.min) << ", " << number(o.max)
            << "]";
  if (widened) {
    std::cout << (symmetric ? ", symmetric about 0: [" : ", widened to [") << number(p.min) << ", "
              << number(p.max) << (symmetric ? "]" : "] so that 0 stays exact");
  }
  if (symmetric) {
    std::cout << ":\n  scale s = max(|min|, |max|)/(2^" << bits - 1 << " - 1) = " << number(p.scale)
              << "\n  zero point z = 0";
  } else {
    std::cout << ":\n  scale s = (max - min)/(2^" << bits << " - 1) = " << number(p.scale)
              << "\n  zero point z = round(-min/s)" << (o.integers == "signed" ? " - " : "")
              << (o.integers == "signed" ? std::to_string(1 << (bits - 1)) : "") << " = "
              << p.zero_point;
  }
  std::cout << "\n  integers [" << p.q_min << ", " << p.q_max << "]"
            << (article ? " (the articles' z is for 0 to 255, the values stored as int8)" : "")
            << "\n\n";
  TextTable t({"x", "round(x/s) + z", "q", "x' = s(q - z)", "error x' - x", ""});
  for (std::size_t c = 0; c < 5; ++c) t.right_align(c);
  bool any_clamped = false;
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    const plan::Quantized& m = mapped[i];
    any_clamped = any_clamped || m.clamped;
    t.add({number(o.values[i]), std::to_string(m.unclamped), std::to_string(m.q),
           number(m.dequantized), number(m.error), m.clamped ? "clamped" : ""});
  }
  t.print(std::cout);
  if (article && any_clamped) {
    std::cout << "\nThe articles' zero point assumes 0 to 255; stored as a signed int8 the values "
                 "above "
              << number(p.scale * (p.q_max - p.zero_point))
              << " overflow. Unsigned storage (--integers unsigned), or z - 128 (--integers "
                 "signed), keeps them.\n";
  }
}

// --- flops ---------------------------------------------------------------------

struct FlopsOptions {
  std::string model;  // a preset or JSON file with forward FLOPs per sample
  std::optional<double> forward_flops;
  double batch = 256;
  std::optional<double> samples, epochs, iterations;
  bool json = false;
};

// The seed article's own example when neither a model nor FLOPs are given.
constexpr const char* kArticleFlopsModel = "resnet18-cifar10";

void run_flops(const FlopsOptions& o, Context& ctx) {
  const std::string model = o.model.empty() && !o.forward_flops ? kArticleFlopsModel : o.model;
  std::string what;  // the model's name, when one is given
  double forward = o.forward_flops.value_or(0);
  double samples = o.samples.value_or(0);
  double epochs = o.epochs.value_or(1);
  if (!model.empty()) {
    ModelOptions m;
    m.model = model;
    const Workload w = m.resolve(ctx.catalog());
    if (w.kind != WorkloadKind::generic) {
      throw CliError(model +
                     " is a transformer: its training FLOPs per step (and 6PD) are in "
                     "`clusterscope plan --model " +
                     model + "`; calc flops takes a model with forward FLOPs per sample");
    }
    what = w.display_name + ", preset " + w.name;
    if (!o.forward_flops) forward = w.generic.forward_flops_per_sample;
    if (!o.samples) samples = w.dataset_samples;
    if (!o.epochs) epochs = w.epochs;
  }
  if (!(forward > 0)) throw CliError(what + " has no forward FLOPs per sample: give --forward-flops");
  if (o.forward_flops) what += what.empty() ? "" : ", forward FLOPs given by --forward-flops";
  double iterations = 0;
  if (o.iterations) {
    iterations = *o.iterations;
  } else if (samples > 0) {
    iterations = plan::iterations_per_run(samples, o.batch, epochs);
    // 1e-300 epochs: "0 iterations ... = 0.00 FLOP".
    if (iterations == 0) {
      throw UsageError("--epochs " + number(epochs) + " of " + number(samples) +
                       " samples trains on no sample: give at least " + number(1 / samples) +
                       " (one sample)");
    }
  } else {
    throw CliError("give --iterations, or --samples (and --epochs) to count them");
  }
  // The samples trained on: the last batch of an epoch holds what is left
  // (a part of an epoch, 2.5, trains on whole samples).
  const double trained =
      o.iterations ? o.batch * iterations : plan::samples_per_run(samples, epochs);
  const double total = plan::training_flops(forward, trained);
  // The article's formula as it is written: batch x iterations, x 2.
  const double article = forward * 2 * o.batch * iterations;
  if (o.json) {
    nlohmann::json out{{"forward_flops_per_sample", forward},
                       {"batch", o.batch},
                       {"iterations", iterations},
                       {"samples_trained", trained},
                       {"training_flops", total},
                       {"article_training_flops", article}};
    if (!o.iterations) {
      out["samples"] = samples;
      out["epochs"] = epochs;
    }
    std::cout << json_text(out, 2) << '\n';
    return;
  }
  std::cout << "Training FLOPs" << (what.empty() ? "" : " of " + what) << ":\n"
            << "  forward " << format_rate(forward, "FLOP") << " per sample, batch "
            << number(o.batch) << ", " << number(iterations)
            << (iterations == 1 ? " iteration" : " iterations");
  if (!o.iterations) {
    std::cout << " (" << number(epochs) << (epochs == 1 ? " epoch" : " epochs") << " of "
              << number(samples) << (samples == 1 ? " sample" : " samples")
              << ", ceil(samples/batch) a pass)";
  }
  if (o.iterations) {
    std::cout << "\n  forward x 3 (1 forward + 2 backward) x batch x iterations = ";
  } else {
    std::cout << "\n  forward x 3 (1 forward + 2 backward) x samples x epochs = ";
  }
  std::cout << format_rate(total, "FLOP") << "\n"
            << "  The articles' forward x 2 (forward + backward) x batch x iterations gives "
            << format_rate(article, "FLOP")
            << ": backward computes the gradients of both the inputs and the weights, about "
               "twice the forward";
  if (!o.iterations && o.batch * iterations != trained) {
    std::cout << ", and the last, partial batch of each epoch counts as a full one";
  }
  std::cout << ".\n";
}

}  // namespace

void register_calc(CLI::App& app, Context& ctx) {
  CLI::App* calc = app.add_subcommand(
      "calc", "The seed articles' calculators: communication time, quantisation, training FLOPs");
  calc->require_subcommand(1);

  auto c = std::make_shared<CommunicationOptions>();
  CLI::App* comm = calc->add_subcommand(
      "communication",
      "Gradient exchange time: the articles' S*N/B + L*(N-1) beside the ring all-reduce "
      "(defaults: the article's 100 MB, 8 devices, 10 GB/s, 0.1 ms)");
  // Bounds past any real job (1 PB, 1 MB/s to 1 PB/s, 1000 s), so that no
  // figure overflows to inf or nan.
  comm->add_option("--megabytes,-S", c->megabytes, "Bytes each device exchanges, in MB (10^6)")
      ->check(number_within({0, 1e9, true}));
  comm->add_option("--devices,-N", c->devices, "Devices")->check(integer_between(1, 1 << 24));
  comm->add_option("--bandwidth,-B", c->bandwidth_gb_s, "Link bandwidth, GB/s (10^9 bytes)")
      ->check(number_within({1e-3, 1e6}));
  comm->add_option("--latency,-L", c->latency_ms, "Latency per hop, ms")
      ->check(number_within({0, 1e6}));
  add_json_flag(*comm, c->json);
  comm->callback([c] { run_communication(*c); });

  auto q = std::make_shared<QuantizeOptions>();
  CLI::App* quant = calc->add_subcommand(
      "quantize",
      "Linear quantisation: scale, zero point, values to integers and back, with the error "
      "(defaults: the article's [-0.5, 0.8] in INT8 and 0.3)");
  // |x| up to 1e9, past any tensor's range: the scale of a range near the
  // largest double overflows to inf.
  quant->add_option("--min", q->min, "Range min")->check(number_within({-1e9, 1e9}));
  quant->add_option("--max", q->max, "Range max")->check(number_within({-1e9, 1e9}));
  CLI::Option* bits = quant->add_option("--bits", q->bits, "Integer width (article: 8)")
                          ->check(integer_between(2, 16));
  quant
      ->add_option("--integers", q->integers,
                   "article (z = round(-min/s), stored as int8), unsigned (0 to 2^bits - 1), "
                   "signed (-2^(bits-1) to 2^(bits-1) - 1) or symmetric (z = 0, s = "
                   "max|x|/(2^(bits-1) - 1), as TensorRT and LLM.int8())")
      ->check(CLI::IsMember({"article", "unsigned", "signed", "symmetric"}));
  quant->add_option("--value,-x", q->values, "Values to quantise")
      ->check(number_within({-1e9, 1e9}));
  add_json_flag(*quant, q->json);
  quant->callback([q, bits] { run_quantize(*q, bits->count() > 0); });

  auto f = std::make_shared<FlopsOptions>();
  CLI::App* flops = calc->add_subcommand(
      "flops",
      "Training FLOPs = forward FLOPs x 3 x batch x iterations (the articles write x 2); with "
      "no options, the article's example (resnet18-cifar10)");
  flops->add_option("--model", f->model,
                    "A model preset or JSON file with forward FLOPs per sample (its samples "
                    "and epochs too); default resnet18-cifar10 unless --forward-flops");
  // Bounds past any real training (a PFLOP forward, a million samples a
  // step, 10^12 samples, 10^4 epochs): the product stays in the units' range.
  flops->add_option("--forward-flops", f->forward_flops, "Forward FLOPs per sample")
      ->check(number_within({0, 1e15, true}));
  flops->add_option("--batch", f->batch, "Samples per iteration (default 256)")
      ->check(whole_number_within({0, 1e6, true}));
  CLI::Option* samples = flops->add_option("--samples", f->samples, "Samples in the training set")
                             ->check(whole_number_within({0, 1e12, true}));
  CLI::Option* epochs =
      flops->add_option("--epochs", f->epochs, "Passes over the training set")
          ->check(number_within({0, 1e4, true}));
  flops->add_option("--iterations", f->iterations, "Iterations (instead of samples and epochs)")
      ->check(whole_number_within({0, 1e12, true}))
      ->excludes(samples)
      ->excludes(epochs);
  add_json_flag(*flops, f->json);
  flops->callback([f, &ctx] { run_flops(*f, ctx); });
}

}  // namespace cs::cli
