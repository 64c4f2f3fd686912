#include "worker/trainer.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/config/time_dilation.h"
#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "common/metrics/cpu_usage.h"
#include "common/metrics/memory_usage.h"
#include "common/metrics/throughput.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/emulated_model.h"
#include "models/model.h"
#include "optim/loss_scaler.h"
#include "worker/emulated_device.h"
#include "worker/emulation_report.h"
#include "worker/replica_set.h"
#include "worker/strategy.h"
#include "worker/training_summaries.h"
#include "worker/worker_metrics.h"

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

EvalResult EvaluateOn(Model& model, const Dataset& data, int batch_size) {
  EvalResult total;
  const int64_t per_example = NumElements(data.example_shape);
  double loss_sum = 0;
  for (int64_t first = 0; first < data.num_examples; first += batch_size) {
    const int64_t count = std::min<int64_t>(batch_size, data.num_examples - first);
    Shape shape = {count};
    shape.insert(shape.end(), data.example_shape.begin(), data.example_shape.end());
    float* begin = const_cast<float*>(data.images.data()) + first * per_example;
    Tensor images(shape, DType::kFloat32, Buffer::Borrow(begin, count * per_example * sizeof(float), nullptr));
    EvalResult r = model.Evaluate(images, data.labels.data() + first);
    loss_sum += static_cast<double>(r.mean_loss) * r.examples;
    total.correct += r.correct;
    total.examples += r.examples;
  }
  total.mean_loss = total.examples > 0 ? static_cast<float>(loss_sum / total.examples) : 0.0f;
  return total;
}

void PrintBanner(const ExperimentConfig& config, const Model& model, int64_t total_steps, int worker_index,
                 const std::string& strategy) {
  const int workers = config.cluster().worker_hosts_size();
  const int batch = config.train().batch_size_per_device();
  const int devices = config.devices_per_worker();
  std::cout << absl::StrFormat(
                   "Worker:      %d of %d%s\nModel:       %s\nDataset:     %s\nMode:        training\n"
                   "Batch size:  %d global (%d per device)\nNum batches: %d\nDevices:     %d x %s\n"
                   "Variables:   %s\nOptimizer:   %s lr=%g\n==========\n"
                   "Step\tImg/sec\ttotal_loss\n",
                   worker_index, workers, worker_index == 0 ? " (chief)" : "", model.name(), config.data().source(),
                   batch * workers * devices, batch, total_steps, devices, config.device(), strategy,
                   config.optimizer().name(), config.optimizer().learning_rate())
            << std::flush;
}

}  // namespace

int64_t TotalSteps(const ExperimentConfig& config, int64_t train_examples) {
  if (config.train().steps() > 0) return config.train().steps();
  const int64_t global_batch =
      static_cast<int64_t>(config.train().batch_size_per_device()) * config.cluster().worker_hosts_size();
  const int64_t per_epoch = std::max<int64_t>(1, train_examples / global_batch);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(config.train().epochs() * per_epoch)));
}

absl::StatusOr<RunResult> RunWorker(const ExperimentConfig& config, int worker_index, Transport* transport,
                                    const WorkerRunOptions& options) {
  const absl::Time start = absl::Now();
  const bool chief = worker_index == 0;
  const int num_workers = config.cluster().worker_hosts_size();
  const int devices = config.devices_per_worker();
  const int batch = config.train().batch_size_per_device();
  const bool emulated = config.device() == "emulated";
  // An emulated device computes no accuracy (models/emulated_model.h).
  const bool evaluate = chief && config.train().evaluate() && !emulated;
  const double time_scale = TimeDilation(config);

  PSTRAIN_ASSIGN_OR_RETURN(const StrategyNeeds needs, NeedsOf(config));
  PSTRAIN_ASSIGN_OR_RETURN(const DeviceKind device_kind, ParseDeviceName(emulated ? "cpu" : config.device()));
  PSTRAIN_ASSIGN_OR_RETURN(Datasets data, LoadDatasets(config, evaluate));
  // Replica r of worker w is "device" w * devices + r of the whole job.
  std::vector<ShardedBatcher> batchers;
  for (int r = 0; r < devices; ++r) {
    PSTRAIN_ASSIGN_OR_RETURN(ShardedBatcher batcher,
                             ShardedBatcher::Create(&data.train, worker_index * devices + r, num_workers * devices,
                                                    batch, config.data().shuffle_seed(), config.data().shuffle()));
    batchers.push_back(std::move(batcher));
  }
  ReplicaOptions replica_options;
  replica_options.device_kind = device_kind;
  replica_options.worker_index = worker_index;
  replica_options.host_mirrors = needs.host_mirrors;
  replica_options.download_gradients = needs.download_gradients;
  PSTRAIN_ASSIGN_OR_RETURN(replica_options.precision, ParsePrecision(config.precision()));
  // Parameter servers apply whatever they are sent: an overflowed gradient
  // goes to them as zeros. Strategies that update on the worker skip the
  // step instead (LocalOptimizer).
  replica_options.zero_non_finite_gradients = needs.parameter_servers;
  PSTRAIN_ASSIGN_OR_RETURN(LossScaler loss_scaler, LossScaler::Create(config.loss_scaling()));
  double device_images_per_sec = 0;
  if (emulated) {
    replica_options.wrap_model = [&](std::unique_ptr<Model> real) -> absl::StatusOr<std::unique_ptr<Model>> {
      PSTRAIN_ASSIGN_OR_RETURN(device_images_per_sec,
                               EmulatedImagesPerSecond(config, real->name(), real->ForwardFlopsPerExample()));
      return std::make_unique<EmulatedModel>(std::move(real), ModelledCompute(config, device_images_per_sec));
    };
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<ReplicaSet> replicas,
                           ReplicaSet::Create(ResolveModelConfig(config, data.train), devices, replica_options));
  Model& model = replicas->model(0);
  if (loss_scaler.enabled()) replicas->SetLossScale(loss_scaler.scale());
  const int64_t total_steps = TotalSteps(config, data.train.num_examples);

  StrategyContext context;
  context.config = &config;
  context.worker_index = worker_index;
  context.num_workers = num_workers;
  context.total_steps = total_steps;
  context.transport = transport;
  context.replicas = replicas.get();
  context.listen_address = options.listen_address;
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Timeline> timeline, Timeline::Create(config, worker_index));
  context.timeline = timeline.get();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Strategy> strategy, CreateStrategy(context));

  std::unique_ptr<WorkerMetrics> metrics;
  if (options.metrics != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(metrics, WorkerMetrics::Register(options.metrics, worker_index));
  }
  std::unique_ptr<TrainingSummaries> summaries;
  if (chief) {
    PSTRAIN_ASSIGN_OR_RETURN(summaries, TrainingSummaries::Create(config, total_steps));
  }
  if (chief) replicas->InitializeVariables(config.train().init_seed());
  PSTRAIN_RETURN_IF_ERROR(strategy->Start());
  PrintBanner(config, model, total_steps, worker_index, strategy->Describe());
  if (emulated) {
    std::cout << absl::StrFormat("Emulated:    %.1f images/sec per device, time scale %g%s", device_images_per_sec,
                                 time_scale,
                                 time_scale != 1 ? " (progress lines show measured rates; totals are x the scale)" : "")
              << std::endl;
  }

  ThroughputTracker throughput(static_cast<int64_t>(batch) * devices, config.train().warmup_steps());
  Shape image_shape = {batch};
  image_shape.insert(image_shape.end(), data.train.example_shape.begin(), data.train.example_shape.end());
  std::vector<Tensor> images;
  for (int r = 0; r < devices; ++r) images.emplace_back(image_shape);
  std::vector<std::vector<int32_t>> labels(devices);
  std::vector<float> losses(devices);
  std::deque<float> recent_losses;
  std::vector<GradientReadyHook> hooks;
  for (int r = 0; r < devices; ++r) hooks.push_back(strategy->HookFor(r));
  // Timeline: backward starts, as far as the trainer can see, when the
  // first gradient is final (the strategy's hook hears of it).
  std::vector<std::atomic<int64_t>> first_gradient(devices);
  if (timeline != nullptr) {
    for (int r = 0; r < devices; ++r) {
      if (hooks[r] == nullptr) continue;
      hooks[r] = [inner = hooks[r], first = &first_gradient[r]](int variable) {
        int64_t none = 0;
        first->compare_exchange_strong(none, absl::ToUnixNanos(absl::Now()));
        inner(variable);
      };
    }
  }
  auto record_compute = [&](int r, absl::Time start, absl::Time end) {
    const int64_t first = first_gradient[r].exchange(0);
    const std::string lane = absl::StrCat("replica ", r);
    if (first == 0) {
      timeline->Record("forward+backward", lane, start, end);
      return;
    }
    timeline->Record("forward", lane, start, absl::FromUnixNanos(first));
    timeline->Record("backward", lane, absl::FromUnixNanos(first), end);
  };

  // CPU use over the measured steps (after warm-up): emulated runs report
  // whether this machine kept up (worker/emulation_report.h).
  std::optional<CpuSample> cpu_at_warmup;
  for (int64_t step = strategy->start_step(); step < total_steps; ++step) {
    if (!cpu_at_warmup && step >= config.train().warmup_steps()) cpu_at_warmup = SampleCpu();
    const absl::Time t0 = absl::Now();
    if (timeline != nullptr) timeline->SetStep(step);
    const bool traced = timeline != nullptr && timeline->Tracing();
    float loss = 0;
    absl::Status status = strategy->BeforeStep(step);
    const absl::Time t1 = absl::Now();
    if (traced) timeline->Record("before step", "phases", t0, t1);
    if (status.ok()) {
      replicas->ForEach([&](int r) {
        const absl::Time start = absl::Now();
        batchers[r].Fill(step, &images[r], &labels[r]);
        losses[r] = replicas->TrainStep(r, images[r], labels[r].data(), hooks[r]);
        if (traced) record_compute(r, start, absl::Now());
      });
      for (float l : losses) loss += l / devices;
      if (!std::isfinite(loss)) {
        return absl::InternalError(absl::StrCat("worker ", worker_index, ": loss is ", loss, " at step ", step,
                                                " (diverged; lower optimizer.learning_rate?)"));
      }
      const absl::Time t2 = absl::Now();
      status = strategy->AfterStep(step);
      if (traced) timeline->Record("after step", "phases", t2, absl::Now());
      if (status.ok() && loss_scaler.enabled()) {
        bool overflowed = false;
        for (int r = 0; r < devices; ++r) overflowed |= !replicas->gradients_finite(r);
        const float scale = loss_scaler.scale();
        loss_scaler.Update(overflowed);
        if (loss_scaler.scale() != scale) replicas->SetLossScale(loss_scaler.scale());
        if (metrics) metrics->OnLossScale(loss_scaler.scale(), loss_scaler.skipped_steps());
      }
    }
    if (traced) {
      timeline->Record(status.ok() ? "step" : "failed step", "steps", t0, absl::Now());
      if (absl::Status s = timeline->Flush(); !s.ok()) LOG(WARNING) << s.message();
    }
    if (!status.ok()) {
      // A restarted peer: continue from where the strategy recovered to (the
      // data order is a function of the step, so it continues too).
      PSTRAIN_ASSIGN_OR_RETURN(const int64_t resume, strategy->Recover(status));
      if (metrics) metrics->OnRecovery();
      step = resume - 1;
      continue;
    }
    const double step_seconds = absl::ToDoubleSeconds(absl::Now() - t0);
    throughput.RecordStep(step, step_seconds);
    if (summaries) summaries->OnStep(step, loss, static_cast<int64_t>(batch) * devices, step_seconds);
    if (metrics) {
      WorkerReport traffic;
      strategy->FillTraffic(&traffic);
      metrics->OnStep(step + 1, loss, step_seconds > 0 ? batch * devices / step_seconds : 0, traffic,
                      absl::ToDoubleSeconds(strategy->wait_time()));
    }
    recent_losses.push_back(loss);
    if (recent_losses.size() > 10) recent_losses.pop_front();
    if ((step + 1) % config.train().display_every() == 0 || step + 1 == total_steps) {
      std::cout << throughput.ProgressLine(step, loss) << std::endl;
    }
    const int64_t eval_every = config.train().eval_every_steps();
    if (evaluate && eval_every > 0 && (step + 1) % eval_every == 0 && step + 1 < total_steps) {
      // What replica 0 holds now: after the step's update (all-reduce
      // strategies), or the values pulled for it (parameter servers).
      const absl::Time start = absl::Now();
      replicas->SyncModelValues(0);
      const EvalResult eval = EvaluateOn(model, data.test, config.train().eval_batch_size());
      const double accuracy = eval.examples > 0 ? static_cast<double>(eval.correct) / eval.examples : 0.0;
      if (summaries) summaries->OnEvaluation(step + 1, accuracy, eval.mean_loss);
      if (metrics) metrics->OnEvaluation(accuracy);
      if (traced) timeline->Record("evaluation", "phases", start, absl::Now());
      std::cout << absl::StrFormat("Step %d: test accuracy %.4f, test loss %.4f (%d test examples)", step + 1, accuracy,
                                   eval.mean_loss, eval.examples)
                << std::endl;
    }
  }

  double final_loss = 0;
  for (float l : recent_losses) final_loss += l;
  if (!recent_losses.empty()) final_loss /= recent_losses.size();
  WorkerReport report;
  report.set_worker(worker_index);
  report.set_steps(total_steps);
  // Under time dilation every modelled time was k times longer: emulated
  // rates are k times the measured ones.
  report.set_images_per_sec(throughput.mean_images_per_sec() * time_scale);
  report.set_images_per_sec_stddev(throughput.stddev() * time_scale);
  const CpuUsage cpu = cpu_at_warmup ? UsageBetween(*cpu_at_warmup, SampleCpu()) : CpuUsage{};
  report.set_cpu_cores(cpu.process_cores);
  report.set_peak_rss_bytes(PeakRssBytes());
  for (int r = 0; r < replicas->size(); ++r) {
    report.set_peak_device_bytes(report.peak_device_bytes() + replicas->context(r).memory_stats().peak_bytes_in_use);
    report.set_step_arena_bytes(
        std::max(report.step_arena_bytes(), replicas->model(r).LastStepMemory(/*training=*/true).arena_bytes));
  }
  report.set_final_loss(final_loss);
  report.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  strategy->FillTraffic(&report);
  if (loss_scaler.enabled()) {
    report.set_overflow_steps(loss_scaler.skipped_steps());
    report.set_loss_scale(loss_scaler.scale());
  }
  const double wait = absl::ToDoubleSeconds(strategy->wait_time());
  std::cout << "----------------------------------------------------------------\n"
            << absl::StrFormat("worker %d total images/sec: %.2f", worker_index, throughput.mean_images_per_sec())
            << (strategy->dropped_gradients() > 0
                    ? absl::StrCat(" (", strategy->dropped_gradients(), " stale gradients dropped)")
                    : "")
            << "\n"
            << absl::StrFormat("worker %d time waiting for others: %.2f s (%.1f%% of the run)", worker_index, wait,
                               100.0 * wait / std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start)))
            << "\n"
            << absl::StrFormat("worker %d peak memory: RSS %.2f GiB, model step arena %.2f GiB", worker_index,
                               ToGib(report.peak_rss_bytes()), ToGib(report.step_arena_bytes()))
            << (report.peak_device_bytes() > 0 ? absl::StrFormat(", GPU %.2f GiB", ToGib(report.peak_device_bytes()))
                                               : "")
            << (loss_scaler.enabled()
                    ? absl::StrFormat("\nworker %d loss scaling (%s): %d of %d steps overflowed, final scale %.9g",
                                      worker_index, config.loss_scaling().mode(), report.overflow_steps(),
                                      total_steps - strategy->start_step(), report.loss_scale())
                    : "")
            << "\n----------------------------------------------------------------" << std::endl;

  PSTRAIN_ASSIGN_OR_RETURN(ClusterReport cluster, strategy->Finish(report));

  RunResult result;
  result.set_experiment(config.name());
  result.set_model(model.name());
  result.set_variable_update(config.variable_update());
  result.set_local_parameter_device(config.local_parameter_device());
  result.set_all_reduce_spec(config.all_reduce_spec());
  result.set_consistency(config.consistency());
  result.set_staleness(config.staleness());
  result.set_transport(config.transport());
  result.set_num_ps(config.cluster().ps_hosts_size());
  result.set_num_workers(num_workers);
  result.set_devices_per_worker(devices);
  result.set_device(config.device());
  result.set_batch_size_per_device(batch);
  result.set_global_batch_size(static_cast<int64_t>(batch) * num_workers * devices);
  result.set_steps(total_steps);
  result.set_compression(config.compression());
  result.set_collective(needs.collective);  // the one in use ("" without one)
  result.set_precision(config.precision());
  result.set_loss_scaling(config.loss_scaling().mode());
  for (const Recovery& recovery : strategy->recoveries()) *result.add_recoveries() = recovery;
  for (const ShardLoad& load : cluster.ps_load) *result.add_ps_load() = load;
  std::vector<WorkerReport> workers = cluster.workers;
  std::sort(workers.begin(), workers.end(),
            [](const WorkerReport& a, const WorkerReport& b) { return a.worker() < b.worker(); });
  for (const WorkerReport& r : workers) *result.add_workers() = r;
  // Workers run concurrently, so their rates add up.
  double rate = 0, variance = 0, loss_sum = 0;
  for (const WorkerReport& r : cluster.workers) {
    rate += r.images_per_sec();
    variance += r.images_per_sec_stddev() * r.images_per_sec_stddev();
    loss_sum += r.final_loss();
  }
  result.set_images_per_sec(rate);
  result.set_images_per_sec_stddev(std::sqrt(variance));
  result.set_final_loss(loss_sum / cluster.workers.size());
  if (!chief) {
    result.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
    return result;
  }
  if (!cluster.lost_workers.empty()) {
    LOG(WARNING) << "chief: workers [" << absl::StrJoin(cluster.lost_workers, ",") << "] were lost";
  }

  std::vector<Variable>& variables = replicas->variables(0);
  if (options.final_parameters != nullptr) {
    options.final_parameters->clear();
    for (const Variable& v : variables) {
      Tensor host = v.value;
      if (!host.on_host()) {  // device variables (NCCL strategies)
        host = Tensor(v.value.shape());
        replicas->context(0).Convert(v.value, host);
      }
      options.final_parameters->emplace_back(host.data(), host.data() + host.num_elements());
    }
  }
  if (evaluate) {
    replicas->SyncModelValues(0);  // the final values may sit in host mirrors
    EvalResult eval = EvaluateOn(model, data.test, config.train().eval_batch_size());
    result.set_test_accuracy(eval.examples > 0 ? static_cast<double>(eval.correct) / eval.examples : 0.0);
    if (summaries) summaries->OnEvaluation(total_steps, result.test_accuracy(), eval.mean_loss);
    if (metrics) metrics->OnEvaluation(result.test_accuracy());
    std::cout << absl::StrFormat("Accuracy @ 1 = %.4f (%d of %d test examples), test loss %.4f", result.test_accuracy(),
                                 eval.correct, eval.examples, eval.mean_loss)
              << std::endl;
  }
  std::cout << absl::StrFormat("total images/sec: %.2f +/- %.2f (%d workers x %d devices)", result.images_per_sec(),
                               result.images_per_sec_stddev(), num_workers, devices)
            << std::endl;
  if (config.has_emulation()) {
    *result.mutable_emulation() = EmulationRecord(config, result, device_images_per_sec, cpu.machine_busy);
    const Emulation& e = result.emulation();
    std::cout << absl::StrFormat("emulation: %d hosts, links %s, time scale %g", e.hosts(),
                                 e.link_gbps() > 0 ? absl::StrFormat("%g Gbit/s", e.link_gbps()) : "uncapped",
                                 e.time_scale());
    if (e.device_images_per_sec() > 0) {
      std::cout << absl::StrFormat("; scaling efficiency %.3f against one device at %.1f images/sec",
                                   e.scaling_efficiency(), e.device_images_per_sec());
      std::cout << (e.cpu_bound() ? absl::StrFormat("; CPU-BOUND, not valid: %s; try time_scale %g",
                                                    e.cpu_bound_reason(), e.suggested_time_scale())
                                  : std::string("; valid (this machine kept up)"));
    }
    std::cout << std::endl;
  }
  result.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  if (!options.run_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.run_dir, ec);
    if (ec)
      return absl::InternalError(absl::StrCat("cannot create run directory ", options.run_dir, ": ", ec.message()));
    const std::string path = options.run_dir + "/result.json";
    PSTRAIN_RETURN_IF_ERROR(WriteResultJson(result, path));
    std::cout << "result: " << path << std::endl;
  }
  return result;
}

}  // namespace pstrain
