#include "common/transport/ucx/message_parts.h"

#include "absl/strings/str_cat.h"

namespace pstrain::ucx_parts {

absl::Status CheckPayloadOffsets(const std::vector<ReceivedPart>& parts, size_t text_bytes, uint64_t payload_bytes) {
  uint64_t total = 0;
  for (const ReceivedPart& part : parts) total += part.length;
  if (payload_bytes > total || text_bytes > total - payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(payload_bytes, " bytes of payload and ", text_bytes,
                                                   " of text in a message of ", total, " bytes"));
  }
  const uint64_t payload_start = total - payload_bytes;  // in the whole message, text included
  uint64_t start = 0;
  for (size_t p = 0; p < parts.size(); start += parts[p].length, ++p) {
    const uint64_t claimed = parts[p].payload_offset;
    if (p == 0 || claimed == UINT64_MAX) continue;
    if (start < payload_start || start - payload_start != claimed) {
      return absl::InvalidArgumentError(absl::StrCat("part ", p, " says it starts at payload offset ", claimed,
                                                     ", but it starts at byte ", start,
                                                     " of a message whose payload starts at byte ", payload_start));
    }
  }
  return absl::OkStatus();
}

std::vector<PartSpan> SplitIntoParts(const std::vector<size_t>& piece_sizes, size_t own_part_bytes) {
  std::vector<PartSpan> parts;
  PartSpan run;  // the run of small pieces being grouped
  for (size_t i = 0; i < piece_sizes.size(); ++i) {
    if (piece_sizes[i] < own_part_bytes) {
      if (run.count == 0) run.first = i;
      ++run.count;
      continue;
    }
    if (run.count > 0) parts.push_back(run);
    run = PartSpan{};
    parts.push_back(PartSpan{i, 1});
  }
  if (run.count > 0 || parts.empty()) parts.push_back(run);
  return parts;
}

absl::Status PartAssembler::Announce(const MessageKey& key, uint32_t part, uint32_t parts, size_t length, bool* quiet) {
  *quiet = false;
  if (parts < 2 || parts > kMaxParts) {
    return absl::InvalidArgumentError(absl::StrCat("a message of ", parts, " parts (2 to ", kMaxParts, ")"));
  }
  if (part >= parts)
    return absl::InvalidArgumentError(absl::StrCat("part ", part, " of a message of ", parts, " parts"));
  auto [it, created] = messages_.try_emplace(key);
  Assembly& a = it->second;
  if (created) {
    a.parts = parts;
    a.seen.assign(parts, false);
    a.data.resize(parts);
  }
  ++a.announced;
  if (a.refused) {
    *quiet = true;
    RetireIfRefused(it);
    return absl::InvalidArgumentError("a part of a message already refused");
  }
  absl::Status refusal;
  if (parts != a.parts) {
    refusal = absl::InvalidArgumentError(
        absl::StrCat("part ", part, " says the message has ", parts, " parts, an earlier one said ", a.parts));
  } else if (a.seen[part]) {
    refusal = absl::InvalidArgumentError(absl::StrCat("part ", part, " of ", parts, " arrived twice"));
  } else if (static_cast<int64_t>(a.bytes + length) > max_message_bytes_) {
    refusal = absl::ResourceExhaustedError(absl::StrCat("ucx: received a message of more than ", a.bytes + length,
                                                        " bytes (in ", parts, " parts), larger than max_message_bytes ",
                                                        max_message_bytes_));
  }
  if (!refusal.ok()) {
    a.refused = true;
    a.data.clear();
    a.seen.clear();
    RetireIfRefused(it);
    return refusal;
  }
  a.seen[part] = true;
  a.bytes += length;
  return absl::OkStatus();
}

std::vector<ReceivedPart> PartAssembler::Complete(const MessageKey& key, uint32_t part, ReceivedPart data) {
  auto it = messages_.find(key);
  if (it == messages_.end() || it->second.refused || part >= it->second.parts) return {};
  Assembly& a = it->second;
  a.data[part] = std::move(data);
  if (++a.completed < a.parts) return {};
  std::vector<ReceivedPart> whole = std::move(a.data);
  messages_.erase(it);
  return whole;
}

void PartAssembler::ForgetEndpoint(const void* endpoint) {
  auto it = messages_.lower_bound(MessageKey{endpoint, 0, 0});
  while (it != messages_.end() && it->first.endpoint == endpoint) it = messages_.erase(it);
}

void PartAssembler::Forget(const MessageKey& key) { messages_.erase(key); }

void PartAssembler::RetireIfRefused(std::map<MessageKey, Assembly>::iterator it) {
  if (it->second.refused && it->second.announced >= it->second.parts) messages_.erase(it);
}

}  // namespace pstrain::ucx_parts
