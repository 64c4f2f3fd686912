// The learning check (worker/run/observers/learning_check.h) driven by
// hand-made losses: at chance, not falling, falling; resumed and short runs;
// the click rate's entropy; the WARNING line, the report, the metric, the
// stop; and final evaluations at chance. Plus AddReports carrying the
// workers' warnings into the run's record.
#include "worker/run/observers/learning_check.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/telemetry/metric_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/run/run_record.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

Dataset Labelled(int classes, std::vector<int32_t> labels) {
  Dataset d;
  d.num_classes = classes;
  d.num_examples = static_cast<int64_t>(labels.size());
  d.labels = std::move(labels);
  return d;
}

// Ten balanced classes, the labels decoded batch by batch (not known up front).
Chance TenClasses() {
  Dataset d;
  d.num_classes = 10;
  return ChanceOf(d);
}

StepOutcome Step(int64_t step, float loss) {
  StepOutcome o;
  o.step = step;
  o.loss = loss;
  return o;
}

struct Checked {
  std::unique_ptr<LearningCheck> check;
  std::ostringstream out;
  MetricRegistry registry;
};

// Steps [first, first + n) with loss(step) through a check of 200 steps.
void Feed(Checked& c, int64_t first, int64_t n, const std::function<float(int64_t)>& loss) {
  for (int64_t s = first; s < first + n; ++s) c.check->OnStepEnd(Step(s, loss(s)));
}

std::unique_ptr<Checked> Make(const Chance& chance, int64_t total_steps, bool stop = false) {
  auto c = std::make_unique<Checked>();
  LearningCheck::Options o;
  o.check_steps = 200;
  o.total_steps = total_steps;
  o.stop = stop;
  o.worker = 1;
  absl::StatusOr<std::unique_ptr<LearningCheck>> check = LearningCheck::Create(o, chance, &c->registry, c->out);
  EXPECT_TRUE(check.ok()) << check.status();
  c->check = std::move(*check);
  return c;
}

TEST(LearningCheckTest, ALossAtLnOfTheClassesIsFlaggedOnceWithTheMetricAndTheReport) {
  auto c = Make(TenClasses(), 1000);
  Feed(*c, 0, 400, [](int64_t s) { return std::log(10.0f) + ((s % 2) ? 0.003f : -0.003f); });
  ASSERT_TRUE(c->check->warning().has_value());
  EXPECT_THAT(*c->check->warning(), HasSubstr("not learning: training loss 2.3026 over steps 150-199 is within 1% "
                                              "of ln(10) = 2.3026, a uniform guess"));
  const std::string printed = c->out.str();
  EXPECT_THAT(printed, HasSubstr("WARNING: worker 1: not learning"));
  EXPECT_EQ(std::count(printed.begin(), printed.end(), '\n'), 1) << printed;
  EXPECT_THAT(c->registry.RenderText(), HasSubstr("pstrain_worker_not_learning{worker=\"1\"} 1"));
  WorkerReport report;
  c->check->AddToReport(&report);
  ASSERT_EQ(report.warnings_size(), 1);
  EXPECT_EQ(report.warnings(0), *c->check->warning());
  EXPECT_FALSE(c->check->stop()) << "stop only with train.stop_if_not_learning";
}

TEST(LearningCheckTest, AFallingLossIsNotFlagged) {
  auto c = Make(TenClasses(), 1000);
  Feed(*c, 0, 1000, [](int64_t s) { return 2.3f * std::exp(-s / 150.0f) + 0.3f; });
  EXPECT_FALSE(c->check->warning().has_value()) << *c->check->warning();
  EXPECT_THAT(c->registry.RenderText(), HasSubstr("pstrain_worker_not_learning{worker=\"1\"} 0"));
  WorkerReport report;
  c->check->AddToReport(&report);
  EXPECT_EQ(report.warnings_size(), 0);
}

// A learning rate of 0 with an initial loss away from chance's.
TEST(LearningCheckTest, ALossThatDoesNotFallFromStepZeroIsFlaggedAndStopsWhenAsked) {
  auto c = Make(TenClasses(), 1000, /*stop=*/true);
  Feed(*c, 0, 199, [](int64_t) { return 1.7f; });
  EXPECT_FALSE(c->check->warning().has_value()) << "judged at step 199, not before";
  Feed(*c, 199, 1, [](int64_t) { return 1.7f; });
  ASSERT_TRUE(c->check->warning().has_value());
  EXPECT_THAT(*c->check->warning(), HasSubstr("training loss 1.7000 over steps 150-199 has not fallen from 1.7000 "
                                              "over steps 0-49"));
  EXPECT_TRUE(c->check->stop());
  EXPECT_THAT(c->out.str(), HasSubstr("; stopping (train.stop_if_not_learning)"));
}

// Resumed from a checkpoint the loss may be flat already: only chance counts.
TEST(LearningCheckTest, ARestoredRunIsJudgedAgainstChanceOnly) {
  auto c = Make(TenClasses(), 5000);
  Feed(*c, 3000, 400, [](int64_t) { return 0.4f; });
  EXPECT_FALSE(c->check->warning().has_value());
  auto at_chance = Make(TenClasses(), 5000);
  Feed(*at_chance, 3000, 400, [](int64_t) { return std::log(10.0f); });
  ASSERT_TRUE(at_chance->check->warning().has_value());
  EXPECT_THAT(*at_chance->check->warning(), HasSubstr("over steps 3150-3199"));
}

TEST(LearningCheckTest, ARunShorterThanTheCheckIsNotJudged) {
  auto c = Make(TenClasses(), 150);
  Feed(*c, 0, 150, [](int64_t) { return std::log(10.0f); });
  EXPECT_FALSE(c->check->warning().has_value());
}

// A click model that learned only the click rate: the labels' entropy.
TEST(LearningCheckTest, AClickModelAtTheLabelsEntropyIsFlagged) {
  std::vector<int32_t> labels(1000, 0);
  for (int i = 0; i < 250; ++i) labels[i] = 1;
  const Chance chance = ChanceOf(Labelled(2, labels));
  const double entropy = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  EXPECT_NEAR(chance.prior_loss, entropy, 1e-12);
  EXPECT_DOUBLE_EQ(chance.best_constant_accuracy, 0.75);
  auto c = Make(chance, 1000);
  Feed(*c, 0, 200, [&](int64_t s) { return s < 50 ? std::log(2.0f) : static_cast<float>(entropy); });
  ASSERT_TRUE(c->check->warning().has_value());
  EXPECT_THAT(*c->check->warning(), HasSubstr("within 1% of 0.5623, the entropy of the labels"));
  auto learned = Make(chance, 1000);
  Feed(*learned, 0, 200, [&](int64_t s) { return s < 50 ? std::log(2.0f) : static_cast<float>(0.85 * entropy); });
  EXPECT_FALSE(learned->check->warning().has_value());
}

Evaluation Evaluated(int64_t correct, int64_t examples, double auc = NAN) {
  Evaluation e;
  e.step = 900;
  e.result.correct = correct;
  e.result.examples = examples;
  e.result.auc = auc;
  return e;
}

TEST(LearningCheckTest, AFinalEvaluationAtChanceIsNamed) {
  EXPECT_THAT(TestAtChance(Evaluated(1000, 10000), TenClasses()).value_or(""),
              HasSubstr("not learning: test accuracy 0.1000 after 900 steps is at chance (a constant guess scores "
                        "0.1000)"));
  EXPECT_FALSE(TestAtChance(Evaluated(8500, 10000), TenClasses()).has_value());
  // The most common class's share is what a constant guess scores.
  const Chance skewed = ChanceOf(Labelled(2, {0, 0, 0, 1}));
  EXPECT_TRUE(TestAtChance(Evaluated(76, 100), skewed).has_value());
  EXPECT_FALSE(TestAtChance(Evaluated(90, 100), skewed).has_value());
  EXPECT_THAT(TestAtChance(Evaluated(76, 100, 0.505), skewed).value_or(""), HasSubstr("test AUC 0.5050"));
  EXPECT_FALSE(TestAtChance(Evaluated(76, 100, 0.71), skewed).has_value()) << "AUC decides for click models";
  Dataset noise = Labelled(10, {1, 2, 3});
  noise.random_labels = true;
  EXPECT_FALSE(TestAtChance(Evaluated(1, 10), ChanceOf(noise)).has_value()) << "nothing to learn in noise";
}

TEST(LearningCheckTest, TheRunsRecordCarriesEachWorkersWarnings) {
  ClusterReport cluster;
  cluster.workers.resize(2);
  cluster.workers[0].set_worker(1);
  cluster.workers[0].add_warnings("not learning: A");
  cluster.workers[0].set_initial_loss(2);
  cluster.workers[1].set_worker(0);
  cluster.workers[1].set_initial_loss(4);
  RunResult result;
  AddReports(cluster, {}, &result);
  ASSERT_EQ(result.warnings_size(), 1);
  EXPECT_EQ(result.warnings(0), "worker 1: not learning: A");
  EXPECT_DOUBLE_EQ(result.initial_loss(), 3);
}

}  // namespace
}  // namespace pstrain
