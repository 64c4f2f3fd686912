#include "common/telemetry/metric_registry.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

bool IsLetterOrUnderscore(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-zA-Z_:][a-zA-Z0-9_:]*
bool IsValidMetricName(std::string_view name) {
  if (name.empty() || IsDigit(name[0])) return false;
  for (char c : name) {
    if (!IsLetterOrUnderscore(c) && !IsDigit(c) && c != ':') return false;
  }
  return true;
}

// [a-zA-Z_][a-zA-Z0-9_]*, not beginning with "__".
bool IsValidLabelName(std::string_view name) {
  if (name.empty() || IsDigit(name[0]) || name.substr(0, 2) == "__") return false;
  for (char c : name) {
    if (!IsLetterOrUnderscore(c) && !IsDigit(c)) return false;
  }
  return true;
}

// Help text escapes backslash and newline; label values also the double quote.
std::string Escape(std::string_view text, bool escape_quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` (std::map keeps the names sorted), or "" for no labels.
std::string RenderLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  return absl::StrCat("{",
                      absl::StrJoin(labels, ",",
                                    [](std::string* out, const auto& label) {
                                      absl::StrAppend(out, label.first, "=\"", Escape(label.second, true), "\"");
                                    }),
                      "}");
}

// The shortest text that reads back as `value` (Go's strconv.ParseFloat,
// which Prometheus uses, accepts it), with Prometheus' spelling of the
// non-finite values.
std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  CHECK(error == std::errc());
  return std::string(buffer, end);
}

}  // namespace

void Counter::Add(double delta) {
  CHECK(delta >= 0) << "Counter::Add(" << delta << "): a counter only goes up";
  value_.fetch_add(delta, std::memory_order_relaxed);
}

void Counter::AdvanceTo(double total) {
  const double now = value();
  if (total > now) Add(total - now);
}

absl::StatusOr<Counter*> MetricRegistry::RegisterCounter(std::string_view name, std::string_view help,
                                                         const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Counter* counter = &counters_.emplace_back();
  absl::Status status = Register(name, help, Type::kCounter, labels, [counter] { return counter->value(); });
  if (!status.ok()) {
    counters_.pop_back();
    return status;
  }
  return counter;
}

absl::StatusOr<Gauge*> MetricRegistry::RegisterGauge(std::string_view name, std::string_view help,
                                                     const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Gauge* gauge = &gauges_.emplace_back();
  absl::Status status = Register(name, help, Type::kGauge, labels, [gauge] { return gauge->value(); });
  if (!status.ok()) {
    gauges_.pop_back();
    return status;
  }
  return gauge;
}

absl::Status MetricRegistry::RegisterCallbackGauge(std::string_view name, std::string_view help,
                                                   const MetricLabels& labels, std::function<double()> read) {
  if (!read) return absl::InvalidArgumentError(absl::StrFormat("metric %s: the callback is empty", name));
  absl::MutexLock lock(&mu_);
  return Register(name, help, Type::kGauge, labels, std::move(read));
}

absl::Status MetricRegistry::Register(std::string_view name, std::string_view help, Type type,
                                      const MetricLabels& labels, std::function<double()> read) {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metric name \"%s\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*", name));
  }
  if (type == Type::kCounter && !name.ends_with("_total")) {
    return absl::InvalidArgumentError(absl::StrFormat("counter name \"%s\" must end in \"_total\"", name));
  }
  for (const auto& [label, value] : labels) {
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("metric %s: label name \"%s\" is invalid: it must match [a-zA-Z_][a-zA-Z0-9_]* and "
                          "not begin with \"__\"",
                          name, label));
    }
  }
  auto series = std::make_shared<Series>(Series{RenderLabels(labels), std::move(read)});
  auto it = families_.find(name);
  if (it == families_.end()) {
    families_.emplace(std::string(name), Family{type, std::string(help), {std::move(series)}});
    return absl::OkStatus();
  }
  Family& family = it->second;
  if (family.type != type) {
    return absl::AlreadyExistsError(absl::StrFormat("metric %s is already registered as a %s", name,
                                                    family.type == Type::kCounter ? "counter" : "gauge"));
  }
  if (family.help != help) {
    return absl::AlreadyExistsError(
        absl::StrFormat("metric %s is already registered with other help text (\"%s\")", name, family.help));
  }
  for (const auto& existing : family.series) {
    if (existing->labels == series->labels) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric ", std::string(name), series->labels, " is already registered"));
    }
  }
  family.series.push_back(std::move(series));
  return absl::OkStatus();
}

std::string MetricRegistry::RenderText() const {
  // Copied under the lock, read without it: a callback may take its own
  // locks, and a thread holding one of them may be registering a metric.
  std::vector<std::pair<std::string, Family>> families;
  {
    absl::MutexLock lock(&mu_);
    families.assign(families_.begin(), families_.end());
  }
  std::string out;
  for (const auto& [name, family] : families) {
    absl::StrAppend(&out, "# HELP ", name, " ", Escape(family.help, false), "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", family.type == Type::kCounter ? "counter" : "gauge", "\n");
    for (const auto& series : family.series) {
      absl::StrAppend(&out, name, series->labels, " ", FormatValue(series->read()), "\n");
    }
  }
  return out;
}

}  // namespace pstrain
