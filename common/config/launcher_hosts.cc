#include "common/config/launcher_hosts.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// The most hosts, nodes, slots or ranks a launcher's description may expand
// to (a range in brackets and a repeat count have the same bound): more is a
// typo, and expanding it would exhaust memory before saying so.
constexpr int64_t kMaxRanks = 100000;

absl::Status ListError(absl::string_view list, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("host list '", list, "': ", what));
}

// Splits at commas outside brackets.
absl::StatusOr<std::vector<std::string>> SplitTopLevel(absl::string_view list) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : list) {
    if (c == '[' && ++depth > 1) return ListError(list, "nested '['");
    if (c == ']' && --depth < 0) return ListError(list, "']' without '['");
    if (c == ',' && depth == 0) {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  if (depth != 0) return ListError(list, "'[' without ']'");
  return items;
}

// "01-03,7" -> 01 02 03 7.
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view list, absl::string_view ranges) {
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(ranges, ',')) {
    std::vector<absl::string_view> bounds = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int64_t lo = 0, hi = 0;
    auto digits = [](absl::string_view s) { return !s.empty() && absl::c_all_of(s, absl::ascii_isdigit); };
    if (!digits(bounds[0]) || (bounds.size() == 2 && !digits(bounds[1])) || !absl::SimpleAtoi(bounds[0], &lo) ||
        (bounds.size() == 2 && !absl::SimpleAtoi(bounds[1], &hi))) {
      return ListError(list, absl::StrCat("expected a number or a range like 01-04 inside [], got '", part, "'"));
    }
    if (bounds.size() == 1) hi = lo;
    if (hi < lo || hi - lo > 100000) {
      return ListError(list, absl::StrCat("range '", part, "' runs backwards or is too long"));
    }
    const size_t width = bounds[0].size();
    for (int64_t n = lo; n <= hi; ++n) {
      std::string s = absl::StrCat(n);
      if (s.size() < width) s.insert(0, width - s.size(), '0');
      out.push_back(std::move(s));
    }
  }
  return out;
}

absl::Status LineError(absl::string_view source, int line, absl::string_view text, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ":", line, ": '", text, "': ", what));
}

const char* Env(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* value = getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The first of `names` that is set, with its name.
std::pair<const char*, const char*> FirstSet(const std::function<const char*(const char*)>& getenv,
                                             std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (const char* value = Env(getenv, name)) return {name, value};
  }
  return {nullptr, nullptr};
}

absl::StatusOr<std::vector<RankPlace>> SlurmPlaces(const LaunchRank& launched,
                                                   const std::function<const char*(const char*)>& getenv) {
  const auto [list_name, list] = FirstSet(getenv, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  const auto [counts_name, counts] = FirstSet(getenv, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"});
  if (list == nullptr || counts == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(launched.source, ": srun gives no ",
                     list == nullptr ? "SLURM_STEP_NODELIST or SLURM_JOB_NODELIST" : "SLURM_STEP_TASKS_PER_NODE",
                     " to place the ranks on; list the hosts in the config (cluster.ps_hosts, cluster.worker_hosts)"));
  }
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(list);
  if (!hosts.ok()) return absl::InvalidArgumentError(absl::StrCat(list_name, ": ", hosts.status().message()));
  absl::StatusOr<std::vector<int>> per_node = ExpandSlurmTasksPerNode(counts);
  if (!per_node.ok()) return absl::InvalidArgumentError(absl::StrCat(counts_name, ": ", per_node.status().message()));
  if (hosts->size() != per_node->size()) {
    return absl::InvalidArgumentError(absl::StrCat(list_name, "=", list, " names ", hosts->size(), " nodes but ",
                                                   counts_name, "=", counts, " gives counts for ", per_node->size()));
  }
  int64_t total = 0;  // up to kMaxRanks counts of up to INT_MAX each
  for (int c : *per_node) total += c;
  if (total != launched.size) {
    return absl::InvalidArgumentError(absl::StrCat(counts_name, "=", counts, " places ", total, " tasks but ",
                                                   launched.source, " says ", launched.size));
  }
  Distribution distribution = Distribution::kBlock;
  if (const char* d = Env(getenv, "SLURM_DISTRIBUTION")) {
    // "block:cyclic": the part after ':' places tasks on sockets, not nodes.
    const absl::string_view nodes = absl::string_view(d).substr(0, absl::string_view(d).find(':'));
    if (nodes == "cyclic") {
      distribution = Distribution::kCyclic;
    } else if (nodes != "block" && nodes != "*") {
      return absl::InvalidArgumentError(
          absl::StrCat("SLURM_DISTRIBUTION=", d,
                       ": pstrain can place ranks for block or cyclic only; use srun --distribution=block, "
                       "or list the hosts in the config"));
    }
  }
  std::vector<RankPlace> places = PlaceRanks(*hosts, *per_node, distribution);
  const RankPlace& mine = places[launched.rank];
  if (const char* node = Env(getenv, "SLURMD_NODENAME"); node != nullptr && mine.host != node) {
    return absl::InvalidArgumentError(absl::StrCat("SLURMD_NODENAME=", node, ": task ", launched.rank,
                                                   " runs there, but ", list_name, " and ", counts_name,
                                                   " place it on ", mine.host));
  }
  int local = 0;
  if (const char* l = Env(getenv, "SLURM_LOCALID");
      l != nullptr && absl::SimpleAtoi(l, &local) && local != mine.local_index) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLURM_LOCALID=", l, ": task ", launched.rank, " is local task ", local, " on its node, but the ",
        distribution == Distribution::kBlock ? "block" : "cyclic", " placement makes it ", mine.local_index));
  }
  return places;
}

// Open MPI's placement by slot from a hostfile; without one every rank on
// this host.
absl::StatusOr<std::vector<RankPlace>> MpirunPlaces(const LaunchRank& launched, const ClusterConfig& cluster,
                                                    const std::function<const char*(const char*)>& getenv) {
  std::string path = cluster.hostfile(), path_source = "cluster.hostfile";
  if (path.empty()) {
    if (const char* env = Env(getenv, "OMPI_MCA_orte_default_hostfile")) {
      path = env;
      path_source = "OMPI_MCA_orte_default_hostfile";
    }
  }
  std::vector<RankPlace> places;
  if (path.empty()) {
    const char* local_size = Env(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE");
    int local = 0;
    if (local_size == nullptr || !absl::SimpleAtoi(local_size, &local) || local != launched.size) {
      return absl::InvalidArgumentError(absl::StrCat(
          launched.source,
          ": the ranks run on several hosts (OMPI_COMM_WORLD_LOCAL_SIZE=", local_size == nullptr ? "" : local_size,
          "); give cluster.hostfile, the hostfile mpirun placed them from, or list the hosts in the config"));
    }
    for (int r = 0; r < launched.size; ++r) places.push_back(RankPlace{"localhost", r});
    return places;
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat(path_source, ": cannot read the hostfile '", path, "'"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<HostSlots> hosts, ParseHostfile(text.str(), path));
  std::vector<std::string> names;
  std::vector<int> counts;
  int left = launched.size;
  for (size_t i = 0; i < hosts.size() && left > 0; ++i) {
    int take = hosts[i].slots;
    if (take == 0) {
      if (i + 1 < hosts.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": host '", hosts[i].host,
                         "' gives no slots=N but is not the last host: Open MPI counts its cores, "
                         "which the other hosts cannot know; give slots=N"));
      }
      take = left;
    }
    take = std::min(take, left);
    names.push_back(hosts[i].host);
    counts.push_back(take);
    left -= take;
  }
  if (left > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", launched.size - left, " slots for ", launched.size, " ranks (", launched.source, ")"));
  }
  places = PlaceRanks(names, counts, Distribution::kBlock);
  const RankPlace& mine = places[launched.rank];
  int local = 0;
  if (const char* l = Env(getenv, "OMPI_COMM_WORLD_LOCAL_RANK");
      l != nullptr && absl::SimpleAtoi(l, &local) && local != mine.local_index) {
    return absl::InvalidArgumentError(
        absl::StrCat("OMPI_COMM_WORLD_LOCAL_RANK=", l, ": rank ", launched.rank, " is local rank ", local,
                     " on its host, but filling ", path, " slot by slot makes it local rank ", mine.local_index, " on ",
                     mine.host, ": start mpirun without --map-by/--npernode options, or list the hosts in the config"));
  }
  return places;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> items, SplitTopLevel(list));
  std::vector<std::string> hosts;
  for (const std::string& item : items) {
    if (item.empty()) return ListError(list, "empty host name");
    // Expand bracket groups left to right: every prefix so far times each value.
    std::vector<std::string> names{""};
    size_t pos = 0;
    while (pos < item.size()) {
      const size_t open = item.find('[', pos);
      const std::string literal = item.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
      for (std::string& n : names) n += literal;
      if (open == std::string::npos) break;
      const size_t close = item.find(']', open);
      PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> values,
                               ExpandRanges(list, absl::string_view(item).substr(open + 1, close - open - 1)));
      if (static_cast<int64_t>(hosts.size() + names.size() * values.size()) > kMaxRanks) {
        return ListError(list, absl::StrCat("expands to more than ", kMaxRanks, " hosts"));
      }
      std::vector<std::string> next;
      for (const std::string& n : names) {
        for (const std::string& v : values) next.push_back(n + v);
      }
      names = std::move(next);
      pos = close + 1;
    }
    for (std::string& n : names) {
      if (absl::Status bad = CheckHost(std::string_view(n)); !bad.ok()) return ListError(list, bad.message());
      hosts.push_back(std::move(n));
    }
  }
  return hosts;
}

absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(absl::string_view counts) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(counts, ',')) {
    int count = 0, repeat = 1;
    absl::string_view number = part;
    if (const size_t paren = part.find("(x"); paren != absl::string_view::npos) {
      number = part.substr(0, paren);
      if (part.back() != ')' || !absl::SimpleAtoi(part.substr(paren + 2, part.size() - paren - 3), &repeat)) {
        repeat = -1;
      }
    }
    if (!absl::SimpleAtoi(number, &count) || count < 1 || repeat < 1 || repeat > 100000) {
      return absl::InvalidArgumentError(
          absl::StrCat("tasks per node '", counts, "': expected counts like 2(x3),1, got '", part, "'"));
    }
    if (static_cast<int64_t>(out.size()) + repeat > kMaxRanks) {
      return absl::InvalidArgumentError(
          absl::StrCat("tasks per node '", counts, "': counts for more than ", kMaxRanks, " nodes"));
    }
    out.insert(out.end(), repeat, count);
  }
  return out;
}

absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view text, absl::string_view source) {
  std::vector<HostSlots> hosts;
  std::map<std::string, size_t> index;
  int line_number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_number;
    absl::string_view line = absl::StripAsciiWhitespace(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    HostSlots entry{std::string(words[0]), 0};
    if (absl::Status bad = CheckHost(entry.host); !bad.ok()) {
      return LineError(source, line_number, line, bad.message());
    }
    for (size_t i = 1; i < words.size(); ++i) {
      std::vector<absl::string_view> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      int value = 0;
      if (kv.size() != 2 || !absl::SimpleAtoi(kv[1], &value) || value < 1 ||
          (kv[0] != "slots" && kv[0] != "max_slots" && kv[0] != "max-slots")) {
        return LineError(source, line_number, line,
                         absl::StrCat("expected 'host [slots=N] [max_slots=N]', got '", words[i], "'"));
      }
      if (kv[0] == "slots") entry.slots = value;
    }
    auto [it, inserted] = index.emplace(entry.host, hosts.size());
    if (inserted) {
      hosts.push_back(entry);
    } else {
      // Open MPI adds a repeated host's slots (a line without slots counts one).
      HostSlots& first = hosts[it->second];
      const int64_t slots = int64_t{std::max(first.slots, 1)} + std::max(entry.slots, 1);
      if (slots > kMaxRanks) {
        return LineError(source, line_number, line,
                         absl::StrCat("host ", entry.host, " has more than ", kMaxRanks, " slots in all"));
      }
      first.slots = static_cast<int>(slots);
    }
  }
  if (hosts.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": the hostfile lists no host"));
  return hosts;
}

std::vector<RankPlace> PlaceRanks(const std::vector<std::string>& hosts, const std::vector<int>& counts,
                                  Distribution distribution) {
  std::vector<RankPlace> places;
  if (distribution == Distribution::kBlock) {
    for (size_t h = 0; h < hosts.size(); ++h) {
      for (int k = 0; k < counts[h]; ++k) places.push_back(RankPlace{hosts[h], k});
    }
    return places;
  }
  std::vector<int> placed(hosts.size(), 0);
  for (bool any = true; any;) {
    any = false;
    for (size_t h = 0; h < hosts.size(); ++h) {
      if (placed[h] == counts[h]) continue;
      places.push_back(RankPlace{hosts[h], placed[h]++});
      any = true;
    }
  }
  return places;
}

absl::StatusOr<std::vector<std::string>> LaunchedHostPorts(const LaunchRank& launched, const ClusterConfig& cluster,
                                                           const std::function<const char*(const char*)>& getenv) {
  if (launched.size > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat(launched.source, ": pstrain places at most ", kMaxRanks, " launched ranks"));
  }
  absl::StatusOr<std::vector<RankPlace>> places;
  switch (launched.launcher) {
    case Launcher::kSrun:
      places = SlurmPlaces(launched, getenv);
      break;
    case Launcher::kMpirun:
      places = MpirunPlaces(launched, cluster, getenv);
      break;
    case Launcher::kRankEnv:
      return absl::InvalidArgumentError(absl::StrCat(
          launched.source,
          " gives the role but not where the other ranks run: list the hosts in the config "
          "(cluster.ps_hosts, cluster.worker_hosts; e.g. a headless Service's pod names) or in TF_CONFIG"));
  }
  if (!places.ok()) return places.status();
  std::vector<std::string> host_ports;
  for (const RankPlace& p : *places) {
    const int64_t port = int64_t{cluster.port()} + p.local_index;
    if (port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("cluster.port ", cluster.port(), ": ", p.local_index + 1,
                                                     " ranks on ", p.host, " need ports up to ", port, ", past 65535"));
    }
    // IPv6 literals need brackets in host:port.
    host_ports.push_back(p.host.find(':') == std::string::npos ? absl::StrCat(p.host, ":", port)
                                                               : absl::StrCat("[", p.host, "]:", port));
  }
  return host_ports;
}

}  // namespace pstrain
