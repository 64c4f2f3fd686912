#include "tools/launch/emulated_hosts.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "tools/launch/host_cpus.h"
#include "tools/launch/role_check.h"

namespace pstrain::launch {
namespace {

namespace fs = std::filesystem;

// Where `ip netns exec` finds the files it mounts over /etc for a namespace.
std::string NetnsEtc(const std::string& ns) { return "/etc/netns/" + ns; }

// Runs `binary args...` (role_check.h: output captured, killed at a
// deadline); an error naming the command and its output unless it exits 0.
absl::StatusOr<std::string> Run(const std::string& binary, const std::vector<std::string>& args) {
  const std::string command = absl::StrCat(binary, " ", absl::StrJoin(args, " "));
  absl::StatusOr<CheckRun> ran = RunCheckCommand(binary, args, absl::Seconds(30));
  if (!ran.ok()) return ran.status();
  const CheckRun& run = *ran;
  if (run.timed_out) return absl::DeadlineExceededError(absl::StrCat("`", command, "` did not finish in 30 s"));
  if (!WIFEXITED(run.wait_status) || WEXITSTATUS(run.wait_status) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("`", command, "` failed: ", run.output));
  }
  return run.output;
}

// `tool`'s absolute path on PATH (commands run without a PATH search), or
// FailedPrecondition "<missing>: <why>", `missing` saying who needs it.
absl::StatusOr<std::string> ToolPath(absl::string_view tool, absl::string_view missing) {
  absl::StatusOr<std::string> path = Run("/bin/sh", {"-c", absl::StrCat("command -v ", tool)});
  if (!path.ok()) return absl::FailedPreconditionError(absl::StrCat(missing, ": ", path.status().message()));
  return std::string(absl::StripAsciiWhitespace(*path));
}

// iproute2's `ip`, as an absolute path.
absl::StatusOr<std::string> IpPath() { return ToolPath("ip", "emulated hosts need iproute2's `ip` on PATH"); }

}  // namespace

absl::Status CanEmulateHosts() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError("emulated hosts need root (network namespaces, veth, a bridge)");
  }
  absl::StatusOr<std::string> ip_path = IpPath();
  if (!ip_path.ok()) return ip_path.status();
  const std::string& ip = *ip_path;
  // Root is not always enough (a container without CAP_SYS_ADMIN or
  // CAP_NET_ADMIN): try a namespace and a bridge.
  const std::string probe = absl::StrCat("pstprobe", getpid() % 100000);
  absl::StatusOr<std::string> ns = Run(ip, {"netns", "add", probe});
  if (ns.ok()) (void)Run(ip, {"netns", "del", probe});
  absl::StatusOr<std::string> bridge = Run(ip, {"link", "add", probe, "type", "bridge"});
  if (bridge.ok()) (void)Run(ip, {"link", "del", probe});
  if (!ns.ok() || !bridge.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create network namespaces and bridges here: ",
                                                      (!ns.ok() ? ns : bridge).status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<EmulatedHosts>> EmulatedHosts::Create(const std::vector<std::vector<std::string>>& names,
                                                                     int subnet) {
  if (names.empty() || names.size() > 250) {
    return absl::InvalidArgumentError(absl::StrCat("emulated hosts: ", names.size(), " hosts (1 to 250)"));
  }
  if (subnet < 0 || subnet > 65535) return absl::InvalidArgumentError("emulated hosts: subnet outside 0..65535");
  if (absl::Status s = CanEmulateHosts(); !s.ok()) return s;
  // Interface names have at most 15 characters: "pst" + 4 digits + "br".
  std::random_device random;
  const std::string prefix = absl::StrCat("pst", random() % 10000);
  absl::StatusOr<std::string> ip = IpPath();
  if (!ip.ok()) return ip.status();
  std::unique_ptr<EmulatedHosts> hosts(new EmulatedHosts(prefix, *std::move(ip)));
  const std::string bridge = prefix + "br";
  if (absl::Status s = hosts->Ip({"link", "add", bridge, "type", "bridge"}); !s.ok()) return s;
  hosts->bridge_made_ = true;
  if (absl::Status s = hosts->Ip({"link", "set", bridge, "up"}); !s.ok()) return s;
  const std::string subnet_prefix = absl::StrCat("10.", subnet / 256, ".", subnet % 256, ".");
  for (size_t i = 0; i < names.size(); ++i) {
    if (absl::Status s = hosts->AddHost(static_cast<int>(i), subnet_prefix); !s.ok()) return s;
  }
  // Every host knows every host by its names.
  std::string etc_hosts = "127.0.0.1 localhost\n";
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty()) absl::StrAppend(&etc_hosts, hosts->addresses_[i], " ", absl::StrJoin(names[i], " "), "\n");
  }
  for (const std::string& ns : hosts->namespaces_) {
    std::ofstream out(NetnsEtc(ns) + "/hosts");
    out << etc_hosts;
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", NetnsEtc(ns), "/hosts"));
  }
  return hosts;
}

absl::Status EmulatedHosts::AddHost(int index, const std::string& subnet_prefix) {
  const std::string ns = absl::StrCat(prefix_, "h", index);
  const std::string veth = absl::StrCat(prefix_, "v", index);
  const std::string peer = veth + "p";
  const std::string address = absl::StrCat(subnet_prefix, index + 1);
  if (absl::Status s = Ip({"netns", "add", ns}); !s.ok()) return s;
  namespaces_.push_back(ns);
  std::error_code ec;
  fs::create_directories(NetnsEtc(ns), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", NetnsEtc(ns), ": ", ec.message()));
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"link", "add", veth, "type", "veth", "peer", "name", peer},
                                             {"link", "set", peer, "netns", ns},
                                             {"link", "set", veth, "master", prefix_ + "br"},
                                             {"link", "set", veth, "up"},
                                             {"-n", ns, "link", "set", peer, "name", "eth0"},
                                             {"-n", ns, "addr", "add", address + "/24", "dev", "eth0"},
                                             {"-n", ns, "link", "set", "eth0", "up"},
                                             {"-n", ns, "link", "set", "lo", "up"}}) {
    if (absl::Status s = Ip(args); !s.ok()) return s;
  }
  addresses_.push_back(address);
  cpus_.emplace_back();
  return absl::OkStatus();
}

EmulatedHosts::~EmulatedHosts() {
  for (const std::string& ns : namespaces_) {
    (void)Ip({"netns", "del", ns});  // also removes its end of the veth pair
    std::error_code ec;
    fs::remove_all(NetnsEtc(ns), ec);
  }
  if (bridge_made_) (void)Ip({"link", "del", prefix_ + "br"});
}

absl::Status EmulatedHosts::Ip(const std::vector<std::string>& args) const { return Run(ip_path_, args).status(); }

std::vector<std::string> EmulatedHosts::RunOn(int host) const {
  std::vector<std::string> argv;
  if (!cpus_[host].empty()) argv = {taskset_path_, "-c", CpuListString(cpus_[host])};
  argv.insert(argv.end(), {ip_path_, "netns", "exec", namespaces_[host]});
  return argv;
}

absl::Status EmulatedHosts::RunOnCpus(int host, const std::vector<int>& cpus) {
  if (host < 0 || host >= size()) return absl::InvalidArgumentError(absl::StrCat("no emulated host ", host));
  if (cpus.empty()) return absl::InvalidArgumentError(absl::StrCat("emulated host ", host, ": no CPU to run on"));
  if (taskset_path_.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(
        taskset_path_, ToolPath("taskset", "emulated hosts on CPUs of their own need util-linux's `taskset` on PATH"));
  }
  cpus_[host] = cpus;
  return absl::OkStatus();
}

absl::Status EmulatedHosts::LimitLink(int host, double gbps) {
  if (host < 0 || host >= size()) return absl::InvalidArgumentError(absl::StrCat("no emulated host ", host));
  if (!(gbps > 0 && gbps <= 400)) {
    return absl::InvalidArgumentError(absl::StrCat("link rate ", gbps, " Gbit/s: expected a rate in (0, 400]"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::string tc_path, ToolPath("tc", "capping links needs iproute2's `tc` on PATH"));
  // The bucket holds 4 ms at the rate and at least 256 KiB: veth passes
  // segmentation-offloaded frames of up to 64 KiB, which a smaller bucket
  // could never send.
  const double bytes_per_second = gbps * 1e9 / 8;
  const int64_t burst = std::max<int64_t>(256 << 10, static_cast<int64_t>(bytes_per_second * 0.004));
  const std::vector<std::string> tbf = {
      "root",    "tbf",  "rate", absl::StrCat(static_cast<int64_t>(gbps * 1e6), "kbit"), "burst", absl::StrCat(burst),
      "latency", "100ms"};
  std::vector<std::string> egress = {"netns", "exec", namespaces_[host], tc_path, "qdisc", "replace", "dev", "eth0"};
  egress.insert(egress.end(), tbf.begin(), tbf.end());
  std::vector<std::string> ingress = {"qdisc", "replace", "dev", absl::StrCat(prefix_, "v", host)};
  ingress.insert(ingress.end(), tbf.begin(), tbf.end());
  if (absl::Status s = Ip(egress); !s.ok()) return s;
  absl::StatusOr<std::string> done = Run(tc_path, ingress);
  return done.status();
}

}  // namespace pstrain::launch
