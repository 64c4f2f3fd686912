#include "worker/run/training_run.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config/time_dilation.h"
#include "common/metrics/input_bound.h"
#include "common/metrics/memory_usage.h"
#include "common/status_macros.h"
#include "device/device_context.h"
#include "device/device_registry.h"
#include "device/precision.h"
#include "glog/logging.h"
#include "models/emulated_model.h"
#include "optim/loss_scaler.h"
#include "worker/emulated_device.h"
#include "worker/emulation_report.h"
#include "worker/run/evaluation.h"
#include "worker/run/observers/cpu_sampling.h"
#include "worker/run/observers/learning_check.h"
#include "worker/run/observers/loss_scaling.h"
#include "worker/run/observers/periodic_evaluation.h"
#include "worker/run/observers/progress_lines.h"
#include "worker/run/observers/straggler_lines.h"
#include "worker/run/observers/timeline_phases.h"
#include "worker/run/observers/training_summaries.h"
#include "worker/run/observers/training_time.h"
#include "worker/run/observers/worker_metrics.h"
#include "worker/run/run_record.h"

namespace pstrain {
namespace {

// The model config with input shape and classes taken from the data when unset.
ModelConfig ResolveModelConfig(const ExperimentConfig& config, const Dataset& train) {
  ModelConfig mc = config.model();
  if (mc.input_shape_size() == 0) {
    for (int64_t d : train.example_shape) mc.add_input_shape(static_cast<int32_t>(d));
  }
  if (!mc.has_num_classes()) mc.set_num_classes(train.num_classes);
  return mc;
}

void PrintBanner(const ExperimentConfig& config, const Model& model, const DeviceContext& device, int64_t total_steps,
                 int worker_index, const std::string& strategy, const std::string& preprocessing) {
  const int workers = config.cluster().worker_hosts_size();
  const int batch = config.train().batch_size_per_device();
  const int devices = config.devices_per_worker();
  std::cout << absl::StrFormat(
                   "Worker:      %d of %d%s\nModel:       %s\nDataset:     %s%s\nMode:        training\n"
                   "Batch size:  %d global (%d per device)\nNum batches: %d\nDevices:     %d x %s\n"
                   "Precision:   %s\nVariables:   %s\nOptimizer:   %s lr=%g\n==========\n"
                   "Step\tImg/sec +/- its standard error (jitter = robust spread)\ttotal_loss of the step\n",
                   worker_index, workers, worker_index == 0 ? " (chief)" : "", model.name(), config.data().source(),
                   preprocessing.empty() ? "" : absl::StrCat("\nInput:       ", preprocessing),
                   batch * workers * devices, batch, total_steps, devices, config.device(),
                   DescribeArithmetic(device.precision(), device.fp32_math()), strategy, config.optimizer().name(),
                   config.optimizer().learning_rate())
            << std::flush;
}

// Two-class (click) models: the test AUC and log loss into `result` and the
// final line, beside the best AUC the data allows when it is synthetic.
void RecordClickMetrics(const EvalResult& eval, double planted_auc, RunResult* result) {
  if (std::isnan(eval.auc)) return;
  result->set_test_auc(eval.auc);
  if (!std::isnan(eval.log_loss)) result->set_test_log_loss(eval.log_loss);
  if (!std::isnan(planted_auc)) result->set_planted_auc(planted_auc);
  std::cout << absl::StrFormat("Test AUC = %.4f, log loss %.4f", eval.auc, eval.log_loss)
            << (std::isnan(planted_auc) ? std::string()
                                        : absl::StrFormat(" (planted AUC %.4f: the best the data allows)", planted_auc))
            << std::endl;
}

}  // namespace

TrainingRun::TrainingRun(const ExperimentConfig& config, int worker_index, Transport* transport,
                         const WorkerRunOptions& options)
    : config_(WithScaledLayoutBytes(config, options.byte_scale)),
      worker_index_(worker_index),
      chief_(worker_index == 0),
      devices_(config.devices_per_worker()),
      emulated_(config.device() == "emulated"),
      evaluate_(chief_ && config.train().evaluate() && !emulated_),
      transport_(transport),
      options_(options),
      start_(absl::Now()) {}

TrainingRun::~TrainingRun() = default;

absl::StatusOr<std::unique_ptr<TrainingRun>> TrainingRun::Create(const ExperimentConfig& config, int worker_index,
                                                                 Transport* transport,
                                                                 const WorkerRunOptions& options) {
  std::unique_ptr<TrainingRun> run(new TrainingRun(config, worker_index, transport, options));
  PSTRAIN_ASSIGN_OR_RETURN(run->needs_, NeedsOf(config));
  PSTRAIN_RETURN_IF_ERROR(run->LoadData());
  PSTRAIN_RETURN_IF_ERROR(run->CreateReplicas());
  PSTRAIN_RETURN_IF_ERROR(run->CreateStrategy());
  PSTRAIN_RETURN_IF_ERROR(run->AddObservers());
  return run;
}

absl::StatusOr<RunResult> TrainingRun::Run() {
  PSTRAIN_RETURN_IF_ERROR(Start());
  PSTRAIN_RETURN_IF_ERROR(StepLoop());
  const WorkerReport report = Report();
  PrintSummary(report);
  PSTRAIN_ASSIGN_OR_RETURN(const ClusterReport cluster, strategy_->Finish(report));
  return Finish(report, cluster);
}

// ---------------------------------------------------------------- set-up

absl::Status TrainingRun::LoadData() {
  PSTRAIN_ASSIGN_OR_RETURN(input_, InputPipeline::Create(config_, worker_index_, evaluate_));
  total_steps_ = input_->total_steps();
  return absl::OkStatus();
}

absl::Status TrainingRun::CreateReplicas() {
  ReplicaOptions options;
  PSTRAIN_ASSIGN_OR_RETURN(options.device_kind, DeviceKindOf(config_.device()));
  options.worker_index = worker_index_;
  options.host_mirrors = needs_.host_mirrors;
  options.download_gradients = needs_.download_gradients;
  PSTRAIN_ASSIGN_OR_RETURN(options.precision, ParsePrecision(ExperimentConfig::Precision_Name(config_.precision())));
  PSTRAIN_ASSIGN_OR_RETURN(options.fp32_math, ParseFp32Math(ExperimentConfig::Fp32Math_Name(config_.fp32_math())));
  // Parameter servers apply whatever they are sent: an overflowed gradient
  // goes to them as zeros. Strategies that update on the worker skip the
  // step instead (LocalOptimizer).
  options.zero_non_finite_gradients = needs_.parameter_servers;
  PSTRAIN_ASSIGN_OR_RETURN(const DeviceEntry device, DeviceRegistry().Find(config_.device()));
  options.copy_engine = device.mirror_copies;  // cpu_mirrored: CPU replicas laid out as GPU replicas
  if (emulated_) {
    PSTRAIN_ASSIGN_OR_RETURN(options.interconnect, EmulatedHostInterconnect(config_, options_.byte_scale));
    options.wrap_model = [this, interconnect = options.interconnect](
                             std::unique_ptr<Model> real, int replica) -> absl::StatusOr<std::unique_ptr<Model>> {
      PSTRAIN_ASSIGN_OR_RETURN(device_images_per_sec_,
                               EmulatedImagesPerSecond(config_, real->name(), real->ForwardFlopsPerExample()));
      auto model = std::make_unique<EmulatedModel>(std::move(real), ModelledCompute(config_, device_images_per_sec_),
                                                   options_.byte_scale);
      if (interconnect) {
        model->SetComputeDelay([interconnect, replica] { return interconnect->TakeComputeDelay(replica); });
      }
      return model;
    };
  }
  PSTRAIN_ASSIGN_OR_RETURN(replicas_,
                           ReplicaSet::Create(ResolveModelConfig(config_, input_->train()), devices_, options));
  return absl::OkStatus();
}

absl::Status TrainingRun::CreateStrategy() {
  PSTRAIN_ASSIGN_OR_RETURN(timeline_, Timeline::Create(config_, worker_index_));
  replicas_->SetTimeline(timeline_.get());  // the copies of host mirrors as lanes
  StrategyContext context;
  context.config = &config_;
  context.worker_index = worker_index_;
  context.num_workers = config_.cluster().worker_hosts_size();
  context.total_steps = total_steps_;
  context.transport = transport_;
  context.replicas = replicas_.get();
  context.listen_address = options_.listen_address;
  context.timeline = timeline_.get();
  context.ledger = input_->ledger();
  // A sparse model's final evaluation reads the tables: while the shards
  // are still up.
  if (config_.model().tables_size() > 0 && evaluate_) {
    context.before_chief_done = [this] { final_evaluation_ = Evaluate(total_steps_); };
  }
  PSTRAIN_ASSIGN_OR_RETURN(strategy_, pstrain::CreateStrategy(context));
  if (config_.model().tables_size() > 0) {
    PSTRAIN_ASSIGN_OR_RETURN(sparse_, SparseStage::Create(config_, worker_index_, transport_, replicas_.get(),
                                                          NumElements(input_->train().example_shape)));
    composed_.resize(devices_);
  }
  if (input_->ledger() != nullptr && strategy_->group() != nullptr) {
    // The group's ledger: a batch every step until the run's data is done,
    // never a wait.
    GroupSession* group = strategy_->group();
    input_->ConnectLedger(
        [group](const std::vector<CompletedChunk>& completed) { return group->ExchangeChunks(completed); }, nullptr,
        nullptr, absl::Seconds(config_.timeouts().rpc_seconds()));
  } else if (input_->ledger() != nullptr) {
    const TimeoutConfig& t = config_.timeouts();
    ShardSession* shards = strategy_->shards();
    input_->ConnectLedger(
        [shards](const std::vector<CompletedChunk>& completed) { return shards->ExchangeChunks(completed); },
        [shards] { return shards->PauseSteps(); }, [shards](int64_t step) { return shards->ResumeSteps(step); },
        absl::Seconds(2 * t.worker_lost_seconds() + t.rpc_seconds()));
  }
  return absl::OkStatus();
}

// The observers, in the order they hear of each step: loss scaling moves the
// scale before the metrics report it.
absl::Status TrainingRun::AddObservers() {
  const int64_t examples_per_step = static_cast<int64_t>(config_.train().batch_size_per_device()) * devices_;
  auto progress =
      std::make_unique<ProgressLines>(examples_per_step, config_.train().warmup_steps(),
                                      config_.train().display_every(), total_steps_, TimeDilation(config_), std::cout);
  progress_ = progress.get();
  observers_.push_back(std::move(progress));
  auto cpu = std::make_unique<CpuSampling>(config_.train().warmup_steps());
  cpu_ = cpu.get();
  observers_.push_back(std::move(cpu));
  auto training_time = std::make_unique<TrainingTime>(worker_index_);
  training_time_ = training_time.get();
  observers_.push_back(std::move(training_time));
  if (config_.train().learning_check_steps() > 0 && !emulated_ && !input_->train().random_labels) {
    LearningCheck::Options check;
    check.check_steps = config_.train().learning_check_steps();
    check.total_steps = total_steps_;
    check.stop = config_.train().stop_if_not_learning();
    check.worker = worker_index_;
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LearningCheck> learning,
                             LearningCheck::Create(check, ChanceOf(input_->train()), options_.metrics, std::cout));
    learning_ = learning.get();
    observers_.push_back(std::move(learning));
  }
  const LossScaler* scaler = nullptr;
  if (ScalesLoss(config_.loss_scaling())) {
    PSTRAIN_ASSIGN_OR_RETURN(LossScaler loss_scaler, LossScaler::Create(config_.loss_scaling()));
    auto scaling = std::make_unique<LossScaling>(std::move(loss_scaler),
                                                 LossScalingConfig::Mode_Name(config_.loss_scaling().mode()),
                                                 replicas_.get(), worker_index_);
    scaler = &scaling->scaler();
    observers_.push_back(std::move(scaling));
  }
  if (timeline_ != nullptr) observers_.push_back(std::make_unique<TimelinePhases>(timeline_.get(), devices_));
  if (options_.metrics != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(
        std::unique_ptr<WorkerMetrics> metrics,
        WorkerMetrics::Register(options_.metrics, worker_index_, strategy_.get(), examples_per_step, scaler));
    observers_.push_back(std::move(metrics));
  }
  if (chief_) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingSummaries> summaries,
                             TrainingSummaries::Create(config_, total_steps_, examples_per_step));
    if (summaries != nullptr) observers_.push_back(std::move(summaries));
    if (WatchesStragglers()) observers_.push_back(std::make_unique<StragglerLines>(strategy_->shards(), std::cout));
  }
  if (evaluate_) {
    observers_.push_back(std::make_unique<PeriodicEvaluation>(config_.train().eval_every_steps(), total_steps_,
                                                              [this](int64_t done) { Evaluate(done); }));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- the run

absl::Status TrainingRun::Start() {
  if (chief_) replicas_->InitializeVariables(config_.train().init_seed());
  PSTRAIN_ASSIGN_OR_RETURN(start_step_, strategy_->Start());
  for (int r = 0; r < devices_; ++r) {
    GradientReadyHook hook = strategy_->HookFor(r);
    for (auto& observer : observers_) hook = observer->WrapHook(r, std::move(hook));
    hooks_.push_back(std::move(hook));
  }
  PrintBanner(config_, replicas_->model(0), replicas_->context(0), total_steps_, worker_index_, strategy_->Describe(),
              input_->train().preprocessing);
  if (emulated_) {
    const double scale = TimeDilation(config_);
    std::cout << absl::StrFormat("Emulated:    %.1f images/sec per device, time scale %g%s", device_images_per_sec_,
                                 scale,
                                 scale != 1 ? " (progress lines show measured rates; totals are x the scale)" : "")
              << std::endl;
    if (const EmulatedInterconnect* interconnect = replicas_->interconnect()) {
      std::cout << "Topology:    " << interconnect->devices() << " devices of " << interconnect->profile().name << ": "
                << interconnect->profile().summary << std::endl;
    }
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::StepLoop() {
  for (int64_t step = start_step_;; ++step) {
    absl::StatusOr<std::optional<int64_t>> next = input_->Next(step);
    if (!next.ok()) {
      return absl::Status(next.status().code(), absl::StrCat("worker ", worker_index_, ": ", next.status().message()));
    }
    if (!next->has_value()) break;
    step = **next;  // later than asked after a pause for data (sync)
    for (auto& observer : observers_) observer->OnStepStart(step);
    PSTRAIN_ASSIGN_OR_RETURN(const StepOutcome outcome, RunStep(step));
    for (auto& observer : observers_) observer->OnStepEnd(outcome);
    if (learning_ != nullptr && learning_->stop()) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", worker_index_, ": ", *learning_->warning(), " (train.stop_if_not_learning)"));
    }
    if (outcome.ok()) {
      ++steps_run_;
      examples_ += int64_t{config_.train().batch_size_per_device()} * devices_;
      continue;
    }
    // A restarted shard, or a peer of an elastic group lost: the strategy's
    // shards or group say where to go on from (the data order is a function
    // of the step, so it continues too; a dynamic feed's chunk went back to
    // the restored ledger). A strategy with neither cannot recover: the
    // step's failure ends it.
    absl::StatusOr<int64_t> recovered = outcome.status;
    if (ShardSession* shards = strategy_->shards()) {
      recovered = shards->Recover(outcome.status);
    } else if (GroupSession* group = strategy_->group()) {
      recovered = group->Recover(outcome.status);
    }
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t resume, recovered);
    input_->Forget();
    for (auto& observer : observers_) observer->OnRecovery(resume);
    step = resume - 1;
  }
  return absl::OkStatus();
}

absl::Status TrainingRun::PullSparseRows(int64_t step) {
  std::vector<std::vector<int64_t>> examples(devices_);
  for (int r = 0; r < devices_; ++r) examples[r] = input_->ExampleIndices(r, step);
  sparse_->SetGeneration(strategy_->shards() != nullptr ? strategy_->shards()->generation() : 0);
  return sparse_->Pull(step, input_->train(), examples);
}

const Tensor& TrainingRun::ModelInput(int r) {
  if (!sparse_) return input_->images(r);
  sparse_->Compose(r, input_->images(r), &composed_[r]);
  return composed_[r];
}

absl::StatusOr<StepOutcome> TrainingRun::RunStep(int64_t step) {
  StepOutcome outcome;
  outcome.step = step;
  outcome.start = absl::Now();
  // A sparse model's rows come while the dense values do (both wait for
  // the step's predecessors in sync runs; they travel over channels of
  // their own).
  std::future<absl::Status> sparse_pull;
  if (sparse_) sparse_pull = std::async(std::launch::async, [this, step] { return PullSparseRows(step); });
  outcome.status = strategy_->BeforeStep(step);
  if (sparse_) {
    const absl::Status pulled = sparse_pull.get();
    if (outcome.ok()) outcome.status = pulled;
  }
  outcome.before_done = outcome.after_start = outcome.end = absl::Now();
  if (!outcome.ok()) return outcome;
  std::vector<float> losses(devices_);
  std::vector<absl::Status> inputs(devices_);
  std::vector<absl::Duration> waits(devices_);
  outcome.compute.resize(devices_);
  replicas_->ForEach([&](int r) {
    outcome.compute[r].start = absl::Now();
    inputs[r] = input_->Fill(r, step);
    waits[r] = absl::Now() - outcome.compute[r].start;
    if (inputs[r].ok()) losses[r] = replicas_->TrainStep(r, ModelInput(r), input_->labels(r), hooks_[r]);
    outcome.compute[r].end = absl::Now();
  });
  for (const absl::Status& s : inputs) {
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("worker ", worker_index_, ": input: ", s.message()));
  }
  input_wait_ += *std::max_element(waits.begin(), waits.end());
  for (float l : losses) outcome.loss += l / devices_;
  if (!std::isfinite(outcome.loss)) {
    return absl::InternalError(absl::StrCat("worker ", worker_index_, ": loss is ", outcome.loss, " at step ", step,
                                            " (diverged; lower optimizer.learning_rate?)"));
  }
  outcome.after_start = absl::Now();
  if (sparse_) outcome.status = sparse_->Push(step);
  if (outcome.ok()) outcome.status = strategy_->AfterStep(step);
  outcome.end = absl::Now();
  return outcome;
}

Evaluation TrainingRun::Evaluate(int64_t steps_done) {
  Evaluation evaluation;
  evaluation.step = steps_done;
  evaluation.start = absl::Now();
  // What replica 0 holds: after the step's update (all-reduce strategies),
  // or the values pulled for it (parameter servers); the final values may
  // sit in host mirrors.
  replicas_->SyncModelValues(0);
  InputComposer compose;
  if (sparse_) {
    compose = [this](int64_t first, int64_t count, const Tensor& dense, Tensor* input) {
      return sparse_->ComposeBatch(input_->test(), first, count, dense, input);
    };
  }
  evaluation.result = EvaluateOn(replicas_->model(0), input_->test(), config_.train().eval_batch_size(),
                                 input_->decode_pool(), compose);
  evaluation.end = absl::Now();
  for (auto& observer : observers_) observer->OnEvaluation(evaluation);
  if (steps_done < total_steps_) {
    std::cout << absl::StrFormat("Step %d: test accuracy %.4f, test loss %.4f (%d test examples)", steps_done,
                                 evaluation.accuracy(), evaluation.result.mean_loss, evaluation.result.examples)
              << (std::isnan(evaluation.result.auc) ? std::string()
                                                    : absl::StrFormat(", test AUC %.4f", evaluation.result.auc))
              << std::endl;
  }
  return evaluation;
}

// ---------------------------------------------------------------- finish

WorkerReport TrainingRun::Report() const {
  WorkerReport report;
  report.set_worker(worker_index_);
  report.set_steps(input_->ledger() != nullptr ? steps_run_ : total_steps_);
  report.set_examples(examples_);
  for (const auto& observer : observers_) observer->AddToReport(&report);
  report.set_peak_rss_bytes(PeakRssBytes());
  for (int r = 0; r < replicas_->size(); ++r) {
    report.set_peak_device_bytes(report.peak_device_bytes() + replicas_->context(r).memory_stats().peak_bytes_in_use);
    report.set_step_arena_bytes(
        std::max(report.step_arena_bytes(), replicas_->model(r).LastStepMemory(/*training=*/true).arena_bytes));
  }
  report.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  report.set_input_wait_seconds(absl::ToDoubleSeconds(input_wait_));
  report.set_input_wait_share(report.input_wait_seconds() / std::max(1e-9, report.wall_seconds()));
  const StrategyTraffic traffic = strategy_->traffic();
  report.set_bytes_pushed(traffic.bytes_pushed);
  report.set_bytes_pulled(traffic.bytes_pulled);
  report.set_bytes_allreduced(traffic.bytes_allreduced);
  if (ShardSession* shards = strategy_->shards(); shards != nullptr) {
    LayoutTuning tuning = shards->layout_tuning();
    if (tuning.decisions_size() > 0) *report.mutable_layout_tuning() = std::move(tuning);
  }
  return report;
}

void TrainingRun::PrintSummary(const WorkerReport& report) const {
  const StrategyTraffic traffic = strategy_->traffic();
  const double wait = absl::ToDoubleSeconds(traffic.wait);
  const int64_t dropped = traffic.dropped_gradients;
  std::vector<std::string> lines = {
      absl::StrFormat("worker %d images/sec: %.2f (its mean over its steps, warm-up excluded)%s", worker_index_,
                      progress_->measured_images_per_sec(),
                      dropped > 0 ? absl::StrCat(" (", dropped, " stale gradients dropped)") : ""),
      absl::StrFormat("worker %d time waiting for others: %.2f s (%.1f%% of the run)", worker_index_, wait,
                      100.0 * wait / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start_))),
      absl::StrFormat("worker %d time waiting for input: %.2f s (%.1f%% of the run)%s", worker_index_,
                      report.input_wait_seconds(), 100.0 * report.input_wait_share(),
                      InputBound(report.input_wait_share())
                          ? " -- input-bound: the decode pipeline sets the pace (more data.decode_threads?)"
                          : ""),
      absl::StrFormat(
          "worker %d peak memory: RSS %.2f GiB, model step arena %.2f GiB%s", worker_index_,
          ToGib(report.peak_rss_bytes()), ToGib(report.step_arena_bytes()),
          report.peak_device_bytes() > 0 ? absl::StrFormat(", GPU %.2f GiB", ToGib(report.peak_device_bytes())) : "")};
  if (const EmulatedInterconnect* interconnect = replicas_->interconnect()) {
    lines.push_back(absl::StrFormat("worker %d interconnect: %d bytes moved over %s's links (%d devices)",
                                    worker_index_, interconnect->bytes_moved(), interconnect->profile().name,
                                    interconnect->devices()));
  }
  for (const auto& observer : observers_) {
    for (std::string& line : observer->SummaryLines()) lines.push_back(std::move(line));
  }
  const std::string rule(64, '-');
  std::cout << rule << "\n" << absl::StrJoin(lines, "\n") << "\n" << rule << std::endl;
}

absl::StatusOr<RunResult> TrainingRun::Finish(const WorkerReport& report, const ClusterReport& cluster) {
  RunResult result = DescribeRun(config_, replicas_->model(0).name(), needs_.collective, total_steps_);
  result.set_fp32_math(Fp32MathName(replicas_->context(0).fp32_math()));
  AddReports(cluster, strategy_->shards() != nullptr ? strategy_->shards()->recoveries() : std::vector<Recovery>(),
             &result);
  if (!chief_) {
    result.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
    return result;
  }
  if (!cluster.lost_workers.empty()) {
    LOG(WARNING) << "chief: workers [" << absl::StrJoin(cluster.lost_workers, ",") << "] were lost";
  }
  for (const std::string& line : MembershipLines(result)) std::cout << line << std::endl;
  if (WatchesStragglers()) {
    for (const std::string& line : StragglerSummary(result, absl::ToDoubleSeconds(absl::Now() - start_))) {
      std::cout << line << std::endl;
    }
  }
  ExportFinalParameters();
  result.set_training_time_ratio(training_time_->ratio());
  if (evaluate_) {
    const Evaluation final = final_evaluation_ ? *final_evaluation_ : Evaluate(total_steps_);
    result.set_test_accuracy(final.accuracy());
    std::cout << absl::StrFormat("Accuracy @ 1 = %.4f (%d of %d test examples), test loss %.4f", final.accuracy(),
                                 final.result.correct, final.result.examples, final.result.mean_loss)
              << std::endl;
    RecordClickMetrics(final.result, input_->test().planted_auc, &result);
    if (std::optional<std::string> warning = TestAtChance(final, ChanceOf(input_->test()))) {
      std::cout << "WARNING: chief: " << *warning << std::endl;
      result.add_warnings(absl::StrCat("chief: ", *warning));
    }
  }
  std::cout << absl::StrFormat("total images/sec: %.2f +/- %.2f (std. dev.; %d workers x %d devices)",
                               result.images_per_sec(), result.images_per_sec_stddev(), result.num_workers(), devices_)
            << std::endl;
  if (config_.has_emulation()) {
    *result.mutable_emulation() =
        EmulationRecord(config_, result, device_images_per_sec_, cpu_->UsageSoFar().machine_busy, options_.byte_scale);
    std::cout << EmulationSummary(result.emulation()) << std::endl;
  }
  result.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  if (!options_.run_dir.empty()) PSTRAIN_RETURN_IF_ERROR(WriteRunResult(result, options_.run_dir));
  return result;
}

// The chief's final parameters, in model order, for callers that asked
// (WorkerRunOptions::final_parameters).
void TrainingRun::ExportFinalParameters() {
  if (options_.final_parameters == nullptr) return;
  options_.final_parameters->clear();
  for (const Variable& v : replicas_->variables(0)) {
    Tensor host = v.value;
    if (!host.on_host()) {  // device variables (NCCL strategies)
      host = Tensor(v.value.shape());
      replicas_->context(0).Convert(v.value, host);
    }
    options_.final_parameters->emplace_back(host.data(), host.data() + host.num_elements());
  }
}

}  // namespace pstrain
