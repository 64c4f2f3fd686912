// pstrain-bench: micro and model benchmarks.
//
//   pstrain-bench <subcommand> [--flags]
//
// Subcommands (kSubcommands below is the one list):
//   ps   PS push/pull goodput over a real local cluster vs single-thread memcpy
//        pstrain-bench ps --workers W --servers S --key_bytes B --keys K
//                         --transport grpc [--seconds T | --rounds R]
//                         [--warmup_rounds N] [--json] [--profile]
//   model  training steps of a zoo model in one process (no PS): images/sec,
//          achieved GFLOP/s vs a oneDNN sgemm measured beside it, peak RSS
//        pstrain-bench model --model resnet50 --batch_size 32 --steps N
//                            [--warmup 2] [--input_shape 3,224,224]
//                            [--num_classes 1000] [--json] [--profile]
//   allreduce  Gloo ring all-reduce between ranks on loopback TCP: time per
//              call, algorithm and bus bandwidth vs single-thread memcpy
//        pstrain-bench allreduce --ranks 2 --bytes 4194304 --iterations 20 [--json]
//
// Exit codes: 0 success; 1 the benchmark failed; 2 bad usage (unknown
// subcommand or flag, bad flag value). Results go to stdout; logs to stderr.
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/allocator_tuning.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/bench/allreduce_bench.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/ps_bench.h"

DEFINE_int32(workers, 1, "ps: worker threads, each with its own PsClient and connections");
DEFINE_int32(servers, 1, "ps: PS shards, each serving on its own 127.0.0.1 port");
DEFINE_int64(key_bytes, 1 << 20, "ps: bytes per key (float32, so a multiple of 4)");
DEFINE_int32(keys, 8, "ps: keys (variables key_0..), placed round_robin over the shards");
DEFINE_string(transport, "grpc", "ps: PS transport (grpc; inproc for comparison)");
DEFINE_double(seconds, 2.0, "ps: seconds per phase (push, pull, push+pull) when --rounds is 0");
DEFINE_int64(rounds, 0, "ps: rounds per worker per phase; overrides --seconds when > 0");
DEFINE_int64(warmup_rounds, 2, "ps: untimed rounds per worker before each phase");
DEFINE_bool(json, false, "print one JSON object on stdout instead of the table");
DEFINE_bool(profile, false,
            "ps: also print each phase's CPU, page faults and context switches; model: also time forward/backward "
            "per layer type (oneDNN verbose). On stderr with --json");
DEFINE_string(model, "resnet50", "model: zoo model name");
DEFINE_string(device, "cpu", "model: cpu or gpu (GPU 0; reference cuBLAS sgemm instead of oneDNN's)");
DEFINE_int32(batch_size, 32, "model: images per step");
DEFINE_int64(steps, 10, "model: measured training steps");
DEFINE_int64(warmup, 2, "model: untimed training steps before the measured ones");
DEFINE_string(input_shape, "",
              "model: C,H,W of one image; default 3,299,299 for inception3, 1,28,28 for "
              "lenet/mlp/trivial, 3,224,224 otherwise");
DEFINE_int32(num_classes, 1000, "model: output classes");
DEFINE_int64(matmul_size, 2048, "model: m = n = k of the oneDNN sgemm reference");
DEFINE_int32(ranks, 2, "allreduce: Gloo ranks (threads of this process, each with its own TCP device)");
DEFINE_int64(bytes, 4 << 20, "allreduce: bytes per rank per all-reduce (float32, so a multiple of 4)");
DEFINE_int32(iterations, 20, "allreduce: timed all-reduces per rank");

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int RunPs() {
  using namespace pstrain::bench;
  PsBenchOptions options;
  options.workers = FLAGS_workers;
  options.servers = FLAGS_servers;
  options.key_bytes = FLAGS_key_bytes;
  options.keys = FLAGS_keys;
  options.transport = FLAGS_transport;
  options.seconds = FLAGS_seconds;
  options.rounds = FLAGS_rounds;
  options.warmup_rounds = FLAGS_warmup_rounds;
  if (!gflags::GetCommandLineFlagInfoOrDie("seconds").is_default && FLAGS_rounds > 0) {
    std::cerr << "pstrain-bench ps: give --seconds or --rounds, not both" << std::endl;
    return kExitUsage;
  }
  if (absl::Status s = ValidatePsBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench ps: " << s.message() << std::endl;
    return kExitUsage;
  }
  absl::StatusOr<PsBenchResult> result = RunPsBench(options);
  if (!result.ok()) {
    std::cerr << "pstrain-bench ps: " << result.status().message() << std::endl;
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  if (FLAGS_json) {
    std::cout << FormatPsBenchJson(options, *result) << std::endl;
  } else {
    std::cout << FormatPsBenchTable(options, *result) << std::flush;
  }
  if (FLAGS_profile) (FLAGS_json ? std::cerr : std::cout) << FormatPsBenchProfile(options, *result) << std::flush;
  return kExitOk;
}

int RunModel() {
  using namespace pstrain::bench;
  ModelBenchOptions options;
  options.model = FLAGS_model;
  options.device = FLAGS_device;
  options.batch_size = FLAGS_batch_size;
  options.steps = FLAGS_steps;
  options.warmup = FLAGS_warmup;
  options.num_classes = FLAGS_num_classes;
  options.matmul_size = FLAGS_matmul_size;
  options.profile = FLAGS_profile;
  if (!FLAGS_input_shape.empty()) {
    for (absl::string_view d : absl::StrSplit(FLAGS_input_shape, ',')) {
      int64_t v = 0;
      if (!absl::SimpleAtoi(d, &v)) {
        std::cerr << "pstrain-bench model: --input_shape must be C,H,W, got '" << FLAGS_input_shape << "'" << std::endl;
        return kExitUsage;
      }
      options.input_shape.push_back(v);
    }
  }
  if (absl::Status s = ValidateModelBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench model: " << s.message() << std::endl;
    return kExitUsage;
  }
  // Progress lines go to stdout, or to stderr when stdout carries the JSON.
  options.progress = FLAGS_json ? &std::cerr : &std::cout;
  absl::StatusOr<ModelBenchResult> result = RunModelBench(options);
  if (!result.ok()) {
    std::cerr << "pstrain-bench model: " << result.status().message() << std::endl;
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  if (FLAGS_json) {
    std::cout << FormatModelBenchJson(*result) << std::endl;
  } else {
    std::cout << FormatModelBenchSummary(*result) << std::flush;
  }
  if (FLAGS_profile) (FLAGS_json ? std::cerr : std::cout) << FormatModelBenchProfile(*result) << std::flush;
  return kExitOk;
}

int RunAllReduce() {
  if (FLAGS_ranks < 1 || FLAGS_bytes <= 0 || FLAGS_bytes % 4 != 0 || FLAGS_iterations < 1) {
    std::cerr << "pstrain-bench allreduce: need --ranks >= 1, --bytes > 0 and a multiple of 4, --iterations >= 1"
              << std::endl;
    return kExitUsage;
  }
  absl::StatusOr<pstrain::AllReduceBenchResult> r =
      pstrain::RunAllReduceBench(FLAGS_ranks, FLAGS_bytes, FLAGS_iterations);
  if (!r.ok()) {
    std::cerr << "pstrain-bench allreduce: " << r.status().message() << std::endl;
    return kExitFailure;
  }
  if (FLAGS_json) {
    std::cout << absl::StrFormat(
                     "{\"ranks\":%d,\"bytes\":%d,\"iterations\":%d,\"seconds_per_call\":%.6g,\"algbw_gbps\":%.4g,"
                     "\"busbw_gbps\":%.4g,\"memcpy_gbps\":%.4g,\"busbw_to_memcpy\":%.4g}",
                     r->ranks, r->bytes, r->iterations, r->seconds_per_call, r->algbw_gbps, r->busbw_gbps,
                     r->memcpy_gbps, r->busbw_to_memcpy)
              << std::endl;
  } else {
    std::cout << absl::StrFormat(
        "all-reduce (Gloo ring, loopback TCP): %d ranks x %d bytes, %d calls\n"
        "  %.3f ms per call   algbw %.3f GB/s   busbw %.3f GB/s\n"
        "  memcpy (1 thread, %d MiB) %.3f GB/s   busbw / memcpy %.3f\n",
        r->ranks, r->bytes, r->iterations, r->seconds_per_call * 1e3, r->algbw_gbps, r->busbw_gbps,
        r->memcpy_buffer_bytes >> 20, r->memcpy_gbps, r->busbw_to_memcpy);
  }
  return kExitOk;
}

struct Subcommand {
  const char* name;
  const char* summary;
  int (*run)();
};

// The one list of subcommands.
constexpr Subcommand kSubcommands[] = {
    {"ps", "PS push/pull goodput over a real local cluster, vs single-thread memcpy", &RunPs},
    {"model", "training steps of a zoo model in one process: images/sec, GFLOP/s vs oneDNN sgemm, peak RSS", &RunModel},
    {"allreduce", "Gloo ring all-reduce between ranks on loopback TCP: bus bandwidth vs memcpy", &RunAllReduce},
};

void PrintSubcommands(std::ostream& os) {
  os << "usage: pstrain-bench <subcommand> [--flags]\nsubcommands:\n";
  for (const Subcommand& c : kSubcommands) os << "  " << c.name << "\t" << c.summary << "\n";
  os << "flags: pstrain-bench <subcommand> --helpon=bench_main" << std::endl;
}

// gflags exits 1 on an unknown flag; usage errors here exit 2, so unknown
// flags are caught first. Returns the first unknown flag, or "".
std::string FirstUnknownFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const bool has_value = arg.find('=') != std::string_view::npos;
    std::string name(arg.substr(0, arg.find('=')));
    gflags::CommandLineFlagInfo info;
    if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) {
      if (!has_value && info.type != "bool") ++i;  // "--flag value": skip the value (it may be "-1")
      continue;
    }
    if (name.rfind("no", 0) == 0 && gflags::GetCommandLineFlagInfo(name.c_str() + 2, &info) && info.type == "bool") {
      continue;
    }
    return std::string(argv[i]);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::TuneAllocatorForBulkTraffic();
  if (argc < 2 || argv[1][0] == '-') {
    const bool help = argc >= 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0);
    PrintSubcommands(help ? std::cout : std::cerr);
    return help ? kExitOk : kExitUsage;
  }
  const std::string name = argv[1];
  const Subcommand* command = nullptr;
  for (const Subcommand& c : kSubcommands) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr) {
    std::cerr << "pstrain-bench: unknown subcommand '" << name << "'\n";
    PrintSubcommands(std::cerr);
    return kExitUsage;
  }
  // Drop the subcommand so gflags sees "pstrain-bench --flags...".
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  --argc;
  argv[argc] = nullptr;

  gflags::SetUsageMessage("pstrain-bench <subcommand> [--flags]; subcommands: ps, model, allreduce");
  if (std::string unknown = FirstUnknownFlag(argc, argv); !unknown.empty()) {
    std::cerr << "pstrain-bench " << name << ": unknown flag " << unknown << std::endl;
    return kExitUsage;
  }
  FLAGS_logtostderr = true;  // stdout carries only results
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  if (argc > 1) {
    std::cerr << "pstrain-bench " << name << ": unexpected argument '" << argv[1] << "'" << std::endl;
    return kExitUsage;
  }
  google::InitGoogleLogging("pstrain-bench");
  return command->run();
}
