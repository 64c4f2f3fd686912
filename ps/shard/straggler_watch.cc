// Which workers are slower than their peers (StragglerWatch, straggler_watch.h).
#include "ps/shard/straggler_watch.h"

#include <algorithm>
#include <numeric>

namespace pstrain {
namespace {

double Median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

template <typename Iterator>
double Mean(Iterator begin, Iterator end) {
  return std::accumulate(begin, end, 0.0) / static_cast<double>(std::distance(begin, end));
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
  p.ratios.push_back(seconds / peers);
  if (p.ratios.size() > kMeanWindow) p.ratios.pop_front();
  if (p.ratios.size() < kRecentWindow) return false;
  if (p.named >= 0) {
    Straggler& s = named_[p.named];
    s.set_ratio(RecentRatio(p));
    s.set_excess_seconds(s.excess_seconds() + std::max(0.0, seconds - peers));
    p.below = s.ratio() < kClearRatio ? p.below + 1 : 0;
    if (p.below < kClearPersist) return false;
    s.set_current(false);
    p.named = -1;
    p.throughout = 0;
    p.ratios.clear();  // the mean rule starts again from its steps at pace
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
  bool throughout = false;
  if (p.ratios.size() >= kThroughoutWindow) {
    const auto recent = p.ratios.end() - kThroughoutWindow;
    const auto slow = std::count_if(recent, p.ratios.end(), [](double r) { return r >= kThroughoutSlowRatio; });
    throughout = slow >= kThroughoutSlowSteps && Mean(recent, p.ratios.end()) >= kThroughoutRatio;
  }
  p.throughout = throughout ? p.throughout + 1 : 0;
  if (p.throughout >= kThroughoutPersist) return true;
  return p.ratios.size() == kMeanWindow && Mean(p.ratios.begin(), p.ratios.end()) >= kNameRatio;
}

double StragglerWatch::RecentRatio(const Pace& p) { return Mean(p.ratios.end() - kRecentWindow, p.ratios.end()); }

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
