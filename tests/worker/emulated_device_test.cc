// device emulated: rates from profiles, modelled step times, the checks of
// the `emulation:` section, and the verdict on whether a run was CPU-bound.
#include "worker/emulated_device.h"

#include <memory>
#include <string>

#include "common/config/config_loader.h"
#include "device/device_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/emulation_report.h"
#include "worker/pipeline_tuning.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

ExperimentConfig Config(const std::string& yaml) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(
      "cluster: {worker_hosts: [\"w:1\", \"w:2\"]}\ndata: {source: synthetic}\nvariable_update: allreduce\n" + yaml,
      "exp.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ExperimentConfig();
}

std::string Refusal(const std::string& yaml) {
  absl::Status s = ValidateExperimentConfig(Config(yaml), "exp.yaml");
  EXPECT_FALSE(s.ok()) << yaml;
  return std::string(s.message());
}

TEST(EmulatedDevice, TheResNet50ReferenceFlopsAreTheZoos) {
  auto ctx = CreateDeviceContext(Device::Cpu());
  ASSERT_TRUE(ctx.ok());
  ModelConfig config;
  config.set_name("resnet50");
  for (int d : {3, 224, 224}) config.add_input_shape(d);
  config.set_num_classes(1000);
  auto model = CreateModel(config, ctx->get());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ForwardFlopsPerExample(), kResNet50ForwardFlops);
}

TEST(EmulatedDevice, RatesFromProfilesOrGivenDirectly) {
  ExperimentConfig c = Config("device: emulated\nemulation: {device_profile: p100}\n");
  EXPECT_EQ(*EmulatedImagesPerSecond(c, "resnet50", kResNet50ForwardFlops), 221.0);
  // Another model: scaled by the reference's FLOPs over its own.
  EXPECT_DOUBLE_EQ(*EmulatedImagesPerSecond(c, "vgg16", 2 * kResNet50ForwardFlops), 110.5);
  EXPECT_THAT(std::string(EmulatedImagesPerSecond(c, "odd", 0).status().message()),
              HasSubstr("counts no FLOPs to scale the profile by"));
  c.mutable_emulation()->set_images_per_second(500);
  EXPECT_EQ(*EmulatedImagesPerSecond(c, "resnet50", kResNet50ForwardFlops), 500.0);
}

TEST(EmulatedDevice, AStepIsAThirdForwardTwoThirdsBackwardTimesTheScale) {
  ExperimentConfig c = Config(
      "device: emulated\ntrain: {batch_size_per_device: 64}\n"
      "emulation: {images_per_second: 200, time_scale: 10}\n");
  const EmulatedCompute compute = ModelledCompute(c, 200);
  EXPECT_NEAR(absl::ToDoubleSeconds(compute.forward), 64.0 / 200 * 10 / 3, 1e-9);
  EXPECT_NEAR(absl::ToDoubleSeconds(compute.backward), 64.0 / 200 * 10 * 2 / 3, 1e-9);
}

TEST(EmulatedDevice, TheSectionIsCheckedNamingTheField) {
  EXPECT_THAT(Refusal("device: emulated\n"),
              HasSubstr("field 'emulation': expected a section with device_profile or images_per_second"));
  EXPECT_THAT(Refusal("device: emulated\nemulation: {link_gbps: 1}\n"),
              HasSubstr("field 'emulation.device_profile': expected one of p100, or emulation.images_per_second > 0"));
  EXPECT_THAT(Refusal("device: emulated\nemulation: {device_profile: k80}\n"),
              HasSubstr("field 'emulation.device_profile': expected one of p100, got 'k80'"));
  EXPECT_THAT(Refusal("emulation: {device_profile: p100}\n"),
              HasSubstr("field 'emulation.device_profile': expected none unless device is emulated"));
  EXPECT_THAT(Refusal("emulation: {time_scale: 4}\n"),
              HasSubstr("field 'emulation.time_scale': expected 1 unless device is emulated"));
  EXPECT_THAT(Refusal("emulation: {link_gbps: -1}\n"), HasSubstr("field 'emulation.link_gbps'"));
  EXPECT_THAT(Refusal("emulation: {workers_per_host: 0}\n"), HasSubstr("field 'emulation.workers_per_host'"));
  EXPECT_THAT(Refusal("device: emulated\ntrain: {eval_every_steps: 10}\nemulation: {device_profile: p100}\n"),
              HasSubstr("field 'train.eval_every_steps': expected 0 with device emulated"));
  const absl::Status valid = ValidateExperimentConfig(
      Config("device: emulated\nemulation: {device_profile: p100, time_scale: 5}\n"), "exp.yaml");
  EXPECT_TRUE(valid.ok()) << valid;
}

TEST(EmulatedDevice, LinkChangesAreCheckedNamingTheChange) {
  EXPECT_THAT(Refusal("emulation: {link_changes: [{after_seconds: 0, gbps: 2}]}\n"),
              HasSubstr("field 'emulation.link_changes[0].after_seconds': expected > 0, got 0"));
  EXPECT_THAT(Refusal("emulation: {link_changes: [{after_seconds: 30, gbps: 2}, {after_seconds: 30, gbps: 8}]}\n"),
              HasSubstr("field 'emulation.link_changes[1].after_seconds': expected > 30 (the change before it)"));
  EXPECT_THAT(Refusal("emulation: {link_changes: [{after_seconds: 30}]}\n"),
              HasSubstr("field 'emulation.link_changes[0].gbps'"));
  EXPECT_THAT(Refusal("emulation: {link_changes: [{after_seconds: 30, gbps: 500}]}\n"),
              HasSubstr("field 'emulation.link_changes[0].gbps'"));
  const absl::Status valid = ValidateExperimentConfig(
      Config("emulation: {link_gbps: 8, link_changes: [{after_seconds: 30, gbps: 2}, {after_seconds: 60, gbps: 8}]}\n"),
      "exp.yaml");
  EXPECT_TRUE(valid.ok()) << valid;
}

TEST(EmulatedDevice, TheHostTopologyIsCheckedNamingTheField) {
  const std::string emulated = "device: emulated\nvariable_update: replicated\n";
  auto refusal = [&](const std::string& yaml) {
    const std::string one_worker = "cluster: {worker_hosts: [\"w:1\"]}\n";
    absl::StatusOr<ExperimentConfig> c =
        ParseExperimentYaml(one_worker + "data: {source: synthetic}\n" + emulated + yaml, "exp.yaml");
    EXPECT_TRUE(c.ok()) << c.status();
    const absl::Status s = ValidateExperimentConfig(*c, "exp.yaml");
    return s.ok() ? std::string("accepted") : std::string(s.message());
  };
  EXPECT_THAT(refusal("emulation: {device_profile: p100, topology: dgx9}\n"),
              HasSubstr("field 'emulation.topology': expected one of p100_pcie, v100_nvlink, got 'dgx9'"));
  EXPECT_THAT(refusal("devices_per_worker: 9\nemulation: {device_profile: p100, topology: p100_pcie}\n"),
              HasSubstr("field 'devices_per_worker': expected at most 8 with emulation.topology p100_pcie"));
  EXPECT_THAT(refusal("emulation: {device_profile: p100, topology: p100_pcie, workers_per_host: 2}\n"),
              HasSubstr("field 'emulation.workers_per_host': expected 1 with emulation.topology"));
  EXPECT_THAT(refusal("emulation: {device_profile: p100, topology: p100_pcie, collective_compute_share: 1}\n"),
              HasSubstr("field 'emulation.collective_compute_share'"));
  EXPECT_THAT(Refusal("emulation: {topology: p100_pcie}\n"),
              HasSubstr("field 'emulation.topology': expected empty unless device is emulated"));
  // local_parameter_device gpu: the emulated devices stand for GPUs only
  // inside an emulated host.
  const std::string ps = "variable_update: parameter_server\ncluster: {ps_hosts: [\"p:1\"], worker_hosts: [\"w:1\"]}\n";
  auto ps_refusal = [&](const std::string& yaml) {
    absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(
        "data: {source: synthetic}\ndevice: emulated\nlocal_parameter_device: gpu\n" + ps + yaml, "exp.yaml");
    EXPECT_TRUE(c.ok()) << c.status();
    const absl::Status s = ValidateExperimentConfig(*c, "exp.yaml");
    return s.ok() ? std::string("accepted") : std::string(s.message());
  };
  EXPECT_THAT(ps_refusal("emulation: {device_profile: p100}\n"),
              HasSubstr("field 'local_parameter_device': expected cpu with device emulated unless emulation.topology"));
  EXPECT_EQ(ps_refusal("devices_per_worker: 8\nemulation: {device_profile: p100, topology: p100_pcie}\n"), "accepted");
  EXPECT_EQ(refusal("all_reduce_spec: nccl\ndevices_per_worker: 4\nemulation: {device_profile: p100, topology: "
                    "v100_nvlink}\n"),
            "accepted");
}

// The interconnect of an emulated host: for the worker's devices, dilated
// by the time scale; none without a topology.
TEST(EmulatedDevice, TheHostInterconnectFollowsTheConfig) {
  ExperimentConfig c = Config("device: emulated\ndevices_per_worker: 4\nemulation: {device_profile: p100}\n");
  EXPECT_EQ(*EmulatedHostInterconnect(c), nullptr);
  EXPECT_FALSE(EmulatedTopology(c));
  c.mutable_emulation()->set_topology("v100_nvlink");
  absl::StatusOr<std::shared_ptr<EmulatedInterconnect>> interconnect = EmulatedHostInterconnect(c);
  ASSERT_TRUE(interconnect.ok()) << interconnect.status();
  ASSERT_NE(*interconnect, nullptr);
  EXPECT_EQ((*interconnect)->devices(), 4);
  EXPECT_EQ((*interconnect)->profile().name, "v100_nvlink");
  EXPECT_TRUE(EmulatedTopology(c));
}

// A sync PS cluster of emulated devices, with `yaml` added.
ExperimentConfig PsConfig(const std::string& yaml) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml(
      "cluster: {ps_hosts: [\"p:1\"], worker_hosts: [\"w:1\", \"w:2\"]}\ndata: {source: synthetic}\n"
      "variable_update: parameter_server\ndevice: emulated\n" +
          yaml,
      "exp.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ExperimentConfig();
}

TEST(EmulatedDevice, AByteScaleDividesTheLayoutsByteSizes) {
  const ExperimentConfig as_written = PsConfig(
      "partition_bytes: 4194304\nfusion_threshold_bytes: 0\nps_scheduling: {window_bytes: 1000001}\n"
      "emulation: {device_profile: p100, time_scale: 5}\n");
  const ExperimentConfig scaled = WithScaledLayoutBytes(as_written, 4);
  EXPECT_EQ(scaled.partition_bytes(), 1048576);
  EXPECT_EQ(scaled.fusion_threshold_bytes(), 0);             // one all-reduce per variable stays so
  EXPECT_EQ(scaled.ps_scheduling().batch_bytes(), 524288);   // the default 2 MiB
  EXPECT_EQ(scaled.ps_scheduling().window_bytes(), 250001);  // rounded up
  // The window as written turned the tuner off; it stays off.
  EXPECT_FALSE(TuningOn(as_written));
  EXPECT_FALSE(TuningOn(scaled));
  // Nothing set: the tuner's default (on with the pipeline) survives the
  // batch_bytes the scaling sets.
  const ExperimentConfig defaults = PsConfig("emulation: {device_profile: p100}\n");
  EXPECT_TRUE(TuningOn(defaults));
  EXPECT_TRUE(TuningOn(WithScaledLayoutBytes(defaults, 4)));
  EXPECT_EQ(WithScaledLayoutBytes(defaults, 4).fusion_threshold_bytes(), 16777216);  // 64 MiB / 4
  // Byte scale 1, or a real device: the config as written.
  EXPECT_EQ(WithScaledLayoutBytes(as_written, 1).DebugString(), as_written.DebugString());
  ExperimentConfig real = as_written;
  real.set_device("cpu");
  EXPECT_EQ(WithScaledLayoutBytes(real, 4).DebugString(), real.DebugString());
}

RunResult TwoWorkers(double rate, double cores0, double cores1) {
  RunResult r;
  r.set_images_per_sec(rate);
  for (double cores : {cores0, cores1}) {
    WorkerReport* w = r.add_workers();
    w->set_worker(r.workers_size() - 1);
    w->set_cpu_cores(cores);
  }
  return r;
}

TEST(EmulationRecord, EfficiencyAgainstOneDeviceAndTheCpuVerdict) {
  ExperimentConfig c = Config(
      "device: emulated\nemulation: {device_profile: p100, time_scale: 8, link_gbps: 8, "
      "workers_per_host: 2}\n");
  Emulation ok = EmulationRecord(c, TwoWorkers(360, 0.1, 0.2), 200, 0.3);
  EXPECT_EQ(ok.hosts(), 1);
  EXPECT_DOUBLE_EQ(ok.scaling_efficiency(), 0.9);
  EXPECT_FALSE(ok.cpu_bound());
  EXPECT_DOUBLE_EQ(ok.max_worker_cpu_cores(), 0.2);

  Emulation busy = EmulationRecord(c, TwoWorkers(360, 0.1, 0.2), 200, 0.75);
  EXPECT_TRUE(busy.cpu_bound());
  EXPECT_THAT(busy.cpu_bound_reason(), HasSubstr("this machine's CPUs were 75% busy"));
  EXPECT_EQ(busy.suggested_time_scale(), 24);  // 8 x 0.75 / 0.25

  Emulation worker = EmulationRecord(c, TwoWorkers(360, 0.1, 0.9), 200, 0.3);
  EXPECT_TRUE(worker.cpu_bound());
  EXPECT_THAT(worker.cpu_bound_reason(), HasSubstr("worker 1 kept 0.90 cores busy (limit 0.25)"));
  EXPECT_EQ(worker.suggested_time_scale(), 58);  // ceil(8 x 0.9 / 0.125)

  // A real device sets its own pace: no verdict.
  ExperimentConfig real = Config("emulation: {link_gbps: 1}\n");
  Emulation record = EmulationRecord(real, TwoWorkers(360, 2, 2), 0, 0.99);
  EXPECT_FALSE(record.cpu_bound());
  EXPECT_EQ(record.hosts(), 2);
}

}  // namespace
}  // namespace pstrain
