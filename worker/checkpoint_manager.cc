#include "worker/checkpoint_manager.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/durable_file.h"
#include "common/status_macros.h"
#include "common/tensor.h"
#include "glog/logging.h"
#include "worker/checkpoint_reshard.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

constexpr char kManifest[] = "MANIFEST";
constexpr char kPrefix[] = "ckpt-";

std::string ShardFileName(int shard, int num_shards) {
  return absl::StrCat("shard-", shard, "-of-", num_shards, ".ckpt");
}

// Checkpoint directories under `dir` by step, newest first; `committed`:
// only those with a MANIFEST.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir, bool committed) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.rfind(kPrefix, 0) != 0 || !absl::SimpleAtoi(name.substr(sizeof(kPrefix) - 1), &step)) continue;
    if (committed && !fs::exists(entry.path() / kManifest, ec)) continue;
    found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return found;
}

// A variable as a manifest lists it: its element count, and how to name it
// ("<name> [32, 16]" when whole, "<name> (512 elements in 2 parts)" when cut).
struct VariableText {
  int64_t elements = 0;
  bool whole = true;
  std::string text;
};

// `elements` plus those of `shape`; -1 once a shape is negative or the
// count too large (a damaged manifest's: it then matches nothing here).
int64_t AddElements(int64_t elements, const google::protobuf::RepeatedField<int64_t>& shape) {
  const int64_t n = CheckedNumElements(Shape(shape.begin(), shape.end()));
  if (elements < 0 || n < 0 || n > std::numeric_limits<int64_t>::max() - elements) return -1;
  return elements + n;
}

std::map<std::string, VariableText> Variables(const CheckpointManifest& manifest) {
  std::map<std::string, std::vector<const CheckpointManifest::Part*>> parts;
  for (const CheckpointManifest::Part& p : manifest.parts()) parts[PartVariable(p.name())].push_back(&p);
  std::map<std::string, VariableText> variables;
  for (const auto& [name, list] : parts) {
    VariableText& v = variables[name];
    for (const CheckpointManifest::Part* p : list) v.elements = AddElements(v.elements, p->shape());
    v.whole = list.size() == 1 && list[0]->name() == name;
    v.text = v.whole ? absl::StrCat(name, " ", ShapeToString(Shape(list[0]->shape().begin(), list[0]->shape().end())))
                     : absl::StrCat(name, " (", v.elements, " elements in ", list.size(), " parts)");
  }
  return variables;
}

// `path` without "." or ".." parts or a trailing separator ("a/ckpt-3/" is
// "a/ckpt-3", whose parent_path() is then "a").
fs::path Normal(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

// The steps of the checkpoints in `dir` that the tables of the checkpoint of
// `step` build on (through their manifests; a link that cannot be read
// ends the list: that checkpoint is damaged anyway).
std::set<int64_t> TableBaseSteps(const std::string& dir, int64_t step) {
  std::set<int64_t> steps;
  std::vector<int64_t> pending{step};
  while (!pending.empty()) {
    const int64_t at = pending.back();
    pending.pop_back();
    absl::StatusOr<std::string> bytes = ReadWholeFile((fs::path(dir) / absl::StrCat(kPrefix, at) / kManifest).string());
    CheckpointManifest manifest;
    if (!bytes.ok() || !manifest.ParseFromString(*bytes)) continue;
    for (const CheckpointManifest::ShardFile& f : manifest.shards()) {
      const int64_t since = f.tables_since_step();
      if (since > 0 && since < at && steps.insert(since).second) pending.push_back(since);
    }
  }
  return steps;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointManager>> CheckpointManager::Create(const ExperimentConfig& config,
                                                                             std::vector<VariablePart> parts,
                                                                             int num_shards) {
  const CheckpointConfig& c = config.checkpoint();
  if (c.dir().empty() && c.restore().empty()) return std::unique_ptr<CheckpointManager>();
  if (!c.dir().empty()) PSTRAIN_RETURN_IF_ERROR(EnsureWritableDirectory(c.dir(), "checkpoint.dir"));
  return std::unique_ptr<CheckpointManager>(new CheckpointManager(config, std::move(parts), num_shards));
}

std::string CheckpointManager::CheckpointDir(int64_t step) const {
  return (fs::path(dir()) / absl::StrCat(kPrefix, step)).string();
}

CheckpointManifest CheckpointManager::Describe(int64_t step) const {
  CheckpointManifest m;
  m.set_step(step);
  const int64_t global_batch = static_cast<int64_t>(config_.train().batch_size_per_device()) *
                               config_.devices_per_worker() * config_.cluster().worker_hosts_size();
  m.set_data_position(step * global_batch);
  m.set_model(config_.model().name());
  m.set_optimizer(config_.optimizer().name());
  m.set_variable_update(config_.variable_update());
  for (const VariablePart& p : parts_) {
    CheckpointManifest::Part* part = m.add_parts();
    part->set_name(p.name);
    for (int64_t d : p.shape) part->add_shape(d);
    part->set_shard(p.shard);
  }
  return m;
}

std::string CheckpointManager::Incompatibility(const CheckpointManifest& manifest) const {
  // What this run's variables are; the step is the manifest's own, not compared
  // (and step x batch of a damaged manifest's step may not fit in 64 bits).
  const CheckpointManifest here = Describe(0);
  if (manifest.model() != here.model())
    return absl::StrCat("model ", manifest.model(), " there, ", here.model(), " here");
  if (manifest.optimizer() != here.optimizer()) {
    return absl::StrCat("optimizer ", manifest.optimizer(), " there, ", here.optimizer(), " here");
  }
  std::map<std::string, VariableText> theirs = Variables(manifest), ours = Variables(here);
  std::vector<std::string> differences;
  for (const auto& [name, v] : ours) {
    auto it = theirs.find(name);
    if (it == theirs.end()) {
      differences.push_back(absl::StrCat(v.text, " here, absent there"));
      continue;
    }
    if (it->second.elements != v.elements || (it->second.whole && v.whole && it->second.text != v.text)) {
      differences.push_back(absl::StrCat(it->second.text, " there, ", v.text, " here"));
    }
    theirs.erase(it);
  }
  for (const auto& [name, v] : theirs) differences.push_back(absl::StrCat(v.text, " there, absent here"));
  if (differences.empty()) return "";
  const size_t shown = std::min<size_t>(differences.size(), 3);
  return absl::StrCat("variables differ: ", absl::StrJoin(differences.begin(), differences.begin() + shown, "; "),
                      differences.size() > shown ? absl::StrCat(" (and ", differences.size() - shown, " more)") : "");
}

bool CheckpointManager::SameLayout(const CheckpointManifest& manifest) const {
  if (manifest.shards_size() != num_shards_) return false;
  const CheckpointManifest here = Describe(0);
  if (manifest.parts_size() != here.parts_size()) return false;
  std::map<std::string, std::string> theirs;
  for (const CheckpointManifest::Part& p : manifest.parts()) theirs[p.name()] = p.SerializeAsString();
  for (const CheckpointManifest::Part& p : here.parts()) {
    auto it = theirs.find(p.name());
    if (it == theirs.end() || it->second != p.SerializeAsString()) return false;
  }
  return true;
}

absl::StatusOr<RestorePoint> CheckpointManager::Load(const std::string& dir) const {
  const std::string manifest_path = (fs::path(dir) / kManifest).string();
  absl::StatusOr<std::string> bytes = ReadWholeFile(manifest_path);
  if (!bytes.ok()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", dir, " has no readable MANIFEST (incomplete): ", bytes.status().message()));
  }
  RestorePoint point;
  point.dir = dir;
  if (!point.manifest.ParseFromString(*bytes)) return absl::DataLossError(absl::StrCat(manifest_path, ": malformed"));
  if (point.manifest.step() < 0) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": step ", point.manifest.step(), " is negative"));
  }
  if (std::string why = Incompatibility(point.manifest); !why.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", dir, " is not of this run's model: ", why));
  }
  PSTRAIN_ASSIGN_OR_RETURN(point.shards, ShardFiles(dir, point.manifest));
  if (SameLayout(point.manifest)) {
    for (const ShardRestore& r : point.shards) {
      const FileDigest expected{r.bytes(), r.crc32c()};
      PSTRAIN_RETURN_IF_ERROR(ReadWholeFile(r.path(), &expected).status());
    }
    PSTRAIN_RETURN_IF_ERROR(AddTableChains(dir, point));
    return point;
  }
  if (fs::path(dir).filename().string().rfind("reshard-", 0) == 0) {
    return absl::InternalError(absl::StrCat("checkpoint ", dir, ": resharded, yet not in this run's layout"));
  }
  // Another shard count or placement: the same variables cut again for this
  // run, beside the original (which the old layout can still restore).
  const std::string resharded = (fs::path(dir) / absl::StrCat("reshard-", num_shards_, "-shards")).string();
  PSTRAIN_RETURN_IF_ERROR(AddTableChains(dir, point));
  const std::vector<EmbeddingTableConfig> tables(config_.model().tables().begin(), config_.model().tables().end());
  PSTRAIN_RETURN_IF_ERROR(
      ReshardCheckpoint(dir, point.manifest, point.shards, parts_, tables, num_shards_, resharded).status());
  LOG(INFO) << "checkpoint: " << dir << " was written by " << point.manifest.shards_size()
            << " PS shards under another placement; resharded for " << num_shards_ << " into " << resharded;
  return Load(resharded);
}

absl::StatusOr<std::vector<ShardRestore>> CheckpointManager::ShardFiles(const std::string& dir,
                                                                        const CheckpointManifest& manifest) const {
  const std::string manifest_path = (fs::path(dir) / kManifest).string();
  const int shards = manifest.shards_size();
  std::vector<ShardRestore> files(shards);
  for (const CheckpointManifest::ShardFile& f : manifest.shards()) {
    // A file in `dir` itself: a name, not "", "." or ".." (the directory or its parent).
    if (f.shard() < 0 || f.shard() >= shards || f.file().find('/') != std::string::npos || f.file().empty() ||
        f.file() == "." || f.file() == "..") {
      return absl::DataLossError(absl::StrCat(manifest_path, ": bad shard entry ", f.shard(), " '", f.file(), "'"));
    }
    ShardRestore& r = files[f.shard()];
    r.set_path((fs::path(dir) / f.file()).string());
    r.set_bytes(f.bytes());
    r.set_crc32c(f.crc32c());
    r.set_step(manifest.step());
  }
  for (int s = 0; s < shards; ++s) {
    if (files[s].path().empty()) return absl::DataLossError(absl::StrCat(manifest_path, ": no file for shard ", s));
  }
  if (shards == 0) return absl::DataLossError(absl::StrCat(manifest_path, ": no shard files"));
  return files;
}

absl::StatusOr<std::optional<RestorePoint>> CheckpointManager::FindRestorePoint() {
  std::optional<RestorePoint> found;
  const std::string& explicit_dir = config_.checkpoint().restore();
  if (!explicit_dir.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(found, Load(explicit_dir));
  } else {
    for (const auto& [step, path] : ListCheckpoints(dir(), /*committed=*/true)) {
      absl::StatusOr<RestorePoint> point = Load(path);
      if (point.ok()) {
        found = *std::move(point);
        break;
      }
      if (point.status().code() != absl::StatusCode::kDataLoss) return point.status();
      LOG(WARNING) << "checkpoint: skipping " << path << ": " << point.status().message()
                   << "; trying the previous one";
    }
  }
  // An increment may build on a checkpoint of this directory only.
  const bool here = found && Normal(found->dir).parent_path() == Normal(dir());
  table_base_step_ = here ? found->manifest.step() : 0;
  table_increments_ = here ? found->table_increments : 0;
  return found;
}

absl::Status CheckpointManager::AddTableChains(const std::string& dir, RestorePoint& point) const {
  for (const CheckpointManifest::ShardFile& f : point.manifest.shards()) {
    int64_t since = f.tables_since_step(), after = point.manifest.step();
    std::vector<ShardRestore> chain;  // newest first
    while (since > 0) {
      const std::string base = (Normal(dir).parent_path() / absl::StrCat(kPrefix, since)).string();
      auto broken = [&](const std::string& why) {
        return absl::DataLossError(
            absl::StrCat("checkpoint ", dir, ": shard ", f.shard(), "'s tables build on ", base, ", which ", why));
      };
      if (since >= after || chain.size() > 100000) return broken("is not an earlier checkpoint");
      absl::StatusOr<std::string> bytes = ReadWholeFile((fs::path(base) / kManifest).string());
      CheckpointManifest manifest;
      if (!bytes.ok() || !manifest.ParseFromString(*bytes)) return broken("has no readable MANIFEST");
      if (manifest.step() != since || manifest.shards_size() != point.manifest.shards_size()) {
        return broken(absl::StrCat("is of step ", manifest.step(), " with ", manifest.shards_size(), " shards"));
      }
      PSTRAIN_ASSIGN_OR_RETURN(std::vector<ShardRestore> files, ShardFiles(base, manifest));
      const ShardRestore& link = files[f.shard()];
      const FileDigest expected{link.bytes(), link.crc32c()};
      if (absl::Status s = ReadWholeFile(link.path(), &expected).status(); !s.ok()) return broken(s.ToString());
      chain.push_back(link);
      after = since;
      since = 0;
      for (const CheckpointManifest::ShardFile& g : manifest.shards()) {
        if (g.shard() == f.shard()) since = g.tables_since_step();
      }
    }
    ShardRestore& restore = point.shards[f.shard()];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) *restore.add_table_base() = *it;
    point.table_increments = std::max(point.table_increments, static_cast<int>(chain.size()));
  }
  return absl::OkStatus();
}

bool CheckpointManager::Due(int64_t step, absl::Time now) const {
  if (dir().empty() || step <= last_step_) return false;
  const CheckpointConfig& c = config_.checkpoint();
  if (c.every_steps() > 0 && step % c.every_steps() == 0) return true;
  return c.every_seconds() > 0 && now - last_time_ >= absl::Seconds(c.every_seconds());
}

absl::StatusOr<std::vector<std::string>> CheckpointManager::PrepareShardPaths(int64_t step) const {
  const std::string ckpt = CheckpointDir(step);
  std::error_code ec;
  fs::remove_all(ckpt, ec);  // a leftover of an attempt that never committed
  fs::create_directories(ckpt, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", ckpt, ": ", ec.message()));
  std::vector<std::string> paths;
  for (int s = 0; s < num_shards_; ++s) paths.push_back((fs::path(ckpt) / ShardFileName(s, num_shards_)).string());
  return paths;
}

absl::Status CheckpointManager::Commit(int64_t step, const std::vector<CheckpointResponse>& shards, absl::Time now,
                                       const LedgerState* ledger) {
  CheckpointManifest manifest = Describe(step);
  if (ledger != nullptr) *manifest.mutable_ledger() = *ledger;
  for (int s = 0; s < static_cast<int>(shards.size()); ++s) {
    CheckpointManifest::ShardFile* f = manifest.add_shards();
    f->set_shard(s);
    f->set_file(ShardFileName(s, num_shards_));
    f->set_bytes(shards[s].bytes());
    f->set_crc32c(shards[s].crc32c());
    f->set_tables_since_step(shards[s].tables_since_step());
  }
  manifest.set_wall_time(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  const std::string ckpt = CheckpointDir(step);
  PSTRAIN_RETURN_IF_ERROR(
      WriteFileDurably((fs::path(ckpt) / kManifest).string(), manifest.SerializeAsString()).status());
  PSTRAIN_RETURN_IF_ERROR(SyncDirectory(dir()));
  last_step_ = step;
  last_time_ = now;
  const bool increment =
      std::any_of(shards.begin(), shards.end(), [](const CheckpointResponse& r) { return r.tables_since_step() > 0; });
  table_increments_ = increment ? table_increments_ + 1 : 0;
  table_base_step_ = step;
  LOG(INFO) << "checkpoint: committed " << ckpt << " (step " << step << ", " << shards.size() << " shards)";
  Prune();
  return absl::OkStatus();
}

int64_t CheckpointManager::TablesSinceStep() const {
  const int full_every = config_.checkpoint().table_full_every();
  if (config_.model().tables_size() == 0 || table_base_step_ <= 0 || table_increments_ + 1 >= full_every) return 0;
  return table_base_step_;
}

void CheckpointManager::Prune() const {
  const auto committed = ListCheckpoints(dir(), /*committed=*/true);
  if (committed.empty()) return;
  const int keep = std::max(1, config_.checkpoint().keep());
  // The kept checkpoints and every one their tables build on.
  std::set<int64_t> needed;
  for (size_t i = 0; i < committed.size() && i < static_cast<size_t>(keep); ++i) {
    for (int64_t step : TableBaseSteps(dir(), committed[i].first)) needed.insert(step);
  }
  std::error_code ec;
  for (size_t i = keep; i < committed.size(); ++i) {
    if (needed.contains(committed[i].first)) continue;
    fs::remove_all(committed[i].second, ec);
    if (ec) LOG(WARNING) << "checkpoint: cannot delete " << committed[i].second << ": " << ec.message();
  }
  // Incomplete ones older than the newest committed will never commit.
  for (const auto& [step, path] : ListCheckpoints(dir(), /*committed=*/false)) {
    if (step < committed.front().first && !fs::exists(fs::path(path) / kManifest, ec)) fs::remove_all(path, ec);
  }
}

}  // namespace pstrain
