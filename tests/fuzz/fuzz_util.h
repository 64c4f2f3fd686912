// Shared by the fuzz targets (tests/fuzz/*_fuzz.cc, docs/FUZZING.md): the
// check macro, a reader that carves an input into fields, the length-prefixed
// record format several targets use, a scratch directory, and the tiny model
// whose variables the PS and checkpoint targets install.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/placement.h"
#include "common/tensor.h"
#include "proto/config.pb.h"

namespace pstrain::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s: %s\n", file, line, condition, message.c_str());
  std::fflush(stderr);
  std::abort();
}

// FUZZ_CHECK(condition, message parts...): aborts (a crash libFuzzer saves)
// with the message when `condition` is false.
#define FUZZ_CHECK(condition, ...)                                                                      \
  do {                                                                                                  \
    if (!(condition)) ::pstrain::fuzz::Fail(__FILE__, __LINE__, #condition, absl::StrCat(__VA_ARGS__)); \
  } while (0)

// An error status must say what was wrong: a non-empty message.
inline void CheckErrorExplains(const absl::Status& status, absl::string_view what) {
  FUZZ_CHECK(status.ok() || !status.message().empty(), what, ": error ", status.ToString(), " has no message");
}

// Reads fields off the front of an input; past the end it yields zeros and
// empty strings.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(reinterpret_cast<const char*>(data)), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  size_t left() const { return size_ - pos_; }
  uint8_t U8() { return pos_ < size_ ? static_cast<uint8_t>(data_[pos_++]) : 0; }
  uint16_t U16() {
    uint16_t lo = U8();
    return static_cast<uint16_t>(lo | (U8() << 8));
  }
  absl::string_view Bytes(size_t n) {
    n = std::min(n, left());
    absl::string_view out(data_ + pos_, n);
    pos_ += n;
    return out;
  }
  // A record: little-endian uint16 length, then that many bytes.
  absl::string_view Record() { return Bytes(U16()); }
  absl::string_view Rest() { return Bytes(left()); }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// The record format's writer (seed generators).
inline std::string EncodeRecord(absl::string_view bytes) {
  const size_t n = std::min<size_t>(bytes.size(), 0xffff);
  std::string out;
  out.push_back(static_cast<char>(n & 0xff));
  out.push_back(static_cast<char>(n >> 8));
  out.append(bytes.data(), n);
  return out;
}

// A pseudo-random sequence from an input byte (splits frames into pieces).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// A directory of this process's own for files a target writes (on tmpfs when
// there is one), removed at exit; those of processes that are gone (a crash
// skips the removal) are removed when the next one starts.
inline const std::string& ScratchDir() {
  static const std::string* dir = [] {
    namespace fs = std::filesystem;
    static const std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(base, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("pstrain-fuzz-", 0) == 0 && !fs::exists("/proc/" + name.substr(13), ec)) {
        fs::remove_all(e.path(), ec);
      }
    }
    auto* d = new std::string(absl::StrCat(base, "/pstrain-fuzz-", getpid()));
    fs::create_directories(*d);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(absl::StrCat(base, "/pstrain-fuzz-", getpid()), ignored);
    });
    return d;
  }();
  return *dir;
}

// The tiny model of the PS and checkpoint targets and of their recorded
// seeds (tests/fuzz/record_seeds.cc trains it and checks its variables are
// these): an mlp with hidden_units [8] on synthetic [1, 4, 4] inputs and 4
// classes, 2 PS shards, greedy placement, momentum.
inline constexpr int kTinyShards = 2;
inline constexpr int kTinyWorkers = 2;

inline std::vector<VariableShape> TinyModelVariables() {
  return {{"hidden1/weights", {16, 8}}, {"hidden1/bias", {8}}, {"logits/weights", {8, 4}}, {"logits/bias", {4}}};
}

inline std::vector<VariablePart> TinyModelParts() {
  auto parts = PlanPlacement(TinyModelVariables(), kTinyShards, "greedy", 0);
  FUZZ_CHECK(parts.ok(), parts.status().ToString());
  return *parts;
}

inline ExperimentConfig TinyModelConfig() {
  ExperimentConfig config;
  config.set_name("fuzz_seeds");
  config.mutable_model()->set_name("mlp");
  config.mutable_model()->add_hidden_units(8);
  config.mutable_model()->add_input_shape(1);
  config.mutable_model()->add_input_shape(4);
  config.mutable_model()->add_input_shape(4);
  config.mutable_model()->set_num_classes(4);
  config.mutable_data()->set_source("synthetic");
  config.mutable_data()->set_synthetic_examples(64);
  config.mutable_optimizer()->set_name("momentum");
  config.mutable_train()->set_batch_size_per_device(4);
  config.mutable_train()->set_steps(4);
  config.mutable_train()->set_warmup_steps(0);
  config.mutable_train()->set_evaluate(false);
  config.set_consistency("sync");
  config.set_placement("greedy");
  return config;
}

}  // namespace pstrain::fuzz
