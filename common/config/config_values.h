// The accepted values of every enumerated string field of ExperimentConfig,
// kept in one place.
//
// A new strategy, optimizer, transport or data source adds its name here (and
// to docs/CONFIG.md); ValidateExperimentConfig then accepts it. Model names
// are not listed here: they come from the model zoo's registry and are passed
// to ValidateExperimentConfig by the caller.
#pragma once

#include <array>
#include <string_view>

namespace pstrain::config_values {

// optimizer.name
inline constexpr std::array<std::string_view, 2> kOptimizers = {"sgd", "momentum"};
// optimizer.lr_schedule
inline constexpr std::array<std::string_view, 3> kLrSchedules = {"constant", "step", "cosine"};
// data.source
inline constexpr std::array<std::string_view, 2> kDataSources = {"fashion_mnist", "synthetic"};
// variable_update
inline constexpr std::array<std::string_view, 5> kVariableUpdates = {
    "parameter_server", "replicated", "independent", "distributed_replicated", "allreduce"};
// consistency
inline constexpr std::array<std::string_view, 3> kConsistencies = {"sync", "async", "ssp"};
// transport
inline constexpr std::array<std::string_view, 1> kTransports = {"grpc"};
// placement
inline constexpr std::array<std::string_view, 3> kPlacements = {"round_robin", "greedy", "partitioned"};
// device
inline constexpr std::array<std::string_view, 2> kDevices = {"cpu", "gpu"};
// local_parameter_device
// gpu is refused at validation when device is cpu.
inline constexpr std::array<std::string_view, 2> kLocalParameterDevices = {"cpu", "gpu"};
// all_reduce_spec (replicated, distributed_replicated): "" means pscpu.
// nccl is the GPU all-reduce: refused on CPU devices.
inline constexpr std::array<std::string_view, 4> kAllReduceSpecs = {"", "pscpu", "none", "nccl"};

// Files data.source fashion_mnist needs in data.path.
inline constexpr std::array<std::string_view, 4> kFashionMnistFiles = {
    "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz"};

// Bounds of max_message_bytes: at least 1 MiB, at most gRPC's limit.
inline constexpr long long kMinMessageBytes = 1LL << 20;
inline constexpr long long kMaxMessageBytes = 2147483647LL;

// Devices per worker process supported so far.
inline constexpr int kMaxDevicesPerWorker = 16;

}  // namespace pstrain::config_values
