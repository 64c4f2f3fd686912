#include "worker/elastic/elastic_group.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// How long members of a new generation may take to connect to each other.
constexpr absl::Duration kConnectTimeout = absl::Seconds(30);
constexpr absl::Duration kProbeEvery = absl::Milliseconds(10);

// The value of `key` when it is set now; nullopt otherwise.
std::optional<std::string> Probe(KeyValueStore* store, const std::string& key) {
  absl::StatusOr<std::string> value = store->Get(key, absl::InfinitePast());
  if (!value.ok()) return std::nullopt;
  return *value;
}

}  // namespace

int GroupGeneration::RankOf(int worker) const {
  auto it = std::find(members.begin(), members.end(), worker);
  return it == members.end() ? -1 : static_cast<int>(it - members.begin());
}

std::string GroupGeneration::Encode() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < members.size(); ++i) parts.push_back(absl::StrCat(members[i], "=", incarnations[i]));
  return absl::StrCat(absl::StrJoin(parts, ","), "|", root, "|", why);
}

absl::StatusOr<GroupGeneration> GroupGeneration::Decode(int64_t number, const std::string& text) {
  std::vector<std::string> fields = absl::StrSplit(text, absl::MaxSplits('|', 2));
  GroupGeneration g;
  g.number = number;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("group generation ", number, ": unreadable record '", text, "'"));
  };
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &g.root)) return bad();
  g.why = fields[2];
  for (absl::string_view member : absl::StrSplit(fields[0], ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(member, absl::MaxSplits('=', 1));
    int worker = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &worker) || worker < 0 || kv[1].empty()) return bad();
    if (!g.members.empty() && worker <= g.members.back()) return bad();  // ascending, each once
    g.members.push_back(worker);
    g.incarnations.push_back(kv[1]);
  }
  if (g.members.empty() || g.RankOf(g.root) < 0) return bad();
  return g;
}

ElasticGroup::ElasticGroup(const Options& options) : options_(options), start_(absl::Now()) {}

ElasticGroup::~ElasticGroup() = default;

std::string ElasticGroup::Key(const std::string& suffix) const { return absl::StrCat(options_.prefix, "/", suffix); }

absl::Status ElasticGroup::Join() {
  const absl::Time deadline = absl::Now() + options_.startup;
  // A new incarnation each time: one left out before is not taken for admitted.
  incarnation_ = absl::StrCat(getpid(), ".", absl::ToUnixMicros(absl::Now()));
  PSTRAIN_RETURN_IF_ERROR(options_.store->Set(Key(absl::StrCat("join/", options_.worker)), incarnation_, deadline));
  if (chief()) {
    if (generation_.number < 0) return FormFirst();
    return absl::FailedPreconditionError("elastic group: the chief cannot join again (it hosts the group's store)");
  }
  absl::StatusOr<std::string> latest = options_.store->Get(Key("latest"), deadline);
  int64_t number = 0;
  if (!latest.ok() || !absl::SimpleAtoi(*latest, &number)) {
    return absl::DeadlineExceededError(
        absl::StrCat("worker ", options_.worker, ": the group's first generation did ", "not form within ",
                     absl::FormatDuration(options_.startup),
                     " (timeouts.startup_seconds): ", latest.ok() ? *latest : latest.status().message()));
  }
  if (number > 0) {
    std::cout << "worker " << options_.worker << ": asked to join the run (generation " << number << " under way)"
              << std::endl;
  }
  for (;; ++number) {
    absl::Status s = ConnectTo(number, deadline);
    if (s.ok() || !absl::IsNotFound(s)) return s;
  }
}

absl::Status ElasticGroup::FormFirst() {
  const int wanted = options_.start_workers > 0 ? options_.start_workers : options_.listed_workers;
  const absl::Time deadline = absl::Now() + options_.startup;
  std::optional<absl::Time> enough_since;
  GroupGeneration first;
  while (true) {
    first = GroupGeneration();
    for (int w = 0; w < options_.listed_workers; ++w) {
      if (std::optional<std::string> inc = Probe(options_.store, Key(absl::StrCat("join/", w)))) {
        first.members.push_back(w);
        first.incarnations.push_back(*inc);
      }
    }
    const int present = static_cast<int>(first.members.size());
    if (present == options_.listed_workers) break;
    if (present >= wanted) {
      if (!enough_since) enough_since = absl::Now();
      if (absl::Now() - *enough_since >= options_.regroup_window) break;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "chief: only ", present, " workers [", absl::StrJoin(first.members, ","), "] asked to join within ",
          absl::FormatDuration(options_.startup), " (timeouts.startup_seconds); the group needs ", wanted,
          options_.start_workers > 0 ? " (elastic.min_workers)" : " (every listed worker)"));
    }
    absl::SleepFor(kProbeEvery);
  }
  first.number = 0;
  first.root = 0;
  first.why = "the run's first generation";
  PSTRAIN_RETURN_IF_ERROR(Publish(first));
  return Connect(first);
}

absl::Status ElasticGroup::Publish(GroupGeneration next) {
  const absl::Time deadline = absl::Now() + options_.op_timeout;
  for (const std::string& inc : next.incarnations) admitted_.insert(inc);
  PSTRAIN_RETURN_IF_ERROR(options_.store->Set(Key(absl::StrCat("gen/", next.number)), next.Encode(), deadline));
  PSTRAIN_RETURN_IF_ERROR(options_.store->Set(Key("latest"), absl::StrCat(next.number), deadline));
  std::cout << "elastic: generation " << next.number << ": workers [" << absl::StrJoin(next.members, ",")
            << "], state from worker " << next.root << " (" << next.why << ")" << std::endl;
  return absl::OkStatus();
}

std::vector<std::pair<int, std::string>> ElasticGroup::PendingJoiners() {
  std::vector<std::pair<int, std::string>> pending;
  for (int w = 0; w < options_.listed_workers; ++w) {
    if (generation_.RankOf(w) >= 0) continue;
    std::optional<std::string> inc = Probe(options_.store, Key(absl::StrCat("join/", w)));
    if (inc && !admitted_.contains(*inc)) pending.emplace_back(w, *inc);
  }
  return pending;
}

absl::StatusOr<bool> ElasticGroup::AdmitJoiners(int64_t step) {
  if (collective_ == nullptr) return absl::FailedPreconditionError("elastic group: not connected");
  GroupGeneration next;
  float flag = 0;
  if (chief()) {
    const std::vector<std::pair<int, std::string>> joiners = PendingJoiners();
    if (!joiners.empty()) {
      std::map<int, std::string> members;
      for (size_t i = 0; i < generation_.members.size(); ++i) {
        members[generation_.members[i]] = generation_.incarnations[i];
      }
      std::vector<std::string> names;
      for (const auto& [w, inc] : joiners) {
        members[w] = inc;
        names.push_back(absl::StrCat(w));
        const bool before = std::any_of(changes_.begin(), changes_.end(),
                                        [w = w](const MembershipChange& c) { return c.worker() == w; });
        Record(step, w, before ? "rejoined" : "joined", absl::StrCat("asked to join; admitted after step ", step));
      }
      for (const auto& [w, inc] : members) {
        next.members.push_back(w);
        next.incarnations.push_back(inc);
      }
      next.number = generation_.number + 1;
      next.root = 0;
      next.why = absl::StrCat("worker", joiners.size() > 1 ? "s " : " ", absl::StrJoin(names, ","),
                              " joined after step ", step);
      PSTRAIN_RETURN_IF_ERROR(Publish(next));
      flag = 1;
    }
  }
  PSTRAIN_RETURN_IF_ERROR(collective_->Broadcast(&flag, 1, 0));
  if (flag == 0) return false;
  if (chief()) {
    PSTRAIN_RETURN_IF_ERROR(Connect(next));
  } else {
    PSTRAIN_RETURN_IF_ERROR(ConnectTo(generation_.number + 1, absl::Now() + options_.op_timeout));
  }
  return true;
}

absl::Status ElasticGroup::Regroup(int64_t committed) {
  collective_.reset();  // closes its connections: the others' operations fail now, not at their timeouts
  const GroupGeneration broken = generation_;
  PSTRAIN_RETURN_IF_ERROR(options_.store->Set(Key(absl::StrCat("alive/", broken.number, "/", options_.worker)),
                                              absl::StrCat(committed), absl::Now() + options_.op_timeout));
  if (!chief()) {
    return ConnectTo(broken.number + 1, absl::Now() + options_.regroup_window + options_.op_timeout);
  }
  // Chief: who answers within the window, and what each committed.
  const absl::Time deadline = absl::Now() + options_.regroup_window;
  std::map<int, int64_t> alive;
  while (true) {
    for (int w : broken.members) {
      if (alive.contains(w)) continue;
      std::optional<std::string> value = Probe(options_.store, Key(absl::StrCat("alive/", broken.number, "/", w)));
      int64_t step = 0;
      if (value && absl::SimpleAtoi(*value, &step)) alive[w] = step;
    }
    if (alive.size() == broken.members.size() || absl::Now() > deadline) break;
    absl::SleepFor(kProbeEvery);
  }
  GroupGeneration next;
  next.number = broken.number + 1;
  // The root: the survivor that committed the most steps (the lowest index
  // on a tie); the changes count from its step.
  next.root = 0;
  for (const auto& [w, step] : alive) {
    if (step > alive[next.root]) next.root = w;
  }
  const int64_t step = alive[next.root];
  std::map<int, std::string> members;
  std::vector<std::string> lost;
  for (size_t i = 0; i < broken.members.size(); ++i) {
    const int w = broken.members[i];
    if (alive.contains(w)) {
      members[w] = broken.incarnations[i];
      continue;
    }
    lost.push_back(absl::StrCat(w));
    Record(step, w, "lost",
           absl::StrCat("no answer within ", absl::FormatDuration(options_.regroup_window),
                        " (elastic.regroup_seconds) after generation ", broken.number, " broke"));
  }
  for (const auto& [w, inc] : PendingJoiners()) {
    members[w] = inc;
    Record(step, w, "joined", "asked to join while the group re-formed");
  }
  for (const auto& [w, inc] : members) {
    next.members.push_back(w);
    next.incarnations.push_back(inc);
  }
  next.why = lost.empty() ? absl::StrCat("generation ", broken.number, " broke; every member answered")
                          : absl::StrCat("worker", lost.size() > 1 ? "s " : " ", absl::StrJoin(lost, ","),
                                         " lost after step ", step);
  if (static_cast<int>(next.members.size()) < options_.min_workers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chief: only ", next.members.size(), " workers [", absl::StrJoin(next.members, ","), "] left after ", next.why,
        "; the group needs at least ", options_.min_workers, " (elastic.min_workers)"));
  }
  PSTRAIN_RETURN_IF_ERROR(Publish(next));
  return Connect(next);
}

absl::Status ElasticGroup::Shrink(int keep, int64_t step) {
  PSTRAIN_RETURN_IF_ERROR(Barrier());  // nobody closes connections another still reads
  GroupGeneration next = generation_;
  next.number = generation_.number + 1;
  next.root = 0;
  next.why = absl::StrCat("the data left after step ", step, " is ", keep, keep == 1 ? " batch" : " batches", " for ",
                          size(), " workers");
  std::vector<int> leaving(next.members.begin() + keep, next.members.end());
  next.members.resize(keep);
  next.incarnations.resize(keep);
  if (chief()) {
    for (int w : leaving) {
      Record(step, w, "left", absl::StrCat("no data left for it after step ", step));
      left_workers_.push_back(w);
    }
    PSTRAIN_RETURN_IF_ERROR(Publish(next));
  }
  if (next.RankOf(options_.worker) < 0) {
    collective_.reset();
    left_ = true;
    return absl::OkStatus();
  }
  return Connect(next);
}

absl::Status ElasticGroup::Barrier() {
  if (collective_ == nullptr) return absl::OkStatus();
  return collective_->Barrier();
}

absl::Status ElasticGroup::ConnectTo(int64_t number, absl::Time deadline) {
  absl::StatusOr<std::string> record = options_.store->Get(Key(absl::StrCat("gen/", number)), deadline);
  if (!record.ok()) {
    return absl::Status(record.status().code(), absl::StrCat("worker ", options_.worker, ": waiting for the group's ",
                                                             "generation ", number, ": ", record.status().message()));
  }
  PSTRAIN_ASSIGN_OR_RETURN(GroupGeneration g, GroupGeneration::Decode(number, *record));
  const int rank = g.RankOf(options_.worker);
  if (rank < 0 || g.incarnations[rank] != incarnation_) {
    generation_ = g;
    generation_.members.clear();  // not a member
    return absl::NotFoundError(
        absl::StrCat("worker ", options_.worker, " is not in the group's generation ", number, " (", g.why, ")"));
  }
  return Connect(g);
}

absl::Status ElasticGroup::Connect(const GroupGeneration& g) {
  collective_.reset();
  generation_ = g;
  CollectiveOptions options;
  options.rank = g.RankOf(options_.worker);
  options.size = static_cast<int>(g.members.size());
  options.members = g.members;
  options.host = options_.host;
  options.store = options_.store;
  options.prefix = Key(absl::StrCat("g", g.number));
  options.timeout = options_.op_timeout;
  options.connect_timeout = kConnectTimeout;
  PSTRAIN_ASSIGN_OR_RETURN(collective_, CreateGlooCollective(options));
  return absl::OkStatus();
}

absl::Status ElasticGroup::PutReport(const WorkerReport& report) {
  return options_.store->Set(Key(absl::StrCat("report/", options_.worker)), report.SerializeAsString(),
                             absl::Now() + options_.op_timeout);
}

absl::StatusOr<std::vector<WorkerReport>> ElasticGroup::GatherReports(const std::vector<int>& workers) {
  const absl::Time deadline = absl::Now() + options_.op_timeout;
  std::vector<WorkerReport> reports;
  for (int w : workers) {
    absl::StatusOr<std::string> bytes = options_.store->Get(Key(absl::StrCat("report/", w)), deadline);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat("chief: worker ", w, "'s final report: ", bytes.status().message()));
    }
    WorkerReport report;
    if (!report.ParseFromString(*bytes)) {
      return absl::DataLossError(absl::StrCat("chief: worker ", w, "'s final report is unreadable"));
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

std::vector<int> ElasticGroup::finishers() const {
  std::vector<int> all = generation_.members;
  all.insert(all.end(), left_workers_.begin(), left_workers_.end());
  std::sort(all.begin(), all.end());
  return all;
}

void ElasticGroup::Record(int64_t step, int worker, const std::string& change, const std::string& why) {
  MembershipChange c;
  c.set_step(step);
  c.set_worker(worker);
  c.set_change(change);
  c.set_why(why);
  c.set_seconds(absl::ToDoubleSeconds(absl::Now() - start_));
  changes_.push_back(c);
  LOG(INFO) << "elastic: worker " << worker << " " << change << " (" << why << ")";
}

}  // namespace pstrain
