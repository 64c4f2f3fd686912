// Which workers are slower than their peers (StragglerWatch, straggler_watch.h).
#include "ps/shard/straggler_watch.h"

#include <algorithm>

namespace pstrain {
namespace {

double Median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

// Busy seconds over the peers' pace over the steps [begin, end).
template <typename Iterator>
double Ratio(Iterator begin, Iterator end) {
  double busy = 0;
  double peers = 0;
  for (Iterator step = begin; step != end; ++step) {
    busy += step->busy;
    peers += step->peers;
  }
  return busy / peers;
}

}  // namespace

bool StragglerWatch::Observe(int worker, int64_t local_step, double seconds) {
  Pace& p = workers_[worker];
  if (local_step <= p.last_step || seconds <= 0) return false;
  p.last_step = local_step;
  p.last_report = ++reports_;
  Remember(p, seconds);
  const double peers = PeersTypical(worker);
  if (peers <= 0) return false;
  p.steps.push_back({seconds, peers});
  if (p.steps.size() > kMeanWindow) p.steps.pop_front();
  if (p.steps.size() < kRecentWindow) return false;
  if (p.named >= 0) {
    Straggler& s = named_[p.named];
    s.set_ratio(RecentRatio(p));
    s.set_excess_seconds(s.excess_seconds() + std::max(0.0, seconds - peers));
    p.below = s.ratio() < kClearRatio ? p.below + 1 : 0;
    if (p.below < kClearPersist) return false;
    s.set_current(false);
    p.named = -1;
    p.throughout = 0;
    p.steps.clear();  // the mean rule starts again from its steps at pace
    return true;
  }
  if (!MeetsANamingRule(p)) return false;
  Straggler s;
  s.set_worker(worker);
  s.set_ratio(RecentRatio(p));
  s.set_named_at_step(local_step);
  s.set_current(true);
  p.named = static_cast<int>(named_.size());
  p.below = 0;
  named_.push_back(s);
  return true;
}

void StragglerWatch::Remember(Pace& p, double seconds) {
  p.busy.push_back(seconds);
  if (p.busy.size() > kPeerWindow) p.busy.pop_front();
  if (p.busy.size() == kPeerWindow) p.typical = Median({p.busy.begin(), p.busy.end()});
}

bool StragglerWatch::MeetsANamingRule(Pace& p) {
  p.throughout = SlowedThroughout(p) ? p.throughout + 1 : 0;
  if (p.throughout >= kThroughoutPersist) return true;
  return p.steps.size() == kMeanWindow && Ratio(p.steps.begin(), p.steps.end()) >= kNameRatio;
}

bool StragglerWatch::SlowedThroughout(const Pace& p) {
  if (p.steps.size() < kThroughoutWindow) return false;
  const auto recent = p.steps.end() - kThroughoutWindow;
  if (Ratio(recent, p.steps.end()) < kThroughoutRatio) return false;
  constexpr int kBlock = kThroughoutWindow / kThroughoutBlocks;
  for (auto block = recent; block != p.steps.end(); block += kBlock) {
    if (Ratio(block, block + kBlock) < kThroughoutBlockRatio) return false;
  }
  return true;
}

double StragglerWatch::RecentRatio(const Pace& p) { return Ratio(p.steps.end() - kRecentWindow, p.steps.end()); }

void StragglerWatch::Forget(int worker) {
  Pace& p = workers_[worker];
  if (p.named >= 0) named_[p.named].set_current(false);
  p = Pace();
}

void StragglerWatch::Finished(int worker) {
  Pace& p = workers_[worker];
  const int named = p.named;
  p = Pace();
  p.named = named;
}

std::vector<Straggler> StragglerWatch::Current() const {
  std::vector<Straggler> current;
  for (const Pace& p : workers_) {
    if (p.named >= 0) current.push_back(named_[p.named]);
  }
  return current;
}

double StragglerWatch::PeersTypical(int worker) const {
  const int64_t stale = kStaleRounds * static_cast<int64_t>(workers_.size());
  std::vector<double> typical;
  for (int w = 0; w < static_cast<int>(workers_.size()); ++w) {
    const Pace& peer = workers_[w];
    if (w == worker || peer.busy.size() < kPeerWindow || reports_ - peer.last_report > stale) continue;
    typical.push_back(peer.typical);
  }
  return typical.empty() ? 0 : Median(std::move(typical));
}

}  // namespace pstrain
