// pstrain-bench: micro and model benchmarks.
//
//   pstrain-bench <subcommand> [--flags]
//
// Subcommands (kSubcommands below is the one list):
//   ps   PS push/pull goodput over a real local cluster vs single-thread memcpy
//        and plain TCP between the same endpoints
//        pstrain-bench ps --workers W --servers S --key_bytes B --keys K
//                         --transport grpc|ucx [--seconds T | --rounds R]
//                         [--warmup_rounds N] [--window_bytes B] [--processes]
//                         [--emulated_hosts N [--link_gbps R] [--host_cpus auto|own|shared]]
//                         [--json] [--profile]
//        --processes: every shard and worker a process of its own (the
//        bench starting itself as the hidden `ps-role` subcommand);
//        --emulated_hosts: those processes on N emulated hosts (network
//        namespaces on a bridge; root only), links capped at R Gbit/s, each
//        host on CPUs of its own where there are enough (--host_cpus)
//   model  training steps of a zoo model in one process (no PS): images/sec,
//          achieved GFLOP/s vs a oneDNN sgemm measured beside it, peak RSS
//        pstrain-bench model --model resnet50 --batch_size 32 --steps N
//                            [--warmup 2] [--input_shape 3,224,224]
//                            [--num_classes 1000] [--json] [--profile]
//   allreduce  all-reduce between ranks: the library's own call (Gloo ring on
//              loopback TCP, or a plain MPI_Allreduce) beside the allreduce
//              strategy's fused path over it; bus bandwidth vs single-thread
//              memcpy. --backend mpi starts `mpirun -np RANKS` of itself and
//              prints the Gloo figures beside (allreduce_bench.h)
//        pstrain-bench allreduce --backend gloo|mpi --ranks 2 --bytes 4194304 [--json]
//   timeline  a worker timeline's crash-safe flush (copy, append, rename) as
//             the file grows, vs a plain append of the same bytes
//             (timeline_bench.h)
//        pstrain-bench timeline --steps 1000 --events_per_step 50 [--dir D] [--json]
//   input  the training input pipeline's JPEG decode + ResNet augmentation
//          (image::DecodeAugment) vs a plain full-size TurboJPEG decode of
//          the same files, per thread count (input_bench.h)
//        pstrain-bench input [--image_width 500 --image_height 375 --images 64
//                             --out_size 224 --threads 1,2 --seconds 2] [--json]
//   embedding  an embedding table's rows: the shard's table in process vs a
//              plain hash map of the same ids, then sparse pulls and pushes
//              over a real local PS cluster (embedding_bench.h)
//        pstrain-bench embedding [--servers 2 --workers 2 --batch_size 512
//                                 --features 26 --dim 16 --cardinality 10000000
//                                 --zipf 1.05 --transport grpc|ucx --optimizer sgd
//                                 --wire_dtype fp32 --seconds 2] [--json]
//
// Units, in --json field names as in the code: *_gbps is gigabits per second
// (1e9 bits/s: ps goodput, plain TCP and memcpy), *_gbytes_per_sec gigabytes per second
// (1e9 bytes/s: allreduce's algbw, busbw and memcpy).
//
// Exit codes: 0 success; 1 the benchmark failed; 2 bad usage (unknown
// subcommand or flag, bad flag value, emulated hosts where they cannot be
// made); 128+N when `ps --processes` was stopped by signal N. Results go to
// stdout; logs to stderr.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/allocator_tuning.h"
#include "common/command_line/command_line.h"
#include "common/config/config_loader.h"
#include "common/lock_order_checking.h"
#include "common/transport/security.h"
#include "gflags/gflags.h"
#include "glog/logging.h"
#include "tools/bench/allreduce_bench.h"
#include "tools/bench/embedding_bench.h"
#include "tools/bench/input_bench.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/ps_bench.h"
#include "tools/bench/ps_bench_role.h"
#include "tools/bench/timeline_bench.h"
#include "tools/launch/mpirun.h"
#include "worker/collective/collective.h"

DEFINE_int32(workers, 1, "ps: worker threads, each with its own PsClient and connections");
DEFINE_int32(servers, 1, "ps: PS shards, each serving on its own 127.0.0.1 port");
DEFINE_int64(key_bytes, 1 << 20, "ps: bytes per key (float32, so a multiple of 4)");
DEFINE_int32(keys, 8, "ps: keys (variables key_0..), placed round_robin over the shards");
DEFINE_string(transport, "grpc", "ps: PS transport (grpc, ucx where built; inproc for comparison)");
DEFINE_double(seconds, 2.0,
              "ps: seconds per phase (push, pull, push+pull) when --rounds is 0; input: seconds per phase and thread "
              "count");
DEFINE_int64(rounds, 0, "ps: rounds per worker per phase; overrides --seconds when > 0");
DEFINE_int64(warmup_rounds, 2, "ps: untimed rounds per worker before each phase");
DEFINE_bool(processes, false,
            "ps: every shard and worker in a process of its own (on 127.0.0.1), instead of threads of this one");
DEFINE_int32(emulated_hosts, 0,
             "ps: run the roles as --processes on this many emulated hosts (network namespaces on a bridge; root "
             "only): shards on the first hosts, workers on the others");
DEFINE_int64(window_bytes, 0,
             "ps: the push+pull phase's bytes of pushes in flight per worker (as ps_scheduling.window_bytes); 0: no "
             "limit");
DEFINE_int32(pushes_per_shard, 1,
             "ps: the push+pull phase's pushes in flight per shard (as ps_scheduling.pushes_per_shard); 0: no limit");
DEFINE_double(link_gbps, 0, "ps: with --emulated_hosts, cap every host's link at this many Gbit/s each way");
DEFINE_string(host_cpus, "auto",
              "ps: with --emulated_hosts, own (each host on CPUs of its own, as separate machines), shared (every "
              "host on every CPU), or auto (own where there are at least as many CPUs as hosts)");
DEFINE_string(role, "", "ps-role: internal; server or worker");
DEFINE_int32(index, -1, "ps-role: internal; the shard's or worker's index");
DEFINE_string(control, "", "ps-role: internal; the control socket of the bench that started this role");
DEFINE_string(security_config, "",
              "ps: an experiment config whose security section (TLS, token) every shard and worker uses "
              "(default: plaintext)");
DEFINE_bool(json, false, "every subcommand: print one JSON object on stdout instead of the table");
DEFINE_bool(profile, false,
            "ps: also print each phase's CPU, page faults and context switches; model: also time forward/backward "
            "per layer type (oneDNN verbose). On stderr with --json");
DEFINE_string(model, "resnet50", "model: zoo model name");
DEFINE_string(device, "cpu", "model: cpu or gpu (GPU 0; reference cuBLAS sgemm instead of oneDNN's)");
DEFINE_string(precision, "fp32",
              "model: fp32, or mixed precision: bf16 (CPUs with AVX-512 BF16 or AMX, GPUs of compute capability "
              "8.0+) or fp16 (GPUs of compute capability 7.0+)");
DEFINE_string(fp32_math, "tf32_convolutions",
              "model: how a GPU with TF32 computes float32 products: tf32_convolutions (PyTorch's default), tf32 "
              "(matmuls too) or strict; CPUs are always strict");
DEFINE_int32(batch_size, 32, "model: images per step");
DEFINE_int64(steps, 10, "model: measured training steps; timeline: traced steps, each one flush (default there 1000)");
DEFINE_int64(warmup, 2, "model: untimed training steps before the measured ones");
DEFINE_string(input_shape, "",
              "model: C,H,W of one image; default 3,299,299 for inception3, 1,28,28 for "
              "lenet/mlp/trivial, 3,224,224 otherwise");
DEFINE_int32(num_classes, 1000, "model: output classes");
DEFINE_int64(matmul_size, 2048, "model: m = n = k of the oneDNN sgemm reference");
DEFINE_string(backend, "gloo",
              "allreduce: gloo (ranks as threads, each with its own TCP device) or mpi (ranks of one mpirun)");
DEFINE_int32(ranks, 2, "allreduce: ranks");
DEFINE_int64(bytes, 4 << 20, "allreduce: bytes per rank per all-reduce (float32, a multiple of 4 x --variables)");
DEFINE_int32(iterations, 20, "allreduce: timed all-reduces per rank and path");
DEFINE_int32(variables, 16, "allreduce: gradients the strategy path splits --bytes into");
DEFINE_int64(fusion_threshold_bytes, 64 << 20, "allreduce: the strategy path's fusion bucket size (0: per variable)");
DEFINE_string(compression, "none", "allreduce: the strategy path's wire (none, fp16, bf16)");
DEFINE_int32(events_per_step, 50, "timeline: events recorded in each traced step");
DEFINE_string(dir, "", "timeline: directory for the files (default: a fresh one under $TMPDIR, removed after)");
DEFINE_int32(image_width, 500, "input: width of the JPEGs the run makes");
DEFINE_int32(image_height, 375, "input: height of the JPEGs the run makes");
DEFINE_int32(images, 64, "input: JPEGs the run makes (every thread loops over all of them)");
DEFINE_int32(out_size, 224, "input: side of the augmented output (float CHW)");
DEFINE_string(threads, "1,2", "input: thread counts to measure, comma-separated");
DEFINE_int32(features, 26, "embedding: ids per example (one per categorical feature)");
DEFINE_int32(dim, 16, "embedding: floats per row");
DEFINE_int64(cardinality, 10000000, "embedding: ranks per feature, ids drawn from Zipf over them");
DEFINE_double(zipf, 1.05, "embedding: the Zipf exponent of every feature's ids");
DEFINE_string(optimizer, "sgd", "embedding: the table's optimizer (sgd, momentum, adagrad, ftrl, adam)");
DEFINE_string(wire_dtype, "fp32", "embedding: rows on the wire (fp32, fp16, bf16)");
DEFINE_bool(mpi_rank, false, "allreduce: internal; run as one rank of the mpirun that --backend mpi starts");

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// The write end of the self-pipe the signal handler reports through, and
// the last signal it reported (0: none).
int g_signal_pipe_write = -1;
volatile sig_atomic_t g_last_signal = 0;

void OnSignal(int signo) {
  const int saved_errno = errno;
  g_last_signal = signo;
  const unsigned char byte = static_cast<unsigned char>(signo);
  (void)!write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

// SIGINT and SIGTERM write their number to a pipe; returns its read end
// (non-blocking), or -1.
int InstallSignalPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  g_signal_pipe_write = fds[1];
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return fds[0];
}

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
  options.processes = FLAGS_processes || FLAGS_emulated_hosts != 0;  // emulated hosts run processes
  options.emulated_hosts = FLAGS_emulated_hosts;
  options.link_gbps = FLAGS_link_gbps;
  options.host_cpus = FLAGS_host_cpus;
  options.window_bytes = FLAGS_window_bytes;
  options.pushes_per_shard = FLAGS_pushes_per_shard;
  if (!FLAGS_security_config.empty()) {
    absl::StatusOr<pstrain::ExperimentConfig> config = pstrain::ReadExperimentConfig(FLAGS_security_config);
    if (config.ok()) config->set_transport(options.transport);
    absl::StatusOr<pstrain::TransportSecurity> security =
        config.ok() ? pstrain::LoadTransportSecurity(*config) : config.status();
    if (!security.ok()) {
      std::cerr << "pstrain-bench ps: --security_config " << FLAGS_security_config << ": "
                << security.status().message() << std::endl;
      return kExitUsage;
    }
    options.security = *std::move(security);
  }
  if (!gflags::GetCommandLineFlagInfoOrDie("seconds").is_default && FLAGS_rounds > 0) {
    std::cerr << "pstrain-bench ps: give --seconds or --rounds, not both" << std::endl;
    return kExitUsage;
  }
  if (absl::Status s = ValidatePsBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench ps: " << s.message() << std::endl;
    return kExitUsage;
  }
  // Roles in processes: SIGINT and SIGTERM stop them (and remove emulated
  // hosts) instead of leaving that to the parent-death signal.
  if (options.processes) options.interrupt_fd = InstallSignalPipe();
  absl::StatusOr<PsBenchResult> result = RunPsBench(options);
  if (!result.ok()) {
    std::cerr << "pstrain-bench ps: " << result.status().message() << std::endl;
    if (g_last_signal != 0) return 128 + g_last_signal;
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

// One shard or worker of `ps --processes` (ps_bench_role.h).
int RunPsRole() { return pstrain::bench::RunPsBenchRole(FLAGS_role, FLAGS_index, FLAGS_control); }

int RunModel() {
  using namespace pstrain::bench;
  ModelBenchOptions options;
  options.model = FLAGS_model;
  options.device = FLAGS_device;
  options.precision = FLAGS_precision;
  options.fp32_math = FLAGS_fp32_math;
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

// The line a rank-0 child prints for its parent: the slowest rank's loops.
constexpr char kMpiRankLine[] = "allreduce-mpi-rank-seconds";

pstrain::AllReduceBenchOptions AllReduceOptionsFromFlags() {
  pstrain::AllReduceBenchOptions o;
  o.backend = FLAGS_backend;
  o.ranks = FLAGS_ranks;
  o.bytes = FLAGS_bytes;
  o.iterations = FLAGS_iterations;
  o.variables = FLAGS_variables;
  o.fusion_threshold_bytes = FLAGS_fusion_threshold_bytes;
  o.compression = FLAGS_compression;
  return o;
}

// In a rank of the mpirun: measure, and rank 0 prints the loops' seconds.
int RunAllReduceMpiRank(const pstrain::AllReduceBenchOptions& options) {
  absl::StatusOr<pstrain::AllReduceBenchResult> r = pstrain::RunMpiAllReduceRank(options);
  if (!r.ok()) {
    std::cerr << "pstrain-bench allreduce (mpi rank): " << r.status().message() << std::endl;
    return kExitFailure;
  }
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank != nullptr && std::string(rank) == "0") {
    std::cout << absl::StrFormat("%s %.9g %.9g %d %d", kMpiRankLine, r->reference.seconds_per_call * options.iterations,
                                 r->strategy.seconds_per_call * options.iterations, r->fusion_buckets,
                                 r->buckets_in_place)
              << std::endl;
  }
  return kExitOk;
}

// Starts `mpirun -np ranks` of this binary with --mpi_rank and reads rank 0's
// line back.
absl::StatusOr<pstrain::AllReduceBenchResult> RunAllReduceUnderMpirun(const pstrain::AllReduceBenchOptions& options,
                                                                      double memcpy_gbytes_per_sec,
                                                                      int64_t memcpy_bytes) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return absl::InternalError("cannot find this executable (/proc/self/exe)");
  self[n] = '\0';
  absl::StatusOr<pstrain::launch::RoleSpec> mpirun = pstrain::launch::MpirunRole(
      options.ranks, self,
      {"allreduce", "--mpi_rank", "--backend=mpi", absl::StrCat("--ranks=", options.ranks),
       absl::StrCat("--bytes=", options.bytes), absl::StrCat("--iterations=", options.iterations),
       absl::StrCat("--variables=", options.variables),
       absl::StrCat("--fusion_threshold_bytes=", options.fusion_threshold_bytes),
       absl::StrCat("--compression=", options.compression)});
  if (!mpirun.ok()) return mpirun.status();
  // Every argument is ours (paths of executables, flags with numbers).
  std::string command = absl::StrCat("'", mpirun->binary, "'");
  for (const std::string& arg : mpirun->args) absl::StrAppend(&command, " '", arg, "'");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot start ", command));
  std::string output;
  char buffer[4096];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  pstrain::RankSeconds slowest;
  const size_t at = output.find(kMpiRankLine);
  if (status != 0 || at == std::string::npos ||
      std::sscanf(output.c_str() + at + sizeof(kMpiRankLine) - 1, "%lf %lf %d %d", &slowest.reference,
                  &slowest.strategy, &slowest.fusion_buckets, &slowest.buckets_in_place) != 4) {
    return absl::InternalError(absl::StrCat("the mpirun of ", options.ranks, " ranks failed (", command,
                                            ", exit status ", status, "):\n", output));
  }
  return pstrain::MakeResult(options, slowest, memcpy_gbytes_per_sec, memcpy_bytes);
}

int RunAllReduce() {
  const pstrain::AllReduceBenchOptions options = AllReduceOptionsFromFlags();
  if (absl::Status s = pstrain::ValidateAllReduceBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench allreduce: " << s.message() << std::endl;
    return kExitUsage;
  }
  if (FLAGS_mpi_rank) return RunAllReduceMpiRank(options);
  if (options.backend == "mpi") {
    // A build without Open MPI says so before anything runs.
    if (absl::StatusOr<pstrain::CollectiveEntry> mpi = pstrain::CollectiveRegistry().Find("mpi"); !mpi.ok()) {
      std::cerr << "pstrain-bench allreduce: " << mpi.status().message() << std::endl;
      return kExitFailure;
    }
  }
  // Gloo always (the default backend, and beside mpi for comparison), before
  // any MPI rank exists to compete for the cores.
  pstrain::AllReduceBenchOptions gloo_options = options;
  gloo_options.backend = "gloo";
  absl::StatusOr<pstrain::AllReduceBenchResult> gloo = pstrain::RunGlooAllReduceBench(gloo_options);
  if (!gloo.ok()) {
    std::cerr << "pstrain-bench allreduce: " << gloo.status().message() << std::endl;
    return kExitFailure;
  }
  absl::StatusOr<pstrain::AllReduceBenchResult> result = gloo;
  if (options.backend == "mpi") {
    result = RunAllReduceUnderMpirun(options, gloo->memcpy_gbytes_per_sec, gloo->memcpy_buffer_bytes);
    if (!result.ok()) {
      std::cerr << "pstrain-bench allreduce: " << result.status().message() << std::endl;
      return kExitFailure;
    }
  }
  if (FLAGS_json) {
    std::string json = pstrain::FormatAllReduceBenchJson(*result);
    if (options.backend == "mpi") json.insert(json.size() - 1, ",\"gloo\":" + pstrain::FormatAllReduceBenchJson(*gloo));
    std::cout << json << std::endl;
  } else {
    std::cout << pstrain::FormatAllReduceBenchTable(*result);
    if (options.backend == "mpi") std::cout << pstrain::FormatAllReduceBenchTable(*gloo);
    std::cout << std::flush;
  }
  return kExitOk;
}

int RunTimeline() {
  pstrain::TimelineBenchOptions options;
  if (!gflags::GetCommandLineFlagInfoOrDie("steps").is_default) options.steps = FLAGS_steps;
  options.events_per_step = FLAGS_events_per_step;
  options.dir = FLAGS_dir;
  if (absl::Status s = pstrain::ValidateTimelineBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench timeline: " << s.message() << std::endl;
    return kExitUsage;
  }
  absl::StatusOr<pstrain::TimelineBenchResult> result = pstrain::RunTimelineBench(options);
  if (!result.ok()) {
    std::cerr << "pstrain-bench timeline: " << result.status().message() << std::endl;
    return kExitFailure;
  }
  std::cout << (FLAGS_json ? pstrain::FormatTimelineBenchJson(*result) + "\n"
                           : pstrain::FormatTimelineBenchTable(*result))
            << std::flush;
  return kExitOk;
}

int RunInput() {
  pstrain::bench::InputBenchOptions options;
  options.image_width = FLAGS_image_width;
  options.image_height = FLAGS_image_height;
  options.images = FLAGS_images;
  options.out_size = FLAGS_out_size;
  options.seconds = FLAGS_seconds;
  options.threads.clear();
  for (absl::string_view t : absl::StrSplit(FLAGS_threads, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(t, &v)) {
      std::cerr << "pstrain-bench input: --threads must be counts like 1,2,4, got '" << FLAGS_threads << "'"
                << std::endl;
      return kExitUsage;
    }
    options.threads.push_back(v);
  }
  if (absl::Status s = pstrain::bench::ValidateInputBenchOptions(options); !s.ok()) {
    std::cerr << "pstrain-bench input: " << s.message() << std::endl;
    return kExitUsage;
  }
  absl::StatusOr<pstrain::bench::InputBenchResult> result = pstrain::bench::RunInputBench(options);
  if (!result.ok()) {
    std::cerr << "pstrain-bench input: " << result.status().message() << std::endl;
    return kExitFailure;
  }
  std::cout << (FLAGS_json ? pstrain::bench::FormatInputBenchJson(*result) + "\n"
                           : pstrain::bench::FormatInputBenchTable(*result))
            << std::flush;
  return kExitOk;
}

int RunEmbedding() {
  pstrain::bench::EmbeddingBenchOptions o;
  // --servers, --workers and --batch_size are shared with other subcommands;
  // their defaults here are embedding's own.
  if (!gflags::GetCommandLineFlagInfoOrDie("servers").is_default) o.servers = FLAGS_servers;
  if (!gflags::GetCommandLineFlagInfoOrDie("workers").is_default) o.workers = FLAGS_workers;
  if (!gflags::GetCommandLineFlagInfoOrDie("batch_size").is_default) o.batch_size = FLAGS_batch_size;
  o.features = FLAGS_features;
  o.dim = FLAGS_dim;
  o.cardinality = FLAGS_cardinality;
  o.zipf = FLAGS_zipf;
  o.transport = FLAGS_transport;
  o.optimizer = FLAGS_optimizer;
  o.wire_dtype = FLAGS_wire_dtype;
  o.seconds = FLAGS_seconds;
  o.warmup_rounds = FLAGS_warmup_rounds;
  if (absl::Status s = pstrain::bench::ValidateEmbeddingBenchOptions(o); !s.ok()) {
    std::cerr << "pstrain-bench embedding: " << s.message() << std::endl;
    return kExitUsage;
  }
  absl::StatusOr<pstrain::bench::EmbeddingBenchResult> result = pstrain::bench::RunEmbeddingBench(o);
  if (!result.ok()) {
    std::cerr << "pstrain-bench embedding: " << result.status().message() << std::endl;
    return kExitFailure;
  }
  std::cout << (FLAGS_json ? pstrain::bench::FormatEmbeddingBenchJson(o, *result) + "\n"
                           : pstrain::bench::FormatEmbeddingBenchTable(o, *result))
            << std::flush;
  return kExitOk;
}

struct Subcommand {
  const char* name;
  const char* summary;  // null: internal, not listed
  int (*run)();
};

// The one list of subcommands.
constexpr Subcommand kSubcommands[] = {
    {"ps", "PS push/pull goodput over a real local cluster, vs single-thread memcpy and plain TCP", &RunPs},
    {"model", "training steps of a zoo model in one process: images/sec, GFLOP/s vs oneDNN sgemm, peak RSS", &RunModel},
    {"allreduce",
     "all-reduce over gloo or mpi, the library call beside the strategy's fused path: bus bandwidth vs memcpy",
     &RunAllReduce},
    {"timeline", "the crash-safe timeline's flush as its file grows, vs a plain append of the same bytes",
     &RunTimeline},
    {"input", "JPEG decode + ResNet augmentation per thread count, vs a plain full-size TurboJPEG decode", &RunInput},
    {"embedding",
     "an embedding table's lookups and updates in process vs a hash map, then sparse pull/push over the PS",
     &RunEmbedding},
    {"ps-role", nullptr, &RunPsRole},
};

void PrintSubcommands(std::ostream& os) {
  os << "usage: pstrain-bench <subcommand> [--flags]\nsubcommands:\n";
  for (const Subcommand& c : kSubcommands) {
    if (c.summary != nullptr) os << "  " << c.name << "\t" << c.summary << "\n";
  }
  os << "flags: pstrain-bench <subcommand> --help" << std::endl;
}

// What `pstrain-bench <name> --help` shows: the flags whose description
// begins with "<name>: " (or names it after a "; "), and those of every
// subcommand.
std::function<bool(const std::string&)> FlagsOf(const std::string& name) {
  return [prefix = name + ": "](const std::string& description) {
    return absl::StartsWith(description, prefix) || absl::StrContains(description, "; " + prefix) ||
           absl::StartsWith(description, "every subcommand");
  };
}

}  // namespace

int main(int argc, char** argv) {
  pstrain::TuneAllocatorForBulkTraffic();
  pstrain::SetLockOrderCheckingFromEnvironment();
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

  const std::string usage =
      command->summary == nullptr ? "(internal)" : absl::StrCat("[--flags]\n", command->summary, ".");
  pstrain::ParseCommandLine(
      {.program = "pstrain-bench " + name, .usage = usage, .own_files = {"bench_main"}, .shows = FlagsOf(name)}, &argc,
      &argv);
  FLAGS_logtostderr = true;  // stdout carries only results
  if (argc > 1) {
    std::cerr << "pstrain-bench " << name << ": unexpected argument '" << argv[1] << "'" << std::endl;
    return kExitUsage;
  }
  google::InitGoogleLogging("pstrain-bench");
  return command->run();
}
