#include "worker/trainer.h"

#include <cmath>
#include <deque>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/data/batcher.h"
#include "common/data/idx_reader.h"
#include "common/data/synthetic.h"
#include "common/metrics/throughput.h"
#include "common/placement.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "models/model.h"
#include "worker/ps_client.h"

namespace pstrain {
namespace {

struct Datasets {
  Dataset train;
  Dataset test;  // empty unless the chief evaluates
};

absl::StatusOr<Datasets> LoadData(const ExperimentConfig& config, bool need_test) {
  Datasets data;
  const DataConfig& dc = config.data();
  if (dc.source() == "fashion_mnist") {
    PSTRAIN_ASSIGN_OR_RETURN(data.train, LoadFashionMnist(dc.path(), "train"));
    if (need_test) {
      PSTRAIN_ASSIGN_OR_RETURN(data.test, LoadFashionMnist(dc.path(), "test"));
    }
    return data;
  }
  if (dc.source() == "synthetic") {
    const ModelConfig& mc = config.model();
    Shape shape = mc.input_shape_size() == 3 ? Shape(mc.input_shape().begin(), mc.input_shape().end())
                                             : Shape{1, 28, 28};
    const int classes = mc.has_num_classes() ? mc.num_classes() : 10;
    data.train = MakeSyntheticDataset(dc.synthetic_examples(), shape, classes, dc.shuffle_seed());
    if (need_test) data.test = MakeSyntheticDataset(dc.synthetic_examples(), shape, classes, dc.shuffle_seed() + 1);
    return data;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown data.source '", dc.source(), "'"));
}

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

// Sends heartbeats to every shard until stopped.
class HeartbeatThread {
 public:
  HeartbeatThread(PsClient* client, absl::Duration period, const std::atomic<int64_t>* step)
      : thread_([this, client, period, step] {
          while (!stop_.WaitForNotificationWithTimeout(period)) {
            absl::Status s = client->Heartbeat(step->load());
            if (!s.ok()) LOG(WARNING) << "heartbeat: " << s.message();
          }
        }) {}
  ~HeartbeatThread() {
    stop_.Notify();
    thread_.join();
  }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

void PrintBanner(const ExperimentConfig& config, const Model& model, int64_t total_steps, int worker_index) {
  const int workers = config.cluster().worker_hosts_size();
  const int batch = config.train().batch_size_per_device();
  std::cout << absl::StrFormat(
                   "Worker:      %d of %d%s\nModel:       %s\nDataset:     %s\nMode:        training\n"
                   "Batch size:  %d global (%d per device)\nNum batches: %d\nDevices:     ['%s']\n"
                   "Variables:   %s (%s, %d PS, %s, placement %s)\nOptimizer:   %s lr=%g\n==========\n"
                   "Step\tImg/sec\ttotal_loss\n",
                   worker_index, workers, worker_index == 0 ? " (chief)" : "", model.name(), config.data().source(),
                   batch * workers, batch, total_steps, config.device(), config.variable_update(),
                   config.consistency(), config.cluster().ps_hosts_size(), config.transport(), config.placement(),
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
  const bool sync = config.consistency() == "sync";
  const int num_workers = config.cluster().worker_hosts_size();
  const int batch = config.train().batch_size_per_device();
  const bool evaluate = chief && config.train().evaluate();

  PSTRAIN_ASSIGN_OR_RETURN(Datasets data, LoadData(config, evaluate));
  PSTRAIN_ASSIGN_OR_RETURN(
      ShardedBatcher batcher,
      ShardedBatcher::Create(&data.train, worker_index, num_workers, batch, config.data().shuffle_seed(),
                             config.data().shuffle()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceContext> device, CreateDeviceContext(Device::Cpu()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                           CreateModel(ResolveModelConfig(config, data.train), device.get()));
  std::vector<Variable>& variables = model->variables();

  std::vector<VariableShape> shapes;
  for (const Variable& v : variables) shapes.push_back({v.name, v.value.shape()});
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<VariablePart> parts,
                           PlanPlacement(shapes, config.cluster().ps_hosts_size(), config.placement(),
                                         config.partition_bytes()));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                           PsClient::Create(config, worker_index, transport, &variables, std::move(parts)));

  const int64_t total_steps = TotalSteps(config, data.train.num_examples);
  if (chief) {
    model->InitializeVariables(config.train().init_seed());
    PSTRAIN_RETURN_IF_ERROR(client->Init(total_steps));
    LOG(INFO) << "chief: initialised " << variables.size() << " variables (" << model->num_parameters()
              << " parameters) on " << client->num_shards() << " PS shards";
  }
  PrintBanner(config, *model, total_steps, worker_index);

  std::atomic<int64_t> current_step{0};
  HeartbeatThread heartbeat(client.get(), absl::Seconds(config.timeouts().heartbeat_seconds()), &current_step);

  ThroughputTracker throughput(batch, config.train().warmup_steps());
  Shape image_shape = {batch};
  image_shape.insert(image_shape.end(), data.train.example_shape.begin(), data.train.example_shape.end());
  Tensor images(image_shape);
  std::vector<int32_t> labels;
  std::deque<float> recent_losses;
  const absl::Duration pull_timeout =
      absl::Seconds(config.timeouts().sync_step_seconds() + config.timeouts().rpc_seconds());
  int64_t pulled_version = -1;
  int64_t dropped = 0;
  absl::Duration pull_wait;  // time spent in pulls after the first (sync/ssp waits show here)

  for (int64_t step = 0; step < total_steps; ++step) {
    current_step = step;
    const absl::Time t0 = absl::Now();
    // First pull waits for the chief's Init (and for the PS to come up).
    const bool first = pulled_version < 0;
    const int64_t want = (sync && !first) ? pulled_version + 1 : 0;
    const absl::Time pull_start = absl::Now();
    PSTRAIN_ASSIGN_OR_RETURN(
        pulled_version,
        client->Pull(want, first ? absl::Seconds(config.timeouts().startup_seconds()) : pull_timeout, first, step));
    if (!first) pull_wait += absl::Now() - pull_start;
    batcher.Fill(step, &images, &labels);
    const float loss = model->TrainStep(images, labels.data(), nullptr);
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrCat("worker ", worker_index, ": loss is ", loss, " at step ", step,
                                              " (diverged; lower optimizer.learning_rate?)"));
    }
    PSTRAIN_ASSIGN_OR_RETURN(int dropped_now, client->Push(pulled_version, step));
    dropped += dropped_now;
    throughput.RecordStep(step, absl::ToDoubleSeconds(absl::Now() - t0));
    recent_losses.push_back(loss);
    if (recent_losses.size() > 10) recent_losses.pop_front();
    if ((step + 1) % config.train().display_every() == 0 || step + 1 == total_steps) {
      std::cout << throughput.ProgressLine(step, loss) << std::endl;
    }
  }

  double final_loss = 0;
  for (float l : recent_losses) final_loss += l;
  if (!recent_losses.empty()) final_loss /= recent_losses.size();
  WorkerReport report;
  report.set_worker(worker_index);
  report.set_steps(total_steps);
  report.set_images_per_sec(throughput.mean_images_per_sec());
  report.set_images_per_sec_stddev(throughput.stddev());
  report.set_final_loss(final_loss);
  report.set_wall_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  std::cout << "----------------------------------------------------------------\n"
            << absl::StrFormat("worker %d total images/sec: %.2f", worker_index, throughput.mean_images_per_sec())
            << (dropped > 0 ? absl::StrCat(" (", dropped, " stale gradients dropped)") : "") << "\n"
            << absl::StrFormat("worker %d time in pulls: %.2f s (%.1f%% of the run)", worker_index,
                               absl::ToDoubleSeconds(pull_wait),
                               100.0 * absl::ToDoubleSeconds(pull_wait) /
                                   std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start)))
            << "\n"
            << "----------------------------------------------------------------" << std::endl;

  RunResult result;
  result.experiment = config.name();
  result.model = model->name();
  result.variable_update = config.variable_update();
  result.local_parameter_device = config.local_parameter_device();
  result.all_reduce_spec = config.all_reduce_spec();
  result.consistency = config.consistency();
  result.staleness = config.staleness();
  result.transport = config.transport();
  result.num_ps = config.cluster().ps_hosts_size();
  result.num_workers = num_workers;
  result.devices_per_worker = config.devices_per_worker();
  result.device = config.device();
  result.batch_size_per_device = batch;
  result.global_batch_size = static_cast<int64_t>(batch) * num_workers * config.devices_per_worker();
  result.steps = total_steps;
  result.images_per_sec = throughput.mean_images_per_sec();
  result.images_per_sec_stddev = throughput.stddev();
  result.final_loss = final_loss;

  if (!chief) {
    PSTRAIN_RETURN_IF_ERROR(client->Done(report));
    result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return result;
  }

  // Chief: wait for every other worker's report (a lost worker is reported
  // by the PS: sync PS exits, async PS lists it as lost).
  std::vector<WorkerReport> reports = {report};
  std::vector<int> lost;
  while (true) {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<StatsResponse> stats, client->Stats());
    const StatsResponse& s0 = stats[0];
    lost.assign(s0.lost().begin(), s0.lost().end());
    if (s0.done_size() + static_cast<int>(lost.size()) >= num_workers - 1) {
      reports.assign(1, report);
      for (const WorkerReport& r : s0.done()) reports.push_back(r);
      for (const StatsResponse& s : stats) {
        const ShardLoad& l = s.load();
        result.ps_load.push_back({l.shard(), l.variables(), l.variable_bytes(), l.bytes_in(), l.bytes_out(),
                                  l.applied_updates(), l.dropped_gradients(), l.apply_seconds()});
      }
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (!lost.empty()) LOG(WARNING) << "chief: workers [" << absl::StrJoin(lost, ",") << "] were lost";

  // Global throughput: the workers run concurrently, so their rates add up.
  double rate = 0, variance = 0, loss_sum = 0;
  for (const WorkerReport& r : reports) {
    rate += r.images_per_sec();
    variance += r.images_per_sec_stddev() * r.images_per_sec_stddev();
    loss_sum += r.final_loss();
  }
  result.images_per_sec = rate;
  result.images_per_sec_stddev = std::sqrt(variance);
  result.final_loss = loss_sum / reports.size();

  PSTRAIN_RETURN_IF_ERROR(client->Pull(0, pull_timeout).status());
  if (options.final_parameters != nullptr) {
    options.final_parameters->clear();
    for (const Variable& v : variables) {
      options.final_parameters->emplace_back(v.value.data(), v.value.data() + v.value.num_elements());
    }
  }
  if (evaluate) {
    EvalResult eval = EvaluateOn(*model, data.test, config.train().eval_batch_size());
    result.test_accuracy = eval.examples > 0 ? static_cast<double>(eval.correct) / eval.examples : 0.0;
    std::cout << absl::StrFormat("Accuracy @ 1 = %.4f (%d of %d test examples), test loss %.4f",
                                 *result.test_accuracy, eval.correct, eval.examples, eval.mean_loss)
              << std::endl;
  }
  std::cout << absl::StrFormat("total images/sec: %.2f +/- %.2f (%d workers)", result.images_per_sec,
                               result.images_per_sec_stddev, num_workers)
            << std::endl;
  result.wall_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  PSTRAIN_RETURN_IF_ERROR(client->Done(report));
  if (!options.run_dir.empty()) {
    const std::string path = options.run_dir + "/result.json";
    PSTRAIN_RETURN_IF_ERROR(WriteResultJson(result, path));
    std::cout << "result: " << path << std::endl;
  }
  return result;
}

}  // namespace pstrain
