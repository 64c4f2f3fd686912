// The training run's step observers (worker/run/observers/), each driven by
// hand-built StepOutcomes with chosen times, against the real parts they
// write to: a Timeline's JSON file, a MetricRegistry's Prometheus text, a
// TensorBoard event file read back with its checksums, a ReplicaSet of a
// small MLP; and the run's record (worker/run/run_record.h) and evaluation
// on a dataset (worker/run/evaluation.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/cpu_usage.h"
#include "common/metrics/result_json.h"
#include "common/summary/event_reader.h"
#include "common/telemetry/metric_registry.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "optim/loss_scaler.h"
#include "tests/util/process_test_util.h"
#include "worker/replica_set.h"
#include "worker/run/evaluation.h"
#include "worker/run/observers/cpu_sampling.h"
#include "worker/run/observers/loss_scaling.h"
#include "worker/run/observers/periodic_evaluation.h"
#include "worker/run/observers/progress_lines.h"
#include "worker/run/observers/timeline_phases.h"
#include "worker/run/observers/training_summaries.h"
#include "worker/run/observers/training_time.h"
#include "worker/run/observers/worker_metrics.h"
#include "worker/run/run_record.h"
#include "worker/strategy.h"
#include "worker/timeline.h"

namespace pstrain {
namespace {

using ::pstrain::test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A fixed moment, so no outcome depends on how fast this machine is.
const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// Step `step` as the loop would report it: from kT0 + step seconds, taking
// `seconds`; OK unless `status` says otherwise; no per-replica compute.
StepOutcome Outcome(int64_t step, double seconds, float loss, absl::Status status = absl::OkStatus()) {
  StepOutcome o;
  o.step = step;
  o.status = std::move(status);
  o.loss = loss;
  o.start = kT0 + absl::Seconds(step);
  o.end = o.start + absl::Seconds(seconds);
  o.before_done = o.start + absl::Seconds(seconds) / 10;
  o.after_start = o.end - absl::Seconds(seconds) / 10;
  return o;
}

absl::Status Failure() { return absl::UnavailableError("ps shard 0 restarted"); }

Evaluation EvaluationOf(int64_t step, int64_t correct, int64_t examples, float mean_loss) {
  Evaluation e;
  e.step = step;
  e.result.correct = correct;
  e.result.examples = examples;
  e.result.mean_loss = mean_loss;
  e.start = kT0 + absl::Seconds(1000);
  e.end = e.start + absl::Milliseconds(250);
  return e;
}

// ------------------------------------------------------------ ProgressLines

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n', absl::SkipEmpty()); }

TEST(ProgressLinesTest, PrintsEveryDisplayEveryStepAndTheLastExcludingWarmupAndFailedSteps) {
  std::ostringstream out;
  // 64 examples a step, 2 warm-up steps, a line every 3 steps, 7 steps.
  ProgressLines progress(64, /*warmup_steps=*/2, /*display_every=*/3, /*total_steps=*/7, /*time_scale=*/2.5, out);
  // Warm-up steps are slow: were they counted, no rate below would hold.
  progress.OnStepEnd(Outcome(0, 10.0, 3.0f));
  progress.OnStepEnd(Outcome(1, 10.0, 2.75f));
  EXPECT_EQ(out.str(), "");
  progress.OnStepEnd(Outcome(2, 0.5, 2.5f));  // 128 images/sec; done = 3: a line
  progress.OnStepEnd(Outcome(3, 0.25, 2.25f));
  progress.OnStepEnd(Outcome(4, 0.5, 2.0f));
  // A failed attempt at step 5 (done = 6, a display step) prints nothing
  // and counts nothing; the retried step does.
  progress.OnStepEnd(Outcome(5, 100.0, 99.0f, Failure()));
  EXPECT_EQ(Lines(out.str()).size(), 1u) << out.str();
  progress.OnStepEnd(Outcome(5, 0.25, 1.75f));
  progress.OnStepEnd(Outcome(6, 0.5, 1.5f));  // the last step: a line although 7 % 3 != 0

  // Rates 128, 256, 128, 256, 128: mean 179.2, population stddev 62.71,
  // uncertainty 28.04; after four of them mean 192, uncertainty 32, jitter
  // 1.4826 x 64.
  EXPECT_THAT(Lines(out.str()), ElementsAre("3\timages/sec: 128.0 +/- 0.0 (jitter = 0.0)\t2.500",
                                            "6\timages/sec: 192.0 +/- 32.0 (jitter = 94.9)\t1.750",
                                            "7\timages/sec: 179.2 +/- 28.0 (jitter = 0.0)\t1.500"));
  EXPECT_DOUBLE_EQ(progress.measured_images_per_sec(), 179.2);

  WorkerReport report;
  progress.AddToReport(&report);
  EXPECT_DOUBLE_EQ(report.images_per_sec(), 179.2 * 2.5);  // x time_scale
  EXPECT_NEAR(report.images_per_sec_stddev(), std::sqrt(3932.16) * 2.5, 1e-9);
  // Seven OK steps, fewer than ten: the mean of all their losses.
  EXPECT_NEAR(report.final_loss(), (3.0 + 2.75 + 2.5 + 2.25 + 2.0 + 1.75 + 1.5) / 7, 1e-6);
}

TEST(ProgressLinesTest, FinalLossIsTheMeanOfTheLastTenOkSteps) {
  std::ostringstream out;
  ProgressLines progress(32, /*warmup_steps=*/0, /*display_every=*/100, /*total_steps=*/12, 1.0, out);
  for (int64_t step = 0; step < 12; ++step) {
    progress.OnStepEnd(Outcome(step, 1.0, 1000.0f, Failure()));  // each step fails once first
    progress.OnStepEnd(Outcome(step, 1.0, static_cast<float>(step + 1)));
  }
  WorkerReport report;
  progress.AddToReport(&report);
  EXPECT_DOUBLE_EQ(report.final_loss(), (3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12) / 10.0);
  EXPECT_DOUBLE_EQ(report.images_per_sec(), 32.0);
  EXPECT_DOUBLE_EQ(report.images_per_sec_stddev(), 0.0);
  EXPECT_THAT(Lines(out.str()), ElementsAre("12\timages/sec: 32.0 +/- 0.0 (jitter = 0.0)\t12.000"));
}

TEST(ProgressLinesTest, NothingMeasuredReportsZeros) {
  std::ostringstream out;
  ProgressLines progress(32, /*warmup_steps=*/5, /*display_every=*/10, /*total_steps=*/3, 4.0, out);
  progress.OnStepEnd(Outcome(0, 1.0, 2.0f, Failure()));
  WorkerReport report;
  progress.AddToReport(&report);
  EXPECT_EQ(report.images_per_sec(), 0);
  EXPECT_EQ(report.final_loss(), 0);
  EXPECT_EQ(out.str(), "");
}

// ------------------------------------------------------------ TimelinePhases

struct TraceEvent {
  std::string name;
  std::string lane;
  int64_t ts = 0;
  int64_t dur = 0;
  int64_t step = -1;
};

// The complete ("X") events of the timeline file, with their lanes' names;
// fails the test when the file is not a JSON array.
std::vector<TraceEvent> ReadTrace(const std::string& path) {
  google::protobuf::ListValue events;
  const std::string text = test::ReadFile(path);
  const auto status = google::protobuf::util::JsonStringToMessage(text, &events);
  EXPECT_TRUE(status.ok()) << path << " is not a JSON array: " << status.ToString() << "\n" << text;
  auto field = [](const google::protobuf::Value& v, const std::string& name) -> const google::protobuf::Value& {
    static const google::protobuf::Value kNone;
    const auto& fields = v.struct_value().fields();
    auto it = fields.find(name);
    return it == fields.end() ? kNone : it->second;
  };
  std::map<int64_t, std::string> lanes;
  for (const auto& e : events.values()) {
    if (field(e, "name").string_value() == "thread_name") {
      lanes[static_cast<int64_t>(field(e, "tid").number_value())] = field(field(e, "args"), "name").string_value();
    }
  }
  std::vector<TraceEvent> out;
  for (const auto& e : events.values()) {
    if (field(e, "ph").string_value() != "X") continue;
    TraceEvent t;
    t.name = field(e, "name").string_value();
    t.lane = lanes[static_cast<int64_t>(field(e, "tid").number_value())];
    t.ts = static_cast<int64_t>(field(e, "ts").number_value());
    t.dur = static_cast<int64_t>(field(e, "dur").number_value());
    t.step = static_cast<int64_t>(field(field(e, "args"), "step").number_value());
    out.push_back(t);
  }
  return out;
}

// "name@lane" of every event of `step`, in file order.
std::vector<std::string> NamesAt(const std::vector<TraceEvent>& events, int64_t step) {
  std::vector<std::string> names;
  for (const TraceEvent& e : events) {
    if (e.step == step) names.push_back(absl::StrCat(e.name, "@", e.lane));
  }
  return names;
}

const TraceEvent* Find(const std::vector<TraceEvent>& events, int64_t step, const std::string& name,
                       const std::string& lane) {
  for (const TraceEvent& e : events) {
    if (e.step == step && e.name == name && e.lane == lane) return &e;
  }
  return nullptr;
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

TEST(TimelinePhasesTest, RecordsEachTracedStepsPhasesAndFlushesAfterIt) {
  TempDir dir;
  ExperimentConfig config;
  config.mutable_timeline()->set_path(dir / "trace.json");
  config.mutable_timeline()->set_start_step(1);
  config.mutable_timeline()->set_end_step(4);
  absl::StatusOr<std::unique_ptr<Timeline>> made = Timeline::Create(config, 0);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<Timeline> timeline = std::move(*made);
  const std::string path = timeline->path();

  TimelinePhases phases(timeline.get(), /*replicas=*/2);
  std::vector<int> heard;
  GradientReadyHook hook0 = phases.WrapHook(0, [&](int variable) { heard.push_back(variable); });
  ASSERT_NE(hook0, nullptr);
  EXPECT_EQ(phases.WrapHook(1, nullptr), nullptr) << "no strategy hook: nothing to wrap";

  // Step 0 lies before the window: a gradient is heard, nothing is written,
  // and what was heard does not carry over into step 1.
  phases.OnStepStart(0);
  hook0(7);
  StepOutcome step0 = Outcome(0, 1.0, 2.0f);
  step0.compute = {{step0.before_done, step0.after_start}, {step0.before_done, step0.after_start}};
  phases.OnStepEnd(step0);
  EXPECT_TRUE(ReadTrace(path).empty());

  // Step 1, traced: replica 0's strategy hears of its first final gradient
  // in the middle of compute; replica 1 has no hook.
  phases.OnStepStart(1);
  const absl::Time before_hook = absl::Now();
  hook0(3);
  hook0(2);  // later gradients do not move the split
  const absl::Time after_hook = absl::Now();
  StepOutcome step1;
  step1.step = 1;
  step1.loss = 1.5f;
  step1.start = before_hook - absl::Milliseconds(40);
  step1.before_done = before_hook - absl::Milliseconds(30);
  step1.compute = {{before_hook - absl::Milliseconds(20), after_hook + absl::Milliseconds(20)},
                   {before_hook - absl::Milliseconds(25), after_hook + absl::Milliseconds(15)}};
  step1.after_start = after_hook + absl::Milliseconds(25);
  step1.end = after_hook + absl::Milliseconds(30);
  phases.OnStepEnd(step1);
  EXPECT_THAT(heard, ElementsAre(7, 3, 2)) << "the strategy's hook still hears every gradient";

  std::vector<TraceEvent> events = ReadTrace(path);  // flushed after the step
  EXPECT_THAT(NamesAt(events, 1), ElementsAre("before step@phases", "forward@replica 0", "backward@replica 0",
                                              "forward+backward@replica 1", "after step@phases", "step@steps"));
  const TraceEvent* before = Find(events, 1, "before step", "phases");
  const TraceEvent* forward = Find(events, 1, "forward", "replica 0");
  const TraceEvent* backward = Find(events, 1, "backward", "replica 0");
  const TraceEvent* both = Find(events, 1, "forward+backward", "replica 1");
  const TraceEvent* after = Find(events, 1, "after step", "phases");
  const TraceEvent* step = Find(events, 1, "step", "steps");
  ASSERT_TRUE(before && forward && backward && both && after && step);
  EXPECT_EQ(before->ts, Micros(step1.start));
  EXPECT_EQ(before->dur, 10'000);
  // Forward ends where the first gradient was heard: between the two
  // readings of the clock around the hook calls.
  EXPECT_EQ(forward->ts, Micros(step1.compute[0].start));
  EXPECT_GE(backward->ts, Micros(before_hook));
  EXPECT_LE(backward->ts, Micros(after_hook));
  EXPECT_NEAR(forward->ts + forward->dur, backward->ts, 1);
  EXPECT_NEAR(backward->ts + backward->dur, Micros(step1.compute[0].end), 1);
  EXPECT_EQ(both->ts, Micros(step1.compute[1].start));
  EXPECT_EQ(both->dur, absl::ToInt64Microseconds(step1.compute[1].end - step1.compute[1].start));
  EXPECT_EQ(after->ts, Micros(step1.after_start));
  EXPECT_EQ(after->dur, 5'000);
  EXPECT_EQ(step->ts, Micros(step1.start));
  EXPECT_EQ(step->dur, absl::ToInt64Microseconds(step1.end - step1.start));

  // Step 2 fails in BeforeStep (no compute): "before step" and "failed step".
  phases.OnStepStart(2);
  phases.OnStepEnd(Outcome(2, 0.5, 0.0f, Failure()));
  EXPECT_THAT(NamesAt(ReadTrace(path), 2), ElementsAre("before step@phases", "failed step@steps"));

  // Step 2 again, OK, with no gradient heard this time: the last step's
  // first gradient is forgotten, so replica 0 is one "forward+backward".
  phases.OnStepStart(2);
  StepOutcome retried = Outcome(2, 0.5, 1.0f);
  retried.compute = {{retried.before_done, retried.after_start}, {retried.before_done, retried.after_start}};
  phases.OnStepEnd(retried);
  EXPECT_THAT(NamesAt(ReadTrace(path), 2),
              ElementsAre("before step@phases", "failed step@steps", "before step@phases", "forward+backward@replica 0",
                          "forward+backward@replica 1", "after step@phases", "step@steps"));

  // Step 3 fails in AfterStep (after compute): its phases, then "failed step".
  phases.OnStepStart(3);
  StepOutcome failed_after = Outcome(3, 0.5, 1.0f, Failure());
  failed_after.compute = {{failed_after.before_done, failed_after.after_start},
                          {failed_after.before_done, failed_after.after_start}};
  phases.OnStepEnd(failed_after);
  EXPECT_THAT(NamesAt(ReadTrace(path), 3),
              ElementsAre("before step@phases", "forward+backward@replica 0", "forward+backward@replica 1",
                          "after step@phases", "failed step@steps"));
  phases.OnEvaluation(EvaluationOf(3, 1, 2, 0.5f));  // while step 3 is traced

  // Step 4 is past the window: nothing, evaluations neither.
  phases.OnStepStart(4);
  hook0(1);
  StepOutcome step4 = Outcome(4, 0.5, 1.0f);
  step4.compute = {{step4.before_done, step4.after_start}, {step4.before_done, step4.after_start}};
  phases.OnStepEnd(step4);
  phases.OnEvaluation(EvaluationOf(4, 1, 2, 0.5f));

  timeline.reset();  // flushes what is pending
  events = ReadTrace(path);
  EXPECT_TRUE(NamesAt(events, 0).empty());
  EXPECT_TRUE(NamesAt(events, 4).empty());
  const TraceEvent* evaluation = Find(events, 3, "evaluation", "phases");
  ASSERT_NE(evaluation, nullptr);
  EXPECT_EQ(evaluation->dur, 250'000);
  int evaluations = 0;
  for (const TraceEvent& e : events) evaluations += e.name == "evaluation";
  EXPECT_EQ(evaluations, 1);
}

// ------------------------------------------------------------ WorkerMetrics

// A strategy that has moved what the test says: the interface WorkerMetrics
// reads traffic and waiting through.
class FixedTrafficStrategy : public Strategy {
 public:
  absl::StatusOr<int64_t> Start() override { return 0; }
  absl::Status BeforeStep(int64_t) override { return absl::OkStatus(); }
  absl::Status AfterStep(int64_t) override { return absl::OkStatus(); }
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    ClusterReport report;
    report.workers = {mine};
    return report;
  }
  std::string Describe() const override { return "fixed traffic"; }
  StrategyTraffic traffic() const override {
    StrategyTraffic traffic;
    traffic.bytes_pushed = pushed;
    traffic.bytes_pulled = pulled;
    traffic.bytes_allreduced = allreduced;
    traffic.wait = wait;
    traffic.group_generation = generation;
    traffic.group_members = members;
    return traffic;
  }

  int64_t generation = -1;
  int members = 0;
  int64_t pushed = 0, pulled = 0, allreduced = 0;
  absl::Duration wait = absl::ZeroDuration();
};

// The value of the sample `series` (name and labels) in Prometheus text;
// NaN when there is no such line.
double SampleOf(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

TEST(WorkerMetricsTest, StepsMoveTheGaugesAndCountersFailedStepsDoNot) {
  MetricRegistry registry;
  FixedTrafficStrategy strategy;
  LossScalingConfig scaling;
  scaling.set_mode(LossScalingConfig::dynamic);
  scaling.set_initial_scale(1024);
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(scaling);
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> metrics =
      WorkerMetrics::Register(&registry, /*worker=*/3, &strategy, /*examples_per_step=*/64, &*scaler);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto sample = [&](const std::string& name) { return SampleOf(registry.RenderText(), name + "{worker=\"3\"}"); };
  EXPECT_EQ(sample("pstrain_worker_step"), 0);
  EXPECT_EQ(sample("pstrain_worker_loss_scale"), 0);

  strategy.pushed = 1000;
  strategy.pulled = 2000;
  strategy.wait = absl::Milliseconds(1500);
  (*metrics)->OnStepEnd(Outcome(0, 0.5, 2.5f));
  EXPECT_EQ(sample("pstrain_worker_step"), 1);
  EXPECT_EQ(sample("pstrain_worker_loss"), 2.5);
  EXPECT_EQ(sample("pstrain_worker_images_per_second"), 128);  // 64 examples / 0.5 s
  EXPECT_EQ(sample("pstrain_worker_pushed_bytes_total"), 1000);
  EXPECT_EQ(sample("pstrain_worker_pulled_bytes_total"), 2000);
  EXPECT_EQ(sample("pstrain_worker_allreduced_bytes_total"), 0);
  EXPECT_EQ(sample("pstrain_worker_wait_seconds_total"), 1.5);
  EXPECT_EQ(sample("pstrain_worker_loss_scale"), 1024);
  EXPECT_EQ(sample("pstrain_worker_overflow_steps_total"), 0);

  // An overflowed step (the loss scaling observer updates the scaler first).
  scaler->Update(/*overflowed=*/true);
  strategy.pushed = 2500;
  strategy.allreduced = 4096;
  strategy.wait = absl::Milliseconds(1750);
  (*metrics)->OnStepEnd(Outcome(1, 0.25, 2.0f));
  EXPECT_EQ(sample("pstrain_worker_step"), 2);
  EXPECT_EQ(sample("pstrain_worker_loss"), 2.0);
  EXPECT_EQ(sample("pstrain_worker_images_per_second"), 256);
  EXPECT_EQ(sample("pstrain_worker_pushed_bytes_total"), 2500);
  EXPECT_EQ(sample("pstrain_worker_allreduced_bytes_total"), 4096);
  EXPECT_EQ(sample("pstrain_worker_wait_seconds_total"), 1.75);
  EXPECT_EQ(sample("pstrain_worker_loss_scale"), 512);
  EXPECT_EQ(sample("pstrain_worker_overflow_steps_total"), 1);

  // A failed step 2 moves neither the step nor the loss.
  (*metrics)->OnStepEnd(Outcome(2, 0.5, 9.0f, Failure()));
  EXPECT_EQ(sample("pstrain_worker_step"), 2);
  EXPECT_EQ(sample("pstrain_worker_loss"), 2.0);
  EXPECT_EQ(sample("pstrain_worker_images_per_second"), 256);

  EXPECT_EQ(sample("pstrain_worker_recoveries_total"), 0);
  EXPECT_EQ(sample("pstrain_worker_group_generation"), -1);
  EXPECT_EQ(sample("pstrain_worker_group_members"), 0);
  (*metrics)->OnRecovery(2);
  EXPECT_EQ(sample("pstrain_worker_recoveries_total"), 1);
  // An elastic group re-formed: its generation and size after the next step.
  strategy.generation = 1;
  strategy.members = 3;
  (*metrics)->OnStepEnd(Outcome(2, 0.5, 2.0f));
  EXPECT_EQ(sample("pstrain_worker_group_generation"), 1);
  EXPECT_EQ(sample("pstrain_worker_group_members"), 3);
  EXPECT_EQ(sample("pstrain_worker_test_accuracy"), 0);
  (*metrics)->OnEvaluation(EvaluationOf(2, 87, 100, 0.4f));
  EXPECT_DOUBLE_EQ(sample("pstrain_worker_test_accuracy"), 0.87);
}

TEST(WorkerMetricsTest, WithoutLossScalingTheScaleGaugesStayZero) {
  MetricRegistry registry;
  FixedTrafficStrategy strategy;
  absl::StatusOr<std::unique_ptr<WorkerMetrics>> metrics =
      WorkerMetrics::Register(&registry, /*worker=*/0, &strategy, /*examples_per_step=*/10, nullptr);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  (*metrics)->OnStepEnd(Outcome(4, 2.0, 1.0f));
  const std::string text = registry.RenderText();
  EXPECT_EQ(SampleOf(text, "pstrain_worker_step{worker=\"0\"}"), 5);
  EXPECT_EQ(SampleOf(text, "pstrain_worker_images_per_second{worker=\"0\"}"), 5);
  EXPECT_EQ(SampleOf(text, "pstrain_worker_loss_scale{worker=\"0\"}"), 0);
  EXPECT_EQ(SampleOf(text, "pstrain_worker_overflow_steps_total{worker=\"0\"}"), 0);
  // A second worker's metrics in the same registry are a second series.
  FixedTrafficStrategy other;
  EXPECT_TRUE(WorkerMetrics::Register(&registry, 1, &other, 10, nullptr).ok());
  EXPECT_EQ(WorkerMetrics::Register(&registry, 0, &other, 10, nullptr).status().code(),
            absl::StatusCode::kAlreadyExists);
}

// ------------------------------------------------------------ TrainingSummaries

TEST(TrainingSummariesTest, TrainSeriesEveryStepsAndEvalSeriesReadBackWithChecksums) {
  TempDir dir;
  ExperimentConfig config;
  config.mutable_summaries()->set_dir(dir / "summaries");
  config.mutable_summaries()->set_every_steps(2);
  // 0.8, halved every 2 global steps: which step the rate is read at shows.
  config.mutable_optimizer()->set_learning_rate(0.8f);
  config.mutable_optimizer()->set_lr_schedule("step");
  config.mutable_optimizer()->set_lr_decay_factor(0.5f);
  config.mutable_optimizer()->set_lr_decay_steps(2);
  absl::StatusOr<std::unique_ptr<TrainingSummaries>> made =
      TrainingSummaries::Create(config, /*total_steps=*/6, /*examples_per_step=*/32);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_NE(*made, nullptr);
  TrainingSummaries& summaries = **made;
  EXPECT_TRUE(absl::StartsWith(summaries.path(), dir / "summaries/events.out.tfevents.")) << summaries.path();
  EXPECT_TRUE(absl::EndsWith(summaries.path(), ".chief")) << summaries.path();

  summaries.OnStepEnd(Outcome(0, 0.5, 3.0f));
  summaries.OnStepEnd(Outcome(1, 0.5, 2.5f));  // done = 2
  summaries.OnStepEnd(Outcome(2, 0.25, 2.0f));
  summaries.OnStepEnd(Outcome(3, 0.25, 77.0f, Failure()));  // done = 4, but failed
  summaries.OnStepEnd(Outcome(3, 0.25, 1.5f));              // done = 4
  summaries.OnStepEnd(Outcome(4, 0.5, 1.25f));
  summaries.OnStepEnd(Outcome(5, 0.5, 1.0f));  // done = 6
  summaries.OnEvaluation(EvaluationOf(6, 3, 4, 0.625f));

  absl::StatusOr<tb::EventFileContents> contents = tb::ReadEventFile(summaries.path());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->file_version, "brain.Event:2");
  std::map<std::string, std::vector<std::pair<int64_t, double>>> series;
  for (const tb::ScalarPoint& p : contents->scalars) series[p.tag].emplace_back(p.step, p.value);
  using Points = std::vector<std::pair<int64_t, double>>;
  EXPECT_EQ(series["train/loss"], (Points{{2, 2.5}, {4, 1.5}, {6, 1.0}}));
  EXPECT_EQ(series["train/images_per_sec_chief"], (Points{{2, 64}, {4, 128}, {6, 64}}));
  // The rate of the step's own update: At(1), At(3), At(5).
  EXPECT_EQ(series["train/learning_rate"], (Points{{2, 0.8f}, {4, 0.4f}, {6, 0.2f}}));
  EXPECT_EQ(series["eval/test_accuracy"], (Points{{6, 0.75}}));
  EXPECT_EQ(series["eval/test_loss"], (Points{{6, 0.625}}));
  EXPECT_EQ(series.size(), 5u);
}

TEST(TrainingSummariesTest, NoDirNoSummariesAndAnUncreatableDirIsNamed) {
  ExperimentConfig config;
  absl::StatusOr<std::unique_ptr<TrainingSummaries>> none = TrainingSummaries::Create(config, 10, 32);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, nullptr);

  TempDir dir;
  test::WriteFile(dir / "file", "not a directory");
  config.mutable_summaries()->set_dir(dir / "file/summaries");
  absl::StatusOr<std::unique_ptr<TrainingSummaries>> refused = TrainingSummaries::Create(config, 10, 32);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("summaries.dir: "));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr(dir / "file"));
}

// ------------------------------------------------------------ LossScaling

constexpr int kBatch = 16;

ModelConfig MlpConfig() {
  ModelConfig config;
  config.set_name("mlp");
  config.add_hidden_units(32);
  config.add_hidden_units(16);
  for (int d : {1, 28, 28}) config.add_input_shape(d);
  config.set_num_classes(10);
  return config;
}

std::unique_ptr<ReplicaSet> MlpReplica() {
  absl::StatusOr<std::unique_ptr<ReplicaSet>> replicas = ReplicaSet::Create(MlpConfig(), 1);
  EXPECT_TRUE(replicas.ok()) << replicas.status();
  if (!replicas.ok()) return nullptr;
  (*replicas)->InitializeVariables(42);
  return std::move(*replicas);
}

struct Batch {
  Tensor images;
  std::vector<int32_t> labels;
};

// kBatch examples of small random pixels; `corrupt`: one pixel infinite, so
// every gradient of the step overflows.
Batch RandomBatch(bool corrupt) {
  Batch batch{Tensor({kBatch, 1, 28, 28}), {}};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (float& x : batch.images.span()) x = pixel(rng);
  for (int i = 0; i < kBatch; ++i) batch.labels.push_back(i % 10);
  if (corrupt) batch.images.data()[100] = std::numeric_limits<float>::infinity();
  return batch;
}

TEST(LossScalingObserverTest, OverflowBacksOffCleanStepsGrowFailedStepsChangeNothing) {
  std::unique_ptr<ReplicaSet> replicas = MlpReplica();
  ASSERT_NE(replicas, nullptr);
  LossScalingConfig config;
  config.set_mode(LossScalingConfig::dynamic);
  config.set_initial_scale(1024);
  config.set_growth_interval(2);
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(config);
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  // The observer gives the replicas the scale: without one they would never
  // notice an overflow (gradients_finite stays true).
  LossScaling scaling(*std::move(scaler), "dynamic", replicas.get(), /*worker_index=*/2);
  EXPECT_EQ(scaling.scaler().scale(), 1024);
  const Batch corrupt = RandomBatch(true), clean = RandomBatch(false);

  replicas->TrainStep(0, corrupt.images, corrupt.labels.data(), nullptr);
  ASSERT_FALSE(replicas->gradients_finite(0)) << "the replicas scale the loss from the observer's construction on";
  // A failed step: its overflow counts for nothing.
  scaling.OnStepEnd(Outcome(0, 1.0, 2.0f, Failure()));
  EXPECT_EQ(scaling.scaler().scale(), 1024);
  EXPECT_EQ(scaling.scaler().skipped_steps(), 0);
  // The retried step overflows too: backed off and counted.
  scaling.OnStepEnd(Outcome(0, 1.0, 2.0f));
  EXPECT_EQ(scaling.scaler().scale(), 512);
  EXPECT_EQ(scaling.scaler().skipped_steps(), 1);

  // Two clean steps in a row (growth_interval): the scale grows back.
  replicas->TrainStep(0, clean.images, clean.labels.data(), nullptr);
  ASSERT_TRUE(replicas->gradients_finite(0));
  scaling.OnStepEnd(Outcome(1, 1.0, 2.0f));
  EXPECT_EQ(scaling.scaler().scale(), 512);
  scaling.OnStepEnd(Outcome(2, 1.0, 2.0f));
  EXPECT_EQ(scaling.scaler().scale(), 1024);
  EXPECT_EQ(scaling.scaler().skipped_steps(), 1);

  WorkerReport report;
  scaling.AddToReport(&report);
  EXPECT_EQ(report.overflow_steps(), 1);
  EXPECT_EQ(report.loss_scale(), 1024);
  EXPECT_THAT(scaling.SummaryLines(),
              ElementsAre("worker 2 loss scaling (dynamic): 1 of 3 steps overflowed, final scale 1024"));
}

TEST(LossScalingObserverTest, AnOverflowOnAnyReplicaIsTheStepsOverflow) {
  absl::StatusOr<std::unique_ptr<ReplicaSet>> made = ReplicaSet::Create(MlpConfig(), 2);
  ASSERT_TRUE(made.ok()) << made.status();
  ReplicaSet& replicas = **made;
  replicas.InitializeVariables(42);
  replicas.BroadcastValues(0);
  LossScalingConfig config;
  config.set_mode(LossScalingConfig::static_);
  config.set_initial_scale(256);
  absl::StatusOr<LossScaler> scaler = LossScaler::Create(config);
  ASSERT_TRUE(scaler.ok()) << scaler.status();
  LossScaling scaling(*std::move(scaler), "static", &replicas, 0);
  const Batch corrupt = RandomBatch(true), clean = RandomBatch(false);
  replicas.ForEach([&](int r) {
    const Batch& batch = r == 0 ? corrupt : clean;  // the first overflows, the last does not
    replicas.TrainStep(r, batch.images, batch.labels.data(), nullptr);
  });
  ASSERT_FALSE(replicas.gradients_finite(0));
  ASSERT_TRUE(replicas.gradients_finite(1));
  scaling.OnStepEnd(Outcome(0, 1.0, 2.0f));
  EXPECT_EQ(scaling.scaler().skipped_steps(), 1);
  EXPECT_EQ(scaling.scaler().scale(), 256) << "static: the scale never moves";
  EXPECT_THAT(scaling.SummaryLines(),
              ElementsAre("worker 0 loss scaling (static): 1 of 1 steps overflowed, final scale 256"));
}

// ------------------------------------------------------------ CpuSampling

// Keeps this thread busy until it has used `cpu` more seconds of CPU.
void BurnCpu(double cpu) {
  const double until = SampleCpu().process_cpu_seconds + cpu;
  volatile double sink = 0;
  while (SampleCpu().process_cpu_seconds < until) {
    for (int i = 0; i < 10'000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  }
}

TEST(CpuSamplingTest, NothingBeforeWarmupThenTheUsageSinceTheFirstMeasuredStep) {
  CpuSampling cpu(/*warmup_steps=*/3);
  for (int64_t step = 0; step < 3; ++step) cpu.OnStepStart(step);
  BurnCpu(0.02);
  // The run ended before warm-up: no sample, no usage.
  CpuUsage none = cpu.UsageSoFar();
  EXPECT_EQ(none.process_cores, 0);
  EXPECT_EQ(none.machine_busy, -1);
  WorkerReport early;
  early.set_cpu_cores(99);
  cpu.AddToReport(&early);
  EXPECT_EQ(early.cpu_cores(), 0);

  // Step 3 takes the sample (between these two readings), step 4 does not:
  // the usage reported spans from step 3's start, a busy 50 ms of CPU and
  // then an idle 100 ms. Bounds from the readings around both samples.
  const CpuSample first_before = SampleCpu();
  cpu.OnStepStart(3);
  const CpuSample first_after = SampleCpu();
  BurnCpu(0.05);
  cpu.OnStepStart(4);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const CpuSample last_before = SampleCpu();
  const CpuUsage usage = cpu.UsageSoFar();
  const CpuSample last_after = SampleCpu();
  const double lowest = (last_before.process_cpu_seconds - first_after.process_cpu_seconds) /
                        absl::ToDoubleSeconds(last_after.wall - first_before.wall);
  const double highest = (last_after.process_cpu_seconds - first_before.process_cpu_seconds) /
                         absl::ToDoubleSeconds(last_before.wall - first_after.wall);
  EXPECT_GT(lowest, 0);
  EXPECT_GE(usage.process_cores, lowest * (1 - 1e-9));
  EXPECT_LE(usage.process_cores, highest * (1 + 1e-9));
  if (first_before.machine_total_ticks > 0) {
    EXPECT_GE(usage.machine_busy, 0);
    EXPECT_LE(usage.machine_busy, 1);
  }
  WorkerReport report;
  cpu.AddToReport(&report);
  EXPECT_GT(report.cpu_cores(), 0);
}

TEST(CpuSamplingTest, ARunResumedPastWarmupSamplesAtItsFirstStep) {
  CpuSampling cpu(/*warmup_steps=*/3);
  cpu.OnStepStart(10);  // resumed from a checkpoint at step 10
  BurnCpu(0.02);
  EXPECT_GT(cpu.UsageSoFar().process_cores, 0);
}

// ------------------------------------------------------------ PeriodicEvaluation

TEST(PeriodicEvaluationTest, AfterEveryEverySynchronisedStepsNeverAfterTheLastNorAFailedStep) {
  std::vector<int64_t> evaluated;
  PeriodicEvaluation periodic(/*every=*/3, /*total_steps=*/9, [&](int64_t done) { evaluated.push_back(done); });
  for (int64_t step = 0; step < 9; ++step) {
    if (step == 5) {
      periodic.OnStepEnd(Outcome(step, 1.0, 1.0f, Failure()));  // done = 6, but failed
      EXPECT_THAT(evaluated, ElementsAre(3));
    }
    periodic.OnStepEnd(Outcome(step, 1.0, 1.0f));
  }
  // 9 is a multiple of 3 but the last step: the final evaluation follows.
  EXPECT_THAT(evaluated, ElementsAre(3, 6));

  std::vector<int64_t> never;
  PeriodicEvaluation off(/*every=*/0, /*total_steps=*/9, [&](int64_t done) { never.push_back(done); });
  for (int64_t step = 0; step < 9; ++step) off.OnStepEnd(Outcome(step, 1.0, 1.0f));
  EXPECT_TRUE(never.empty());
}

// ------------------------------------------------------------ run_record

WorkerReport ReportOf(int worker, double rate, double stddev, double loss) {
  WorkerReport r;
  r.set_worker(worker);
  r.set_images_per_sec(rate);
  r.set_images_per_sec_stddev(stddev);
  r.set_final_loss(loss);
  return r;
}

TEST(RunRecordTest, AddReportsSumsRatesCombinesStddevsSortsWorkersAndMeansLosses) {
  ClusterReport cluster;
  // The chief's own report first, the others as they came.
  cluster.workers = {ReportOf(0, 200, 4, 2), ReportOf(2, 100, 3, 1), ReportOf(1, 300, 12, 6)};
  ShardLoad shard0, shard1;
  shard0.set_shard(0);
  shard0.set_bytes_in(10);
  shard1.set_shard(1);
  shard1.set_bytes_in(20);
  cluster.ps_load = {shard0, shard1};
  Recovery recovery;
  recovery.set_restored_step(40);
  recovery.set_failure("ps shard 1 restarted");

  RunResult result;
  AddReports(cluster, {recovery}, &result);
  ASSERT_EQ(result.workers_size(), 3);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(result.workers(w).worker(), w);
  EXPECT_EQ(result.workers(1).images_per_sec(), 300);
  EXPECT_DOUBLE_EQ(result.images_per_sec(), 600);
  EXPECT_DOUBLE_EQ(result.images_per_sec_stddev(), 13);  // sqrt(4^2 + 3^2 + 12^2)
  EXPECT_DOUBLE_EQ(result.final_loss(), 3);
  ASSERT_EQ(result.ps_load_size(), 2);
  EXPECT_EQ(result.ps_load(1).bytes_in(), 20);
  ASSERT_EQ(result.recoveries_size(), 1);
  EXPECT_EQ(result.recoveries(0).restored_step(), 40);

  RunResult empty;
  AddReports(ClusterReport{}, {}, &empty);
  EXPECT_EQ(empty.workers_size(), 0);
  EXPECT_EQ(empty.images_per_sec(), 0);
  EXPECT_EQ(empty.final_loss(), 0) << "no workers: no loss, not NaN";
}

TEST(RunRecordTest, DescribeRunTakesTheConfigsFields) {
  ExperimentConfig config;
  config.set_name("describe");
  config.set_variable_update("parameter_server");
  config.set_devices_per_worker(2);
  config.mutable_train()->set_batch_size_per_device(16);
  for (int w = 0; w < 3; ++w) config.mutable_cluster()->add_worker_hosts(absl::StrCat("worker", w, ":1"));
  config.mutable_cluster()->add_ps_hosts("ps0:1");
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
  const RunResult result = DescribeRun(config, "mlp", "gloo", 120);
  EXPECT_EQ(result.experiment(), "describe");
  EXPECT_EQ(result.model(), "mlp");
  EXPECT_EQ(result.variable_update(), "parameter_server");
  EXPECT_EQ(result.num_workers(), 3);
  EXPECT_EQ(result.num_ps(), 1);
  EXPECT_EQ(result.devices_per_worker(), 2);
  EXPECT_EQ(result.batch_size_per_device(), 16);
  EXPECT_EQ(result.global_batch_size(), 16 * 3 * 2);
  EXPECT_EQ(result.steps(), 120);
  EXPECT_EQ(result.collective(), "gloo");
  EXPECT_EQ(result.loss_scaling(), "dynamic");
}

TEST(RunRecordTest, StragglerSummarySaysWhatEachStragglerCost) {
  RunResult result;
  result.set_num_ps(2);
  EXPECT_THAT(StragglerSummary(result, 100), ElementsAre("stragglers: none (every worker kept its peers' pace)"));
  Straggler* s = result.add_stragglers();
  s->set_worker(2);
  s->set_ratio(1.52);
  s->set_named_at_step(140);
  s->set_excess_seconds(12.5);
  s->set_current(true);
  std::vector<std::string> lines = StragglerSummary(result, 100);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "straggler: worker 2, 1.52x its peers' busy time per step (named at its step 140, slow to the end); 12.5 s "
            "beyond their pace (12.5% of the run: under sync, the others' wait)");
  // With the data ledger: the share of the examples it read, against an even one.
  for (int64_t n : {400, 400, 200}) result.mutable_data_ledger()->add_examples_by_worker(n);
  lines = StragglerSummary(result, 100);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("; it read 20.0% of the examples (an even share: 33.3%)"));
  // Without parameter servers the shards could not tell: nothing is said.
  result.set_num_ps(0);
  EXPECT_THAT(StragglerSummary(result, 100), IsEmpty());
}

TEST(RunRecordTest, EmulationSummarySaysLinksScaleAndVerdict) {
  Emulation e;
  e.set_hosts(4);
  e.set_time_scale(2);
  EXPECT_EQ(EmulationSummary(e), "emulation: 4 hosts, links uncapped, time scale 2");
  e.set_link_gbps(10);
  e.set_device_images_per_sec(250);
  e.set_scaling_efficiency(0.875);
  EXPECT_EQ(EmulationSummary(e),
            "emulation: 4 hosts, links 10 Gbit/s, time scale 2; scaling efficiency 0.875 against one device at "
            "250.0 images/sec; valid (this machine kept up)");
  e.set_cpu_bound(true);
  e.set_cpu_bound_reason("machine 97% busy");
  e.set_suggested_time_scale(4);
  EXPECT_THAT(EmulationSummary(e), HasSubstr("; CPU-BOUND, not valid: machine 97% busy; try time_scale 4"));
}

TEST(RunRecordTest, WriteRunResultWritesAResultJsonThatParses) {
  TempDir dir;
  RunResult result;
  result.set_experiment("record");
  result.set_num_workers(2);
  result.set_images_per_sec(1234.5);
  result.set_final_loss(0.25);
  result.set_test_accuracy(0.875);
  *result.add_workers() = ReportOf(0, 600, 1, 0.25);
  *result.add_workers() = ReportOf(1, 634.5, 2, 0.25);
  const std::string run_dir = dir / "runs/one";  // parents created too
  testing::internal::CaptureStdout();
  const absl::Status written = WriteRunResult(result, run_dir);
  const std::string printed = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_EQ(printed, "result: " + run_dir + "/result.json\n");
  absl::StatusOr<RunResult> read = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->experiment(), "record");
  EXPECT_EQ(read->num_workers(), 2);
  EXPECT_EQ(read->images_per_sec(), 1234.5);
  EXPECT_EQ(read->test_accuracy(), 0.875);
  ASSERT_EQ(read->workers_size(), 2);
  EXPECT_EQ(read->workers(1).images_per_sec(), 634.5);
}

TEST(RunRecordTest, WriteRunResultNamesADirectoryItCannotCreate) {
  TempDir dir;
  test::WriteFile(dir / "file", "not a directory");
  const absl::Status s = WriteRunResult(RunResult(), dir / "file/run");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot create run directory " + (dir / "file/run")));
  EXPECT_FALSE(test::Exists(dir / "file/run/result.json"));
}

// ------------------------------------------------------------ EvaluateOn

// `n` examples whose pixels grow in size with the example, so their losses
// differ a lot from one example to the next.
Dataset RandomDataset(int64_t n) {
  Dataset data;
  data.num_examples = n;
  data.example_shape = {1, 28, 28};
  data.num_classes = 10;
  std::mt19937 rng(11);
  std::normal_distribution<float> pixel(0.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 28 * 28; ++p) data.images.push_back(pixel(rng) * (1.0f + i));
    data.labels.push_back(static_cast<int32_t>((i * 7) % 10));
  }
  return data;
}

EvalResult EvaluateExamples(Model& model, const Dataset& data, int64_t first, int64_t count) {
  const int64_t per_example = ExampleSize(data);
  Tensor images({count, 1, 28, 28});
  std::copy(data.images.begin() + first * per_example, data.images.begin() + (first + count) * per_example,
            images.data());
  return model.Evaluate(images, data.labels.data() + first);
}

TEST(EvaluateOnTest, BatchesTheWholeDatasetAndWeighsEachBatchByItsExamples) {
  std::unique_ptr<ReplicaSet> replicas = MlpReplica();
  ASSERT_NE(replicas, nullptr);
  Model& model = replicas->model(0);
  const Dataset data = RandomDataset(25);
  ASSERT_TRUE(ValidateDataset(data).ok());
  const std::vector<float> values_before(model.variables()[0].value.span().begin(),
                                         model.variables()[0].value.span().end());

  // Example by example: the correct count and the mean loss to expect.
  int64_t correct = 0;
  double loss_sum = 0;
  for (int64_t i = 0; i < data.num_examples; ++i) {
    const EvalResult one = EvaluateExamples(model, data, i, 1);
    ASSERT_EQ(one.examples, 1);
    correct += one.correct;
    loss_sum += one.mean_loss;
  }
  const double mean_loss = loss_sum / data.num_examples;
  // Batches of 10, 10 and 5: an unweighted mean of their means would be
  // far off, so the weighting is what is checked.
  const double unweighted =
      (EvaluateExamples(model, data, 0, 10).mean_loss + EvaluateExamples(model, data, 10, 10).mean_loss +
       EvaluateExamples(model, data, 20, 5).mean_loss) /
      3;
  ASSERT_GT(std::abs(unweighted - mean_loss), 0.05 * mean_loss) << "the examples' losses are too alike";

  for (int batch_size : {10, 7, 25, 100}) {
    SCOPED_TRACE(batch_size);
    const EvalResult result = EvaluateOn(model, data, batch_size);
    EXPECT_EQ(result.examples, 25);
    EXPECT_EQ(result.correct, correct);
    EXPECT_NEAR(result.mean_loss, mean_loss, 1e-4 * mean_loss);
  }
  EXPECT_EQ(std::vector<float>(model.variables()[0].value.span().begin(), model.variables()[0].value.span().end()),
            values_before)
      << "evaluation touches no variable";

  const EvalResult nothing = EvaluateOn(model, RandomDataset(0), 10);
  EXPECT_EQ(nothing.examples, 0);
  EXPECT_EQ(nothing.correct, 0);
  EXPECT_EQ(nothing.mean_loss, 0);
}

}  // namespace
// The training time ratio. Steps of 1 s back to back from t = 0: 0 .. 19
// (20 s, every cycle counted); step 20 fails (t = 20..21) and the run
// recovers to step 18 at t = 25, trains 18 and 19 again (t = 25..27: the
// first 18 and 19 stop counting), then step 20 stalls 9 s (t = 27..36,
// counted as 3 typical cycles) and 21 follows at pace (t = 36..37).
// Counted: 0..17 (18 s), 18 and 19 once (2 s), 20 (3 s), 21 (1 s) = 24 s of 37.
TEST(TrainingTimeTest, FailuresRecoveriesStallsAndStepsTrainedTwiceCountAgainstIt) {
  TrainingTime time(/*worker=*/1);
  EXPECT_EQ(time.ratio(), 0);
  EXPECT_TRUE(time.SummaryLines().empty());
  auto step = [&](int64_t step, double from, double to, absl::Status status = absl::OkStatus()) {
    StepOutcome o;
    o.step = step;
    o.status = std::move(status);
    o.start = kT0 + absl::Seconds(from);
    o.end = kT0 + absl::Seconds(to);
    time.OnStepEnd(o);
  };
  for (int s = 0; s < 20; ++s) step(s, s, s + 1);
  EXPECT_DOUBLE_EQ(time.ratio(), 1.0);
  step(20, 20, 21, Failure());
  time.OnRecovery(18);
  step(18, 25, 26);
  step(19, 26, 27);
  step(20, 27, 36);
  step(21, 36, 37);
  EXPECT_DOUBLE_EQ(time.ratio(), 24.0 / 37.0);
  ASSERT_EQ(time.SummaryLines().size(), 1u);
  EXPECT_THAT(time.SummaryLines()[0], ::testing::HasSubstr("worker 1 training time ratio: 0.649"));
}

// Time between steps (input, the ledger's exchange, checkpoints) is part of
// training: steps of 0.5 s every second count fully.
TEST(TrainingTimeTest, TimeBetweenStepsCountsWithThem) {
  TrainingTime time(/*worker=*/0);
  for (int s = 0; s < 30; ++s) {
    StepOutcome o;
    o.step = s;
    o.start = kT0 + absl::Seconds(s);
    o.end = o.start + absl::Seconds(0.5);
    time.OnStepEnd(o);
  }
  EXPECT_DOUBLE_EQ(time.ratio(), 1.0);
}

}  // namespace pstrain
