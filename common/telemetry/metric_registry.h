// MetricRegistry: the metrics one role exposes on /metrics, rendered in the
// Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/).
//
// A metric is a name, help text, a type (counter or gauge) and constant
// labels (e.g. role="ps", index="0"). Several metrics may share a name (one
// family) when they share type and help and differ in their labels.
//
// Names must match [a-zA-Z_:][a-zA-Z0-9_:]* and counter names must end in
// "_total"; label names must match [a-zA-Z_][a-zA-Z0-9_]* and not begin with
// "__" (reserved by Prometheus). Registering an invalid or duplicate metric
// returns InvalidArgument or AlreadyExists saying which and why.
//
// Thread safety: every method may be called from any thread. Counter::Add
// and Gauge::Set are lock-free. Metrics are never removed: the pointers the
// registry hands out stay valid for the registry's lifetime.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace pstrain {

// Constant labels of one metric: label name -> value (any UTF-8 text).
using MetricLabels = std::map<std::string, std::string>;

// A monotonic count (steps, bytes, requests). Starts at 0.
class Counter {
 public:
  // Adds `delta`, which must be >= 0 (CHECKed; NaN is rejected too).
  void Add(double delta = 1);
  // Raises the counter to `total`, a running total kept elsewhere (bytes
  // moved so far); a lower `total` leaves it as it is. For one writer: two
  // concurrent calls may both add the same difference.
  void AdvanceTo(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (queue length, learning rate). Starts at 0.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // Registers a counter (name ending in "_total"). The pointer is owned by
  // the registry.
  absl::StatusOr<Counter*> RegisterCounter(std::string_view name, std::string_view help,
                                           const MetricLabels& labels = {});
  // Registers a gauge. The pointer is owned by the registry.
  absl::StatusOr<Gauge*> RegisterGauge(std::string_view name, std::string_view help, const MetricLabels& labels = {});
  // Registers a gauge whose value is `read()`, evaluated at every scrape
  // (RenderText) without the registry's lock held. `read` must be
  // thread-safe, quick, and valid for as long as the registry is rendered.
  absl::Status RegisterCallbackGauge(std::string_view name, std::string_view help, const MetricLabels& labels,
                                     std::function<double()> read);

  // Every metric in the text exposition format 0.0.4: families sorted by
  // name, each with "# HELP" and "# TYPE" lines, then one sample line per
  // metric (labels sorted by name, values escaped; +Inf, -Inf and NaN as
  // Prometheus spells them).
  std::string RenderText() const;

 private:
  enum class Type { kCounter, kGauge };
  struct Series {
    std::string labels;            // rendered: `{a="x",b="y"}`, or empty
    std::function<double()> read;  // the current value
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<std::shared_ptr<const Series>> series;
  };

  // Validates and adds one series to the family `name`.
  absl::Status Register(std::string_view name, std::string_view help, Type type, const MetricLabels& labels,
                        std::function<double()> read) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
  std::deque<Counter> counters_ ABSL_GUARDED_BY(mu_);  // deque: addresses stay stable
  std::deque<Gauge> gauges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
