#include "tools/launch/emulated_hosts.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace pstrain::launch {
namespace {

namespace fs = std::filesystem;

// Where `ip netns exec` finds the files it mounts over /etc for a namespace.
std::string NetnsEtc(const std::string& ns) { return "/etc/netns/" + ns; }

}  // namespace

absl::StatusOr<std::string> RunCommand(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  const std::string command = absl::StrJoin(argv, " ");
  if (spawned != 0) {
    close(fds[0]);
    return absl::FailedPreconditionError(absl::StrCat("cannot run `", command, "`: ", std::strerror(spawned)));
  }
  std::string output;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("`", command, "` failed: ", output));
  }
  return output;
}

absl::Status CanEmulateHosts() {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError("emulated hosts need root (network namespaces, veth, a bridge)");
  }
  absl::StatusOr<std::string> ip = RunCommand({"ip", "netns", "list"});
  if (!ip.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("emulated hosts need iproute2's `ip` with network namespaces: ", ip.status().message()));
  }
  // Root is not always enough (a container without CAP_SYS_ADMIN or
  // CAP_NET_ADMIN): try a namespace and a bridge.
  const std::string probe = absl::StrCat("pstprobe", getpid() % 100000);
  absl::StatusOr<std::string> ns = RunCommand({"ip", "netns", "add", probe});
  if (ns.ok()) (void)RunCommand({"ip", "netns", "del", probe});
  absl::StatusOr<std::string> bridge = RunCommand({"ip", "link", "add", probe, "type", "bridge"});
  if (bridge.ok()) (void)RunCommand({"ip", "link", "del", probe});
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
  std::unique_ptr<EmulatedHosts> hosts(new EmulatedHosts(prefix));
  // RunOn's argv runs without a PATH search (execv).
  absl::StatusOr<std::string> ip = RunCommand({"sh", "-c", "command -v ip"});
  if (!ip.ok()) return ip.status();
  hosts->ip_path_ = std::string(absl::StripAsciiWhitespace(*ip));
  const std::string bridge = prefix + "br";
  if (absl::StatusOr<std::string> r = RunCommand({"ip", "link", "add", bridge, "type", "bridge"}); !r.ok()) {
    return r.status();
  }
  hosts->bridge_made_ = true;
  if (absl::StatusOr<std::string> r = RunCommand({"ip", "link", "set", bridge, "up"}); !r.ok()) return r.status();
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
  if (absl::StatusOr<std::string> r = RunCommand({"ip", "netns", "add", ns}); !r.ok()) return r.status();
  namespaces_.push_back(ns);
  std::error_code ec;
  fs::create_directories(NetnsEtc(ns), ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", NetnsEtc(ns), ": ", ec.message()));
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"ip", "link", "add", veth, "type", "veth", "peer", "name", peer},
                                             {"ip", "link", "set", peer, "netns", ns},
                                             {"ip", "link", "set", veth, "master", prefix_ + "br"},
                                             {"ip", "link", "set", veth, "up"},
                                             {"ip", "-n", ns, "link", "set", peer, "name", "eth0"},
                                             {"ip", "-n", ns, "addr", "add", address + "/24", "dev", "eth0"},
                                             {"ip", "-n", ns, "link", "set", "eth0", "up"},
                                             {"ip", "-n", ns, "link", "set", "lo", "up"}}) {
    if (absl::StatusOr<std::string> r = RunCommand(command); !r.ok()) return r.status();
  }
  addresses_.push_back(address);
  return absl::OkStatus();
}

EmulatedHosts::~EmulatedHosts() {
  for (const std::string& ns : namespaces_) {
    (void)RunCommand({"ip", "netns", "del", ns});  // also removes its end of the veth pair
    std::error_code ec;
    fs::remove_all(NetnsEtc(ns), ec);
  }
  if (bridge_made_) (void)RunCommand({"ip", "link", "del", prefix_ + "br"});
}

std::vector<std::string> EmulatedHosts::RunOn(int host) const { return {ip_path_, "netns", "exec", namespaces_[host]}; }

}  // namespace pstrain::launch
