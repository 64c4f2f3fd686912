#include "worker/run/observers/learning_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr size_t kLargestWindow = 50;
constexpr double kNearChance = 0.01;  // relative: a loss within 1% of chance's
constexpr double kLeastFall = 0.01;   // relative: the loss must fall by 1%
constexpr double kAccuracyMargin = 0.02;
constexpr double kAucMargin = 0.02;
constexpr char kHint[] = " (check the learning rate, the labels and data.normalization)";

double Mean(std::vector<float>::const_iterator first, std::vector<float>::const_iterator last) {
  return std::accumulate(first, last, 0.0) / std::max<std::ptrdiff_t>(1, last - first);
}

}  // namespace

Chance ChanceOf(const Dataset& data) {
  Chance chance;
  chance.num_classes = data.num_classes;
  chance.uniform_loss = std::log(std::max(1, data.num_classes));
  chance.prior_loss = std::numeric_limits<double>::quiet_NaN();
  chance.best_constant_accuracy = 1.0 / std::max(1, data.num_classes);
  chance.random_labels = data.random_labels;
  if (data.labels.empty() || data.num_classes <= 0) return chance;
  std::vector<int64_t> counts(data.num_classes, 0);
  for (int32_t label : data.labels) {
    if (label >= 0 && label < data.num_classes) ++counts[label];
  }
  const double n = static_cast<double>(data.labels.size());
  chance.prior_loss = 0;
  for (int64_t c : counts) {
    if (c > 0) chance.prior_loss -= c / n * std::log(c / n);
  }
  chance.best_constant_accuracy = *std::max_element(counts.begin(), counts.end()) / n;
  return chance;
}

std::optional<std::string> TestAtChance(const Evaluation& evaluation, const Chance& test) {
  const EvalResult& r = evaluation.result;
  if (r.examples <= 0 || test.random_labels) return std::nullopt;
  if (std::isfinite(r.auc)) {
    if (std::abs(r.auc - 0.5) >= kAucMargin) return std::nullopt;
    return absl::StrFormat("not learning: test AUC %.4f after %d steps is at chance (0.5)%s", r.auc, evaluation.step,
                           kHint);
  }
  if (evaluation.accuracy() > test.best_constant_accuracy + kAccuracyMargin) return std::nullopt;
  return absl::StrFormat(
      "not learning: test accuracy %.4f after %d steps is at chance (a constant guess scores %.4f)%s",
      evaluation.accuracy(), evaluation.step, test.best_constant_accuracy, kHint);
}

absl::StatusOr<std::unique_ptr<LearningCheck>> LearningCheck::Create(const Options& options, const Chance& train,
                                                                     MetricRegistry* registry, std::ostream& out) {
  Gauge* gauge = nullptr;
  if (registry != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(
        gauge, registry->RegisterGauge("pstrain_worker_not_learning",
                                       "1 once the learning check found the training loss at chance or not falling.",
                                       {{"worker", absl::StrCat(options.worker)}}));
  }
  return std::unique_ptr<LearningCheck>(new LearningCheck(options, train, gauge, out));
}

LearningCheck::LearningCheck(const Options& options, const Chance& chance, Gauge* gauge, std::ostream& out)
    : options_(options), chance_(chance), gauge_(gauge), out_(out) {}

void LearningCheck::OnStepEnd(const StepOutcome& outcome) {
  if (!outcome.ok() || judged_) return;
  if (first_step_ < 0) {
    first_step_ = outcome.step;
    const int64_t steps = options_.check_steps;
    check_at_ = options_.total_steps - first_step_ >= steps ? first_step_ + steps - 1 : -1;
    window_ = std::clamp<size_t>(static_cast<size_t>(steps / 4), 1, kLargestWindow);
  }
  if (check_at_ < 0) return;
  losses_.push_back(outcome.loss);
  if (outcome.step < check_at_) return;
  judged_ = true;
  warning_ = Judge(outcome.step);
  if (!warning_.has_value()) return;
  out_ << "WARNING: worker " << options_.worker << ": " << *warning_
       << (options_.stop ? "; stopping (train.stop_if_not_learning)" : "") << std::endl;
  if (gauge_ != nullptr) gauge_->Set(1);
}

std::optional<std::string> LearningCheck::Judge(int64_t step) const {
  const size_t w = std::min(window_, losses_.size());
  const double recent = Mean(losses_.end() - w, losses_.end());
  const int64_t from = step - static_cast<int64_t>(w) + 1;
  const std::string what = absl::StrFormat("training loss %.4f over steps %d-%d", recent, from, step);
  for (const auto& [loss, name] :
       {std::pair(chance_.uniform_loss,
                  absl::StrFormat("ln(%d) = %.4f, a uniform guess", chance_.num_classes, chance_.uniform_loss)),
        std::pair(chance_.prior_loss, absl::StrFormat("%.4f, the entropy of the labels", chance_.prior_loss))}) {
    if (std::isfinite(loss) && loss > 0 && std::abs(recent - loss) <= kNearChance * loss) {
      return absl::StrCat("not learning: ", what, " is within 1% of ", name, kHint);
    }
  }
  if (first_step_ != 0) return std::nullopt;
  const double first = Mean(losses_.begin(), losses_.begin() + w);
  if (recent < (1 - kLeastFall) * first) return std::nullopt;
  return absl::StrCat("not learning: ", what,
                      absl::StrFormat(" has not fallen from %.4f over steps 0-%d", first, static_cast<int64_t>(w) - 1),
                      kHint);
}

void LearningCheck::AddToReport(WorkerReport* report) const {
  if (warning_.has_value()) report->add_warnings(*warning_);
}

}  // namespace pstrain
