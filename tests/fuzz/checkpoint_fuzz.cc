// Fuzz target: checkpoints read back (docs/CHECKPOINTS.md): the chief's
// MANIFEST reading and validation (CheckpointManager::FindRestorePoint,
// worker/checkpoint_manager.h; resharding, worker/checkpoint_reshard.h, when
// the manifest places the variables otherwise) and the shards' checkpoint
// files (DecodeShardCheckpoint, common/shard_checkpoint_file.h, through
// LoadShardCheckpoint, ps/shard/shard_checkpoint.h, reached as a PS reaches it:
// an Init that restores). The shards hold no embedding table, so a file's
// tables section is decoded (and bounds-checked) and then refused.
//
// Feeds: three records (uint16 length, bytes each): a MANIFEST
// (CheckpointManifest) and the files shard-0-of-2.ckpt and shard-1-of-2.ckpt
// of the tiny model (fuzz_util.h), written into a scratch checkpoint
// directory. A CheckpointManager of that run (checkpoint.restore: the
// directory) looks for its restore point. Then each shard file is restored
// by a fresh PsShard through Init with restore (its size and CRC32C those
// of the bytes given, so the parser itself is what is tested, not the
// digest check), and the restored values are pulled.
// Asserts: errors carry a message; a restore point has one file per shard,
// inside the checkpoint directory, whose size and CRC32C are those the
// manifest records, and a step >= 0; a restore is refused unless the file
// is well-formed: after an accepted one, a pull of every variable is
// answered at once, with each variable's version and bytes exactly those
// of the file.
// Seeds: tests/fuzz/corpus/checkpoint/ (MANIFESTs and shard files of a
// tiny in-process run with checkpoints, recorded by
// tests/fuzz/record_seeds.cc; crash-* regression inputs).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/durable_file.h"
#include "proto/ps.pb.h"
#include "ps/shard/shard.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/ps_fuzz_shard.h"
#include "worker/checkpoint_manager.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

void CheckManifest(const std::string& dir) {
  ExperimentConfig config = TinyModelConfig();
  config.mutable_checkpoint()->set_restore(dir);
  for (int i = 0; i < kTinyWorkers; ++i) config.mutable_cluster()->add_worker_hosts(absl::StrCat("w", i, ":1"));
  absl::StatusOr<std::unique_ptr<CheckpointManager>> manager =
      CheckpointManager::Create(config, TinyModelParts(), kTinyShards);
  FUZZ_CHECK(manager.ok() && *manager != nullptr, manager.status().ToString());
  absl::StatusOr<std::optional<RestorePoint>> point = (*manager)->FindRestorePoint();
  if (!point.ok()) {
    CheckErrorExplains(point.status(), "FindRestorePoint");
    return;
  }
  FUZZ_CHECK(point->has_value(), "an explicit restore found nothing and said nothing");
  const RestorePoint& p = **point;
  FUZZ_CHECK(p.manifest.step() >= 0, "restore point at step ", p.manifest.step());
  FUZZ_CHECK(p.shards.size() == kTinyShards, p.shards.size(), " shard files");
  for (const ShardRestore& r : p.shards) {
    FUZZ_CHECK(absl::StartsWith(r.path(), dir + "/"), "shard file ", r.path(), " outside ", dir);
    std::string name = r.path().substr(dir.size() + 1);
    // A checkpoint of another layout is resharded into a directory of its own.
    const std::string resharded = absl::StrCat("reshard-", kTinyShards, "-shards/");
    if (absl::StartsWith(name, resharded)) name = name.substr(resharded.size());
    FUZZ_CHECK(name != "." && name != ".." && name.find('/') == std::string::npos, "shard file '", name, "'");
    FUZZ_CHECK(r.step() == p.manifest.step(), "shard restores step ", r.step(), " of manifest step ",
               p.manifest.step());
    const FileDigest expected{r.bytes(), r.crc32c()};
    FUZZ_CHECK(ReadWholeFile(r.path(), &expected).ok(), r.path(), " does not match the manifest's digest");
  }
}

// The values and versions a well-formed shard file holds, by name.
struct FileEntry {
  int64_t version = 0;
  std::string value;
};

std::map<std::string, FileEntry> ReadEntries(const std::string& bytes) {
  uint32_t length = 0;
  std::memcpy(&length, bytes.data() + 8, sizeof(length));
  ShardCheckpointHeader header;
  FUZZ_CHECK(header.ParseFromArray(bytes.data() + 12, static_cast<int>(length)), "accepted header does not parse");
  size_t offset = 12 + length;
  std::map<std::string, FileEntry> entries;
  for (const ShardCheckpointHeader::Entry& e : header.entries()) {
    int64_t n = 1;
    for (int64_t d : e.shape()) n *= d;
    const size_t value_bytes = static_cast<size_t>(n) * sizeof(float);
    FUZZ_CHECK(offset + value_bytes * (1 + e.slots()) <= bytes.size(), "accepted file too short for ", e.name());
    FUZZ_CHECK(entries.count(e.name()) == 0, "accepted file lists ", e.name(), " twice");
    entries[e.name()] = {e.version(), bytes.substr(offset, value_bytes)};
    offset += value_bytes * (1 + e.slots());
  }
  return entries;
}

void CheckShardFile(int shard, const std::string& path, const std::string& bytes) {
  absl::StatusOr<std::unique_ptr<PsShard>> created = PsShard::Create(TinyShardOptions(shard, "async", /*table=*/false));
  FUZZ_CHECK(created.ok(), created.status().ToString());
  PsShard& ps = **created;
  InitFrame init = TinyInit(shard);
  ShardRestore* restore = init.header.mutable_restore();
  restore->set_path(path);
  restore->set_bytes(bytes.size());
  restore->set_crc32c(Crc32c(bytes.data(), bytes.size()));
  restore->set_step(1);
  IncomingFrame payload = init.Incoming();
  InitResponse response;
  const absl::Status status = ps.Init(init.header, payload, &response);
  if (!status.ok()) {
    CheckErrorExplains(status, "Init with restore");
    return;
  }
  const std::map<std::string, FileEntry> entries = ReadEntries(bytes);
  PullRequest pull;
  pull.set_worker(0);
  int answers = 0;
  ps.Pull(pull, [&](absl::Status s, OutgoingFrame out) {
    ++answers;
    FUZZ_CHECK(s.ok(), "pull after a restore: ", s.ToString());
    IncomingFrame frame = IncomingFrame::FromOutgoing(std::move(out));
    PullResponse r;
    FUZZ_CHECK(frame.ParseHeader(&r), "pull response does not parse");
    FUZZ_CHECK(static_cast<size_t>(r.tensors_size()) == entries.size(), r.tensors_size(), " variables pulled, ",
               entries.size(), " in the file");
    for (int i = 0; i < r.tensors_size(); ++i) {
      const TensorHeader& t = r.tensors(i);
      auto it = entries.find(t.name());
      FUZZ_CHECK(it != entries.end(), "pulled ", t.name(), ", not in the file");
      FUZZ_CHECK(r.versions(i) == it->second.version, t.name(), " at version ", r.versions(i), ", the file says ",
                 it->second.version);
      std::string value(t.num_bytes(), '\0');
      FUZZ_CHECK(frame.Read(value.data(), value.size()).ok(), "pull payload short");
      FUZZ_CHECK(value == it->second.value, t.name(), ": pulled values differ from the file's");
    }
  });
  ps.CancelPendingPulls(absl::CancelledError("fuzz input done"));
  FUZZ_CHECK(answers == 1, "a pull of a restored shard was answered ", answers,
             " times before cancelling (parked: a version it can never reach?)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const std::string dir = ScratchDir() + "/ckpt-1";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  const std::string manifest(in.Record());
  std::string shard_files[kTinyShards];
  for (int s = 0; s < kTinyShards; ++s) shard_files[s] = std::string(in.Record());
  WriteFile(dir + "/MANIFEST", manifest);
  for (int s = 0; s < kTinyShards; ++s) {
    WriteFile(absl::StrCat(dir, "/shard-", s, "-of-", kTinyShards, ".ckpt"), shard_files[s]);
  }
  CheckManifest(dir);
  for (int s = 0; s < kTinyShards; ++s) {
    CheckShardFile(s, absl::StrCat(dir, "/shard-", s, "-of-", kTinyShards, ".ckpt"), shard_files[s]);
  }
  return 0;
}
