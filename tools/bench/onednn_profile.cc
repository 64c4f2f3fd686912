#include "tools/bench/onednn_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace pstrain::bench {
namespace {

// Runs `fn` with file descriptor 1 redirected to a temporary file and returns
// what was written there.
absl::StatusOr<std::string> CaptureStdout(const std::function<void()>& fn) {
  std::fflush(stdout);
  char path[] = "/tmp/pstrain_bench_verbose_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return absl::InternalError("mkstemp failed");
  const int saved = ::dup(1);
  if (saved < 0 || ::dup2(fd, 1) < 0) {
    ::close(fd);
    ::unlink(path);
    return absl::InternalError("cannot redirect stdout");
  }
  fn();
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

// The integer after `key` in a oneDNN problem descriptor such as
// "mb32_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1"; `fallback` when
// absent. A key matches at the start, after '_' or after a digit (keys
// follow each other's numbers: "g2ic4oc4", "ih56oh56kh3").
int64_t ProblemInt(const std::string& desc, const std::string& key, int64_t fallback) {
  size_t pos = 0;
  while ((pos = desc.find(key, pos)) != std::string::npos) {
    const bool boundary = pos == 0 || desc[pos - 1] == '_' || std::isdigit(static_cast<unsigned char>(desc[pos - 1]));
    const size_t digits = pos + key.size();
    if (boundary && digits < desc.size() && std::isdigit(static_cast<unsigned char>(desc[digits]))) {
      return std::strtoll(desc.c_str() + digits, nullptr, 10);
    }
    pos += 1;
  }
  return fallback;
}

// FLOPs (multiply-add = 2) of one convolution or inner product execution.
double PrimitiveFlops(const std::string& kind, const std::string& desc) {
  const int64_t mb = ProblemInt(desc, "mb", 1);
  const int64_t ic = ProblemInt(desc, "ic", 1), oc = ProblemInt(desc, "oc", 1);
  if (kind == "convolution") {
    const int64_t g = ProblemInt(desc, "g", 1);
    const int64_t oh = ProblemInt(desc, "oh", 1), ow = ProblemInt(desc, "ow", 1);
    const int64_t kh = ProblemInt(desc, "kh", 1), kw = ProblemInt(desc, "kw", 1);
    return 2.0 * mb * oc * oh * ow * (ic / g) * kh * kw;
  }
  if (kind == "inner_product") {
    const int64_t ih = ProblemInt(desc, "ih", 1), iw = ProblemInt(desc, "iw", 1);
    return 2.0 * mb * oc * ic * ih * iw;
  }
  return 0;
}

// The layer type a primitive execution belongs to.
std::string LayerTypeOf(const std::string& kind, const std::string& alg, const std::string& desc) {
  if (kind == "convolution") return "conv2d";
  if (kind == "inner_product") return "dense";
  if (kind == "batch_normalization") return "batch_norm";
  if (kind == "softmax") return "softmax_cross_entropy";
  if (kind == "eltwise") return alg == "eltwise_relu" ? "relu" : absl::StrCat("eltwise:", alg);
  if (kind == "pooling") {
    if (alg == "pooling_max") return "max_pool";
    const bool global = ProblemInt(desc, "oh", 0) == 1 && ProblemInt(desc, "ow", 0) == 1 &&
                        ProblemInt(desc, "kh", -1) == ProblemInt(desc, "ih", -2) &&
                        ProblemInt(desc, "kw", -1) == ProblemInt(desc, "iw", -2);
    return global ? "global_avg_pool" : "avg_pool";
  }
  if (kind == "lrn") return "lrn";
  if (kind == "concat") return "concat";
  if (kind == "sum") return "sum";
  if (kind == "binary") return absl::StrCat("binary:", alg);
  if (kind == "reorder") return "reorder";
  return kind;
}

struct Accumulator {
  double ms = 0;
  int64_t calls = 0;
  double flops = 0;
  std::set<std::string> impls;
};

// One primitive execution from a verbose line.
struct Execution {
  std::string kind;  // the primitive, without a version suffix ("pooling", not "pooling_v2")
  std::string impl;
  std::string prop;
  std::string alg;   // from the attributes ("alg:eltwise_relu"), or ""
  std::string desc;  // the problem descriptor
  double ms = 0;
};

// An "exec" line of oneDNN's verbose output; nullopt for any other line.
std::optional<Execution> ParseExecution(absl::string_view line) {
  if (!absl::StartsWith(line, "onednn_verbose,exec,") && !absl::StartsWith(line, "dnnl_verbose,exec,")) {
    return std::nullopt;
  }
  // onednn_verbose,exec,cpu,<primitive>,<impl>,<prop>,<mds>,<attrs>,<aux>,<problem>,<ms>
  std::vector<std::string> f = absl::StrSplit(line, ',');
  if (f.size() < 11) return std::nullopt;
  Execution e;
  // oneDNN 2.x names newer primitive versions "pooling_v2", "softmax_v2".
  e.kind = f[3];
  if (const size_t v = e.kind.rfind("_v");
      v != std::string::npos && v + 2 < e.kind.size() && std::isdigit(static_cast<unsigned char>(e.kind[v + 2]))) {
    e.kind.resize(v);
  }
  e.impl = f[4];
  e.prop = f[5];
  e.desc = f[f.size() - 2];
  if (!absl::SimpleAtod(f.back(), &e.ms)) return std::nullopt;
  for (size_t i = 6; i + 1 < f.size(); ++i) {
    for (absl::string_view part : absl::StrSplit(f[i], ' ')) {
      if (absl::StartsWith(part, "alg:")) e.alg = std::string(part.substr(4));
    }
  }
  return e;
}

using Clock = std::chrono::steady_clock;

}  // namespace

std::vector<ProfileRow> ParseOnednnVerbose(const std::string& text, int64_t steps, double* dnnl_ms_per_step) {
  // Key: (layer type, phase, pass).
  std::map<std::tuple<std::string, std::string, std::string>, Accumulator> acc;
  std::string phase = "forward";
  double total_ms = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const std::optional<Execution> e = ParseExecution(line);
    if (!e.has_value()) continue;
    const std::string type = LayerTypeOf(e->kind, e->alg, e->desc);
    if (e->kind == "softmax") {
      phase = "loss";
    } else if (phase == "loss") {
      phase = "backward";
    }
    // A new step starts with a forward-propagation primitive after backward.
    if (phase == "backward" && absl::StartsWith(e->prop, "forward")) phase = "forward";
    const bool by_pass = e->kind == "convolution" || e->kind == "inner_product";
    Accumulator& a = acc[{type, phase, by_pass ? e->prop : ""}];
    a.ms += e->ms;
    a.calls += 1;
    a.flops += PrimitiveFlops(e->kind, e->desc);
    a.impls.insert(e->impl);
    total_ms += e->ms;
  }
  std::vector<ProfileRow> rows;
  for (const auto& [key, a] : acc) {
    ProfileRow r;
    std::tie(r.layer_type, r.phase, r.pass) = key;
    r.ms_per_step = a.ms / steps;
    r.calls_per_step = static_cast<double>(a.calls) / steps;
    r.gflop_per_step = a.flops / steps / 1e9;
    r.implementations = absl::StrJoin(a.impls, ",");
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(),
            [](const ProfileRow& x, const ProfileRow& y) { return x.ms_per_step > y.ms_per_step; });
  *dnnl_ms_per_step = total_ms / steps;
  return rows;
}

absl::StatusOr<OnednnProfile> ProfileOnednnSteps(int64_t steps, const std::function<void()>& step) {
  double wall = 0;
  absl::StatusOr<std::string> text = CaptureStdout([&] {
    dnnl::set_verbose(1);
    const auto t0 = Clock::now();
    for (int64_t s = 0; s < steps; ++s) step();
    wall = std::chrono::duration<double>(Clock::now() - t0).count();
    dnnl::set_verbose(0);
  });
  if (!text.ok()) return text.status();
  OnednnProfile profile;
  profile.rows = ParseOnednnVerbose(*text, steps, &profile.dnnl_ms);
  profile.step_ms = wall * 1e3 / steps;
  return profile;
}

}  // namespace pstrain::bench
