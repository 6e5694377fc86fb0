// dqn_step_timeline: where the GPU time of one DQN vector step goes. Builds the DqnTrainer of
// bench/dqn_bench.cu's dqn_epoch/resident row (bench/dqn_bench_config.h, the same programmatic
// launch setting), runs its warm-up epochs, then records every kernel of a few epochs with
// audit::KernelTimeline (CUPTI concurrent-kernel records) and prints, per kernel position of a
// step: median start offset from the step's first kernel, duration, gap after the previous kernel
// on its stream and after the latest end of any earlier kernel (critical path), with the step's
// median span, busy time and period; kernels outside the steps (each epoch's first, eagerly
// launched step, the epoch summary, ...) are listed separately by name.
//
// Steps: --split launch takes one replay of a step graph as a step (all its kernels share the
// graph launch's correlation id: the default of a variant that replays one step per launch);
// --split marker cuts the record stream at each kernel named --marker (default dqn_act_fused,
// the fused acting kernel that begins a step's collection: the default of a variant whose graphs
// hold several steps, DqnConfig::steps_per_graph).
// The timeline runs from before the trainer is built (so the step graph is instantiated while
// kernel records are on), and only kernels starting after the warm-up are summarized.
// CUPTI's kernel tracing adds its own cost to each kernel: the epoch wall time is printed so it
// can be set against dqn_epoch/resident's untraced time.
//
// Exit status: 0 done, 1 error (no GPU, CUDA/CUPTI failure, no step found), 2 bad usage.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/json.h"
#include "audit/kernel_timeline.h"
#include "audit/kernel_timeline_summary.h"
#include "bench/dqn_bench_config.h"
#include "kernels/core/error.h"
#include "kernels/core/programmatic_launch.h"
#include "lib/rl/dqn/dqn_trainer.h"

namespace {

using namespace resident;

constexpr const char* kTool = "dqn_step_timeline";

struct Variant {
  const char* name;
  bench::DqnBenchVariant variant;
};

// The resident rows of bench/dqn_bench.cu, by their row name's suffix.
constexpr Variant kVariants[] = {
    {"resident", {}},
    {"resident_unfused", {false, false}},
    {"resident_gemm_acting", {true, false}},
    {"resident_serial_update", {true, true, false}},
    {"resident_no_programmatic_launch", {true, true, true, false}},
    {"resident_step_graphs", {true, true, true, true, 1}},
};

struct Options {
  std::size_t epochs = 3;
  std::optional<std::size_t> warmup_epochs;  // none: dqn_bench's count
  std::string variant = "resident";
  std::optional<bool> split_by_marker;  // none: by marker when a graph holds several steps
  std::string marker = "dqn_act_fused";
  std::string json_path;
  std::size_t max_records = std::size_t{1} << 20;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void print_help() {
  std::printf(
      "usage: %s [--epochs N] [--warmup-epochs N] [--variant NAME] [--split launch|marker]\n"
      "       [--marker KERNEL] [--max-records N] [--json PATH] [--help]\n\n"
      "Records the kernels of N epochs (200 vector steps each) of the DQN trainer of\n"
      "bench/dqn_bench's dqn_epoch/<variant> row with CUPTI and prints the per-step timeline.\n\n"
      "  --epochs N          epochs recorded, 1..100 (default 3)\n"
      "  --warmup-epochs N   epochs run before, 0..1000 (default: as dqn_bench, the replay's\n"
      "                      learning_starts in epochs + 2)\n"
      "  --variant NAME      resident (default), resident_unfused, resident_gemm_acting,\n"
      "                      resident_serial_update, resident_no_programmatic_launch,\n"
      "                      resident_step_graphs\n"
      "  --split launch      a step is one replay of a step graph (default when the\n"
      "                      variant's graphs hold one step: resident_step_graphs)\n"
      "  --split marker      a step begins at each kernel named by --marker (default when\n"
      "                      its graphs hold several steps: DqnConfig::steps_per_graph)\n"
      "  --marker KERNEL     kernel function name without namespace (default dqn_act_fused)\n"
      "  --max-records N     kernel records kept, 1..67108864 (default 1048576)\n"
      "  --json PATH         also write the summary as JSON\n\n"
      "Exit status: 0 done, 1 error (no GPU, CUDA or CUPTI failure, no step found), 2 bad usage.\n",
      kTool);
}

std::size_t parse_count(std::string_view flag, std::string_view text, std::size_t lo, std::size_t hi) {
  std::size_t value = 0;
  bool ok = !text.empty() && text.size() <= 12;
  for (const char c : text) {
    if (c < '0' || c > '9') ok = false;
    if (ok) value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  if (!ok || value < lo || value > hi)
    throw UsageError(std::string(flag) + ": '" + std::string(text) + "' is not an integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return value;
}

Options parse(int argc, char** argv, bool& help) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
      return o;
    }
    const auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw UsageError(std::string(arg) + " needs a value");
      return argv[++i];
    };
    if (arg == "--epochs") {
      o.epochs = parse_count(arg, value(), 1, 100);
    } else if (arg == "--warmup-epochs") {
      o.warmup_epochs = parse_count(arg, value(), 0, 1000);
    } else if (arg == "--variant") {
      o.variant = value();
      const bool known = std::any_of(std::begin(kVariants), std::end(kVariants),
                                     [&](const Variant& v) { return o.variant == v.name; });
      if (!known)
        throw UsageError("--variant: '" + o.variant +
                         "' is not one of resident, resident_unfused, resident_gemm_acting, "
                         "resident_serial_update, resident_no_programmatic_launch, "
                         "resident_step_graphs");
    } else if (arg == "--split") {
      const std::string_view split = value();
      if (split != "launch" && split != "marker")
        throw UsageError("--split: '" + std::string(split) + "' is not one of launch, marker");
      o.split_by_marker = split == "marker";
    } else if (arg == "--marker") {
      o.marker = value();
      if (o.marker.empty()) throw UsageError("--marker: the kernel name is empty");
    } else if (arg == "--max-records") {
      o.max_records = parse_count(arg, value(), 1, std::size_t{1} << 26);
    } else if (arg == "--json") {
      o.json_path = value();
      if (o.json_path.empty()) throw UsageError("--json: the path is empty");
    } else {
      throw UsageError("unknown argument '" + std::string(arg) + "' (--help lists the options)");
    }
  }
  return o;
}

// The GPU's name, or throws resident::Error when there is none.
std::string gpu_name() {
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    const std::string why = counted != cudaSuccess
                                ? std::string(cudaGetErrorName(counted)) + ": " + cudaGetErrorString(counted)
                                : std::string("no device");
    (void)cudaGetLastError();
    throw Error("cudaGetDeviceCount", "no CUDA device",
                why + "; this tool records kernels on a GPU", __FILE__, __LINE__);
  }
  int device = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  RESIDENT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

int run(const Options& o) {
  const std::string gpu = gpu_name();
  const Variant& variant = *std::find_if(std::begin(kVariants), std::end(kVariants),
                                         [&](const Variant& v) { return o.variant == v.name; });
  const ProgrammaticLaunchScope programmatic(variant.variant.programmatic_launch);
  const dqn::DqnConfig config = bench::dqn_bench_config(dqn::DqnPipeline::Resident, variant.variant);
  const bool split_by_marker = o.split_by_marker.value_or(config.steps_per_graph > 1);

  audit::KernelTimeline timeline(audit::KernelTimelineOptions{.max_records = o.max_records});
  timeline.start();
  dqn::DqnTrainer trainer(config);
  const std::size_t warmup_epochs =
      o.warmup_epochs.value_or(trainer.warmup_vector_steps() / bench::kDqnStepsPerEpoch + 2);
  std::printf("%s: %s, dqn_epoch/%s (acting: %s, gradient step: %s), %zu warm-up + %zu recorded "
              "epochs of %zu vector steps\n",
              kTool, gpu.c_str(), variant.name, trainer.fused_acting() ? "fused" : "GEMM path",
              trainer.fused_train_step() ? "fused" : "GEMM path", warmup_epochs, o.epochs,
              bench::kDqnStepsPerEpoch);
  for (std::size_t e = 0; e < warmup_epochs; ++e) (void)trainer.train_epoch();
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  const std::uint64_t recorded_from = audit::KernelTimeline::timestamp_ns();
  std::vector<double> epoch_ms;
  for (std::size_t e = 0; e < o.epochs; ++e) {
    const auto begin = std::chrono::steady_clock::now();
    (void)trainer.train_epoch();  // ends waiting for its readback: the epoch's work is done
    epoch_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count());
  }
  const audit::KernelTimelineResult result = timeline.stop_and_collect();

  std::vector<audit::KernelRecord> recorded;
  for (const audit::KernelRecord& k : result.kernels)
    if (k.start_ns >= recorded_from) recorded.push_back(k);
  std::vector<audit::KernelRecord> outside;
  const audit::KernelSteps steps = split_by_marker
                                       ? audit::split_by_marker(recorded, o.marker, &outside)
                                       : audit::split_by_launch(recorded, 2, &outside);
  std::printf("%zu kernel records (%zu in the recorded epochs), %zu steps by %s\n",
              result.kernels.size(), recorded.size(), steps.size(),
              split_by_marker ? ("marker " + o.marker).c_str() : "graph replay");
  for (const std::string& note : result.notes()) std::printf("note: %s\n", note.c_str());
  if (steps.empty()) {
    std::fprintf(stderr,
                 "%s: no step found among %zu kernel records (%s); kernels seen:\n%s", kTool,
                 recorded.size(),
                 split_by_marker ? ("no kernel named " + o.marker).c_str()
                                   : "no launch of 2 or more kernels: did CUPTI give graph "
                                     "nodes their launch's correlation id? try --split marker",
                 audit::format_name_summary(audit::summarize_by_name(recorded)).c_str());
    return 1;
  }
  const audit::StepTimelineSummary summary = audit::summarize_steps(steps);
  std::printf("\n## One vector step\n\n%s", audit::format_step_summary(summary).c_str());
  const std::vector<audit::KernelNameSummary> extras = audit::summarize_by_name(outside);
  std::printf("\n## Kernels outside the steps (%zu epochs: each epoch's eager first step, the epoch "
              "summary, ...)\n\n%s",
              o.epochs, audit::format_name_summary(extras).c_str());
  std::printf("\nepoch wall time while recorded (ms):");
  for (const double ms : epoch_ms) std::printf(" %.3f", ms);
  std::printf(" (median %.3f; CUPTI's kernel records add to it: compare dqn_epoch/%s)\n",
              audit::median(epoch_ms), variant.name);

  if (!o.json_path.empty()) {
    audit::Json::Array notes;
    for (const std::string& note : result.notes()) notes.push_back(audit::Json(note));
    audit::Json::Array epochs_ms;
    for (const double ms : epoch_ms) epochs_ms.push_back(audit::Json(ms));
    const audit::Json json(audit::Json::Object{
        {"tool", audit::Json(kTool)},
        {"gpu", audit::Json(gpu)},
        {"row", audit::Json(std::string("dqn_epoch/") + variant.name)},
        {"steps_per_epoch", audit::Json(static_cast<unsigned long long>(bench::kDqnStepsPerEpoch))},
        {"warmup_epochs", audit::Json(static_cast<unsigned long long>(warmup_epochs))},
        {"epochs", audit::Json(static_cast<unsigned long long>(o.epochs))},
        {"split", audit::Json(split_by_marker ? "marker" : "launch")},
        {"marker", split_by_marker ? audit::Json(o.marker) : audit::Json()},
        {"records", audit::Json(static_cast<unsigned long long>(recorded.size()))},
        {"records_complete", audit::Json(result.complete())},
        {"dropped_by_cupti", audit::Json(static_cast<unsigned long long>(result.dropped_by_cupti))},
        {"dropped_over_cap", audit::Json(static_cast<unsigned long long>(result.dropped_over_cap))},
        {"incomplete", audit::Json(static_cast<unsigned long long>(result.incomplete))},
        {"notes", audit::Json(std::move(notes))},
        {"step", audit::step_summary_json(summary)},
        {"outside_steps", audit::name_summary_json(extras)},
        {"epoch_wall_ms", audit::Json(std::move(epochs_ms))},
    });
    std::ofstream out(o.json_path);
    out << json.dump() << "\n";
    out.close();
    if (!out) {
      std::fprintf(stderr, "%s: cannot write %s\n", kTool, o.json_path.c_str());
      return 1;
    }
    std::printf("wrote %s\n", o.json_path.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    bool help = false;
    options = parse(argc, argv, help);
    if (help) {
      print_help();
      return 0;
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\n", kTool, e.what());
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kTool, e.what());
    return 1;
  }
}
