// Plays the Kubernetes operators on one machine: reads the shipped manifests
// (deploy/k8s/), builds every replica's environment as the operator would
// (TF_CONFIG per replica for the TFJob; RANK from the completion index for
// the Indexed Job), and runs each pod's command on its own emulated host (a
// network namespace with its own address; the pods' DNS names in its
// /etc/hosts). The cluster must train and every process exit 0 by itself.
// Needs root for the namespaces; skips saying so otherwise.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::test {
namespace {

namespace fs = std::filesystem;
using launch::EmulatedHosts;

// One pod to run: its DNS names, command line and extra environment.
struct Pod {
  std::string name;
  std::vector<std::string> dns_names;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // NAME=value
  int same_host_as = -1;         // >= 0: runs on that earlier pod's host (several tasks per node)
};

std::vector<YAML::Node> Documents(const std::string& manifest) { return YAML::LoadAllFromFile(SourcePath(manifest)); }

const YAML::Node* FindKind(const std::vector<YAML::Node>& docs, const std::string& kind) {
  for (const YAML::Node& doc : docs) {
    if (doc["kind"].as<std::string>() == kind) return &doc;
  }
  return nullptr;
}

// Stands in for the pod's volumes: every mountPath of `container` becomes a
// directory under `root`; the ConfigMap's files are written into theirs.
class Volumes {
 public:
  Volumes(const YAML::Node& pod_spec, const YAML::Node& container, const YAML::Node& config_map,
          const std::string& root) {
    for (const YAML::Node& mount : container["volumeMounts"]) {
      const std::string where = root + mount["mountPath"].as<std::string>();
      fs::create_directories(where);
      mounts_[mount["mountPath"].as<std::string>()] = where;
    }
    // The ConfigMap's files once every mount is known: a config naming
    // another volume's path (checkpoint.dir: /shared/...) must point there.
    for (const YAML::Node& mount : container["volumeMounts"]) {
      for (const YAML::Node& volume : pod_spec["volumes"]) {
        if (volume["name"].as<std::string>() != mount["name"].as<std::string>() || !volume["configMap"]) continue;
        for (const auto& file : config_map["data"]) {
          WriteFile(Dir(mount["mountPath"].as<std::string>()) + "/" + file.first.as<std::string>(),
                    Rewrite(file.second.as<std::string>()));
        }
      }
    }
  }
  // `text` with every mount path replaced by its directory.
  std::string Rewrite(const std::string& text) const {
    std::string out = text;
    for (const auto& [path, dir] : mounts_) out = absl::StrReplaceAll(out, {{path + "/", dir + "/"}});
    return out;
  }
  const std::string& Dir(const std::string& mount_path) const { return mounts_.at(mount_path); }

 private:
  std::map<std::string, std::string> mounts_;
};

// The container's command and args with our binaries (the image has them
// on PATH) and volumes.
std::vector<std::string> CommandLine(const YAML::Node& container, const Volumes& volumes) {
  std::vector<std::string> argv;
  for (const char* key : {"command", "args"}) {
    for (const YAML::Node& part : container[key]) {
      const std::string word = part.as<std::string>();
      argv.push_back(word == "pstrain-ps" || word == "pstrain-worker" ? BinDir() + "/" + word : volumes.Rewrite(word));
    }
  }
  return argv;
}

class DeployTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  }

  // Runs every pod on its own host; true when all exit 0 by themselves.
  void RunPods(const std::vector<Pod>& pods, int subnet) {
    std::vector<std::vector<std::string>> names;
    std::vector<int> host_of;  // pod -> host
    for (const Pod& pod : pods) {
      if (pod.same_host_as >= 0) {
        host_of.push_back(host_of.at(pod.same_host_as));
        continue;
      }
      host_of.push_back(static_cast<int>(names.size()));
      names.push_back(pod.dns_names);
    }
    absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts = EmulatedHosts::Create(names, subnet);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    if (before_start_) before_start_(**hosts);
    std::vector<Subprocess> running;
    for (size_t i = 0; i < pods.size(); ++i) {
      if (pods[i].argv.empty()) {  // a host the operator's launcher reaches by itself
        running.emplace_back();
        continue;
      }
      std::vector<std::string> argv = (*hosts)->RunOn(host_of[i]);
      argv.push_back("/usr/bin/env");
      argv.insert(argv.end(), pods[i].env.begin(), pods[i].env.end());
      argv.insert(argv.end(), pods[i].argv.begin(), pods[i].argv.end());
      const std::string capture = dir_.path() + "/logs/" + pods[i].name;
      fs::create_directories(capture);
      running.push_back(Spawn(argv, capture));
    }
    for (size_t i = 0; i < pods.size(); ++i) {
      if (pods[i].argv.empty()) continue;
      std::optional<int> status = WaitForExit(running[i].pid, std::chrono::minutes(5));
      EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
          << pods[i].name << " on " << (*hosts)->address(host_of[i]) << ":\n"
          << running[i].out() << running[i].err();
      outputs_[pods[i].name] = running[i].out() + running[i].err();
    }
  }

  // The run's result.json, after checking it trained with `ps` shards and
  // `workers` workers to the target.
  RunResult ExpectTrained(const std::string& result_json, int ps, int workers) {
    absl::StatusOr<RunResult> result = ReadResultJson(result_json);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return RunResult{};
    EXPECT_EQ(result->num_ps(), ps);
    EXPECT_EQ(result->num_workers(), workers);
    EXPECT_EQ(result->workers_size(), workers);
    EXPECT_TRUE(result->has_test_accuracy());
    EXPECT_GE(result->test_accuracy(), 0.84);
    return *result;
  }

  TempDir dir_;
  std::map<std::string, std::string> outputs_;
  // Called once the hosts exist, before any pod starts.
  std::function<void(const EmulatedHosts&)> before_start_;
};

TEST_F(DeployTest, TfJobOfTwoPsAndThreeWorkersTrainsWithRolesFromTfConfig) {
  const std::vector<YAML::Node> docs = Documents("deploy/k8s/tfjob.yaml");
  const YAML::Node* job = FindKind(docs, "TFJob");
  const YAML::Node* config_map = FindKind(docs, "ConfigMap");
  ASSERT_NE(job, nullptr);
  ASSERT_NE(config_map, nullptr);
  const std::string name = (*job)["metadata"]["name"].as<std::string>();
  // The operator's TF_CONFIG cluster: <job>-<type>-<i>.<namespace>.svc:2222.
  std::map<std::string, std::vector<std::string>> cluster;
  for (const auto& [type, key] : std::vector<std::pair<std::string, std::string>>{{"ps", "PS"}, {"worker", "Worker"}}) {
    const int replicas = (*job)["spec"]["tfReplicaSpecs"][key]["replicas"].as<int>();
    for (int i = 0; i < replicas; ++i) cluster[type].push_back(absl::StrCat(name, "-", type, "-", i, ".default.svc"));
  }
  auto quoted = [](const std::vector<std::string>& hosts) {
    std::vector<std::string> q;
    for (const std::string& h : hosts) q.push_back(absl::StrCat("\"", h, ":2222\""));
    return absl::StrCat("[", absl::StrJoin(q, ", "), "]");
  };
  const std::string shared = dir_.path() + "/shared";  // the ReadWriteMany claim: one for all pods
  std::vector<Pod> pods;
  for (const auto& [type, key] : std::vector<std::pair<std::string, std::string>>{{"ps", "PS"}, {"worker", "Worker"}}) {
    const YAML::Node spec = (*job)["spec"]["tfReplicaSpecs"][key]["template"]["spec"];
    const YAML::Node container = spec["containers"][0];
    ASSERT_EQ(container["name"].as<std::string>(), "tensorflow") << "the TFJob operator configures this container";
    for (size_t i = 0; i < cluster[type].size(); ++i) {
      Pod pod;
      pod.name = absl::StrCat(name, "-", type, "-", i);
      pod.dns_names = {cluster[type][i]};
      const std::string root = dir_.path() + "/pods/" + pod.name;
      Volumes volumes(spec, container, *config_map, root);
      fs::remove_all(volumes.Dir("/shared"));
      fs::create_directories(shared);
      fs::create_directory_symlink(shared, volumes.Dir("/shared"));
      pod.argv = CommandLine(container, volumes);
      pod.env = {absl::StrCat(R"(TF_CONFIG={"cluster": {"ps": )", quoted(cluster["ps"]), R"(, "worker": )",
                              quoted(cluster["worker"]), R"(}, "task": {"type": ")", type, R"(", "index": )", i,
                              R"(}, "environment": "cloud"})")};
      pods.push_back(std::move(pod));
    }
  }
  ASSERT_EQ(pods.size(), 5u);
  // Nothing may land in this machine's own /shared.
  ASSERT_FALSE(
      absl::StrContains(ReadFile(dir_.path() + "/pods/" + name + "-ps-0/etc/pstrain/experiment.yaml"), " /shared/"));
  RunPods(pods, /*subnet=*/213 * 256 + 11);
  ExpectTrained(shared + "/run/result.json", 2, 3);
  EXPECT_TRUE(absl::StrContains(outputs_[name + "-worker-0"], "Accuracy @ 1")) << outputs_[name + "-worker-0"];
}

TEST_F(DeployTest, IndexedJobPodsTakeTheirRolesFromTheirCompletionIndex) {
  const std::vector<YAML::Node> docs = Documents("deploy/k8s/indexed-job.yaml");
  const YAML::Node* job = FindKind(docs, "Job");
  const YAML::Node* config_map = FindKind(docs, "ConfigMap");
  const YAML::Node* service = FindKind(docs, "Service");
  ASSERT_NE(job, nullptr);
  ASSERT_NE(config_map, nullptr);
  ASSERT_NE(service, nullptr);
  const std::string name = (*job)["metadata"]["name"].as<std::string>();
  const YAML::Node spec = (*job)["spec"]["template"]["spec"];
  ASSERT_EQ((*job)["spec"]["completionMode"].as<std::string>(), "Indexed");
  ASSERT_EQ(spec["subdomain"].as<std::string>(), (*service)["metadata"]["name"].as<std::string>());
  const YAML::Node container = spec["containers"][0];
  const int completions = (*job)["spec"]["completions"].as<int>();
  std::vector<Pod> pods;
  for (int index = 0; index < completions; ++index) {
    Pod pod;
    pod.name = absl::StrCat(name, "-", index);
    pod.dns_names = {absl::StrCat(pod.name, ".", spec["subdomain"].as<std::string>())};
    Volumes volumes(spec, container, *config_map, dir_.path() + "/pods/" + pod.name);
    pod.argv = CommandLine(container, volumes);
    for (const YAML::Node& env : container["env"]) {
      const std::string key = env["name"].as<std::string>();
      if (env["value"]) {
        pod.env.push_back(absl::StrCat(key, "=", env["value"].as<std::string>()));
      } else {
        ASSERT_EQ(env["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
                  "metadata.annotations['batch.kubernetes.io/job-completion-index']");
        pod.env.push_back(absl::StrCat(key, "=", index));  // what the Job controller annotates
      }
    }
    pods.push_back(std::move(pod));
  }
  ASSERT_EQ(pods.size(), 5u);
  RunPods(pods, /*subnet=*/213 * 256 + 12);
  // Ranks 0-1 ran pstrain-ps; the chief is rank 2, with its own emptyDir.
  EXPECT_TRUE(absl::StrContains(outputs_[name + "-0"], "RANK=0, WORLD_SIZE=5 (PyTorchJob style): ps 0"))
      << outputs_[name + "-0"];
  EXPECT_TRUE(absl::StrContains(outputs_[name + "-2"], "RANK=2, WORLD_SIZE=5 (PyTorchJob style): worker 0"))
      << outputs_[name + "-2"];
  ExpectTrained(dir_.path() + "/pods/" + name + "-2/shared/run/result.json", 2, 3);
}

TEST_F(DeployTest, MpiJobRunsTheAllReduceRanksOnTheWorkerPodsThroughMpirun) {
  const std::vector<YAML::Node> docs = Documents("deploy/k8s/mpijob.yaml");
  const YAML::Node* job = FindKind(docs, "MPIJob");
  const YAML::Node* config_map = FindKind(docs, "ConfigMap");
  ASSERT_NE(job, nullptr);
  ASSERT_NE(config_map, nullptr);
  const std::string name = (*job)["metadata"]["name"].as<std::string>();
  const YAML::Node specs = (*job)["spec"]["mpiReplicaSpecs"];
  const YAML::Node launcher_spec = specs["Launcher"]["template"]["spec"];
  const YAML::Node worker_spec = specs["Worker"]["template"]["spec"];
  const int workers = specs["Worker"]["replicas"].as<int>();
  // The test's pods share one filesystem: the ranks (on the worker pods)
  // see the worker pods' volumes, so the command line is read with those.
  Volumes worker_volumes(worker_spec, worker_spec["containers"][0], *config_map, dir_.path() + "/pods/worker");
  Volumes launcher_volumes(launcher_spec, launcher_spec["containers"][0], *config_map, dir_.path() + "/pods/launcher");
  // What mpi-operator v2 writes: the hostfile, one line per worker pod.
  std::vector<Pod> pods;
  Pod launcher;
  launcher.name = name + "-launcher";
  launcher.dns_names = {launcher.name};
  launcher.argv = CommandLine(launcher_spec["containers"][0], worker_volumes);
  std::string hostfile;
  for (int i = 0; i < workers; ++i) {
    Pod worker;
    worker.name = absl::StrCat(name, "-worker-", i);
    const std::string fqdn = absl::StrCat(worker.name, ".", name, "-worker.default.svc");
    worker.dns_names = {fqdn, worker.name};
    absl::StrAppend(&hostfile, fqdn, " slots=", (*job)["spec"]["slotsPerWorker"].as<int>(), "\n");
    pods.push_back(std::move(worker));
  }
  WriteFile(dir_.path() + "/hostfile", hostfile);
  // Where ssh would go, this agent goes: into the host's namespace, running
  // the command line as the remote shell would.
  const std::string agent = dir_.path() + "/rsh-agent.sh";
  const std::string host_map = dir_.path() + "/hosts-to-namespaces";
  launcher.env = {"OMPI_MCA_orte_default_hostfile=" + dir_.path() + "/hostfile", "OMPI_MCA_plm_rsh_agent=" + agent};
  pods.push_back(launcher);
  before_start_ = [&](const EmulatedHosts& hosts) {
    // The same ip (absolute path) RunOn uses: the agent runs without our PATH.
    WriteExecutable(agent, absl::StrCat("#!/bin/sh\nhost=\"$1\"; shift\n",
                                        "ns=$(awk -v h=\"$host\" '$1 == h {print $2}' ", host_map, ")\n",
                                        "[ -n \"$ns\" ] || { echo \"rsh-agent: unknown host $host\" >&2; exit 255; }\n",
                                        "exec ", hosts.RunOn(0)[0], " netns exec \"$ns\" sh -c \"$*\"\n"));
    std::string map;
    for (int i = 0; i < workers; ++i) {
      for (const std::string& dns : pods[i].dns_names) absl::StrAppend(&map, dns, " ", hosts.namespace_name(i), "\n");
    }
    WriteFile(host_map, map);
  };
  RunPods(pods, /*subnet=*/213 * 256 + 13);
  const std::string out = outputs_[launcher.name];
  EXPECT_TRUE(absl::StrContains(out, "Accuracy @ 1")) << out;
  const RunResult result = ExpectTrained(worker_volumes.Dir("/shared") + "/run/result.json", 0, workers);
  EXPECT_EQ(result.variable_update(), "allreduce");
  EXPECT_EQ(result.collective(), "mpi");
}

// An srun step of 4 tasks on 2 nodes (2 per node) of the shipped sync MLP
// whose config lists no host: each task works out every rank's host:port
// from the node list and tasks per node, as on a Slurm cluster.
TEST_F(DeployTest, SrunTasksOnTwoNodesTakeTheHostListsFromTheNodeList) {
  std::string yaml = ReadFile(SourcePath("configs/fashion_mnist_mlp_sync.yaml"));
  yaml = absl::StrReplaceAll(yaml, {{R"(  ps_hosts: ["localhost:2222", "localhost:2223"])", "  num_ps: 2"},
                                    {R"(  worker_hosts: ["localhost:2224", "localhost:2225"])"
                                     "\n",
                                     ""},
                                    {"epochs: 3", "epochs: 1"}});
  WriteFile(dir_.path() + "/exp.yaml", yaml);
  std::vector<Pod> pods;
  for (int rank = 0; rank < 4; ++rank) {
    const int node = rank / 2;
    Pod task;
    task.name = absl::StrCat("task", rank);
    if (rank % 2 == 0) task.dns_names = {absl::StrCat("node0", node + 1)};
    if (rank % 2 == 1) task.same_host_as = rank - 1;
    task.env = {absl::StrCat("SLURM_PROCID=", rank),
                "SLURM_NTASKS=4",
                "SLURM_JOB_NODELIST=node[01-02]",
                "SLURM_TASKS_PER_NODE=2(x2)",
                absl::StrCat("SLURMD_NODENAME=node0", node + 1),
                absl::StrCat("SLURM_LOCALID=", rank % 2)};
    task.argv = {BinDir() + "/pstrain-worker", "--config=" + dir_.path() + "/exp.yaml",
                 "--run_dir=" + dir_.path() + "/run"};
    pods.push_back(std::move(task));
  }
  RunPods(pods, /*subnet=*/213 * 256 + 14);
  EXPECT_TRUE(absl::StrContains(outputs_["task3"],
                                "cluster: ps_hosts [node01:2222, node01:2223] worker_hosts [node02:2222, node02:2223]"))
      << outputs_["task3"];
  ExpectTrained(dir_.path() + "/run/result.json", 2, 2);
}

// The GPU TFJob cannot train here, but it must be consistent: PS replicas on
// the CPU image asking for no GPU, every worker asking for exactly the GPUs
// its config uses, on the CUDA image, and every replica's role accepting
// the config under the operator's TF_CONFIG (--check_config).
TEST(DeployManifests, GpuTfJobAsksEveryWorkerForTheGpusItsConfigUses) {
  TempDir dir;
  const std::vector<YAML::Node> docs = Documents("deploy/k8s/tfjob-gpu.yaml");
  const YAML::Node* job = FindKind(docs, "TFJob");
  const YAML::Node* config_map = FindKind(docs, "ConfigMap");
  ASSERT_NE(job, nullptr);
  ASSERT_NE(config_map, nullptr);
  const YAML::Node experiment = YAML::Load((*config_map)["data"]["experiment.yaml"].as<std::string>());
  ASSERT_EQ(experiment["device"].as<std::string>(), "gpu");
  const int gpus_per_worker = experiment["devices_per_worker"].as<int>();
  const YAML::Node specs = (*job)["spec"]["tfReplicaSpecs"];
  const int num_ps = specs["PS"]["replicas"].as<int>(), num_workers = specs["Worker"]["replicas"].as<int>();
  std::vector<std::string> ps, workers;
  for (int i = 0; i < num_ps; ++i) ps.push_back(absl::StrCat("\"ps-", i, ":2222\""));
  for (int i = 0; i < num_workers; ++i) workers.push_back(absl::StrCat("\"worker-", i, ":2222\""));
  for (const auto& [type, key] : std::vector<std::pair<std::string, std::string>>{{"ps", "PS"}, {"worker", "Worker"}}) {
    const YAML::Node spec = specs[key]["template"]["spec"];
    const YAML::Node container = spec["containers"][0];
    const YAML::Node limits = container["resources"]["limits"];
    if (type == "ps") {
      EXPECT_EQ(container["image"].as<std::string>(), "pstrain:cpu");
      EXPECT_FALSE(limits && limits["nvidia.com/gpu"]) << "a PS uses no GPU";
    } else {
      EXPECT_EQ(container["image"].as<std::string>(), "pstrain:cuda");
      ASSERT_TRUE(limits && limits["nvidia.com/gpu"]) << "a GPU worker must ask for its GPUs";
      EXPECT_EQ(limits["nvidia.com/gpu"].as<int>(), gpus_per_worker);
    }
    Volumes volumes(spec, container, *config_map, dir.path() + "/" + type);
    std::vector<std::string> argv = {
        "/usr/bin/env",
        absl::StrCat(R"(TF_CONFIG={"cluster": {"ps": [)", absl::StrJoin(ps, ", "), R"(], "worker": [)",
                     absl::StrJoin(workers, ", "), R"(]}, "task": {"type": ")", type, R"(", "index": 1}})")};
    for (const std::string& word : CommandLine(container, volumes)) argv.push_back(word);
    argv.push_back("--check_config");
    Subprocess check = Spawn(argv, dir.path());
    std::optional<int> status = WaitForExit(check.pid, std::chrono::seconds(60));
    ASSERT_TRUE(status && WIFEXITED(*status)) << type << ":\n" << check.err();
    if (type == "worker" && WEXITSTATUS(*status) == 2 &&
        absl::StrContains(check.err(), "device gpu: no CUDA device is usable on this machine")) {
      // This machine has no GPU: the worker's check parsed everything and
      // refused only the device, as on any CPU machine (exit 2, the reason).
      continue;
    }
    EXPECT_EQ(WEXITSTATUS(*status), 0) << type << ":\n" << check.err();
    EXPECT_TRUE(absl::StrContains(
        check.out(), absl::StrCat("config ok: ", volumes.Dir("/etc/pstrain"), "/experiment.yaml (", type, " 1)")))
        << check.out();
  }
}

}  // namespace
}  // namespace pstrain::test
