#include "device/topology/flow_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace pstrain {
namespace {

// A flow with at most this many bytes left has arrived (float rounding of
// rate x time).
constexpr double kArrivedBytes = 1e-6;

}  // namespace

FlowModel::FlowModel(std::vector<Link> links) : links_(std::move(links)) {}

FlowModel::FlowId FlowModel::Start(std::vector<int> path, double bytes, double now) {
  Advance(now);
  const FlowId id = next_id_++;
  flows_[id] = Flow{std::move(path), std::max(0.0, bytes), 0};
  RemoveArrived();
  SolveRates();
  return id;
}

void FlowModel::Advance(double now) {
  if (now <= now_) return;
  const double elapsed = now - now_;
  for (auto& [id, flow] : flows_) flow.remaining -= flow.rate * elapsed;
  now_ = now;
  const size_t before = flows_.size();
  RemoveArrived();
  if (flows_.size() != before) SolveRates();
}

void FlowModel::RemoveArrived() {
  for (auto it = flows_.begin(); it != flows_.end();) {
    const bool arrived = it->second.remaining <= kArrivedBytes || it->second.path.empty();
    it = arrived ? flows_.erase(it) : std::next(it);
  }
}

void FlowModel::SolveRates() {
  std::vector<double> capacity(links_.size());
  for (size_t l = 0; l < links_.size(); ++l) capacity[l] = links_[l].bytes_per_second;
  std::vector<Flow*> growing;
  for (auto& [id, flow] : flows_) {
    flow.rate = 0;
    growing.push_back(&flow);
  }
  while (!growing.empty()) {
    std::vector<int> crossing(links_.size(), 0);
    for (const Flow* flow : growing) {
      for (int l : flow->path) ++crossing[l];
    }
    double step = std::numeric_limits<double>::infinity();
    for (size_t l = 0; l < links_.size(); ++l) {
      if (crossing[l] > 0) step = std::min(step, capacity[l] / crossing[l]);
    }
    for (Flow* flow : growing) {
      flow->rate += step;
      for (int l : flow->path) capacity[l] -= step;
    }
    // Flows crossing a link that is now full keep their rate.
    std::vector<Flow*> still;
    for (Flow* flow : growing) {
      const bool blocked = std::any_of(flow->path.begin(), flow->path.end(),
                                       [&](int l) { return capacity[l] <= 1e-9 * links_[l].bytes_per_second; });
      if (!blocked) still.push_back(flow);
    }
    growing = std::move(still);
  }
}

double FlowModel::NextArrival() const {
  double first = std::numeric_limits<double>::infinity();
  for (const auto& [id, flow] : flows_) {
    if (flow.rate > 0) first = std::min(first, now_ + flow.remaining / flow.rate);
  }
  return first;
}

double FlowModel::Rate(FlowId id) const {
  auto it = flows_.find(id);
  return it == flows_.end() ? 0 : it->second.rate;
}

std::vector<double> ArrivalTimes(const std::vector<Link>& links,
                                 const std::vector<std::pair<std::vector<int>, double>>& flows) {
  FlowModel model(links);
  std::vector<FlowModel::FlowId> ids;
  for (const auto& [path, bytes] : flows) ids.push_back(model.Start(path, bytes, 0));
  std::vector<double> arrival(flows.size(), 0);
  double now = 0;
  while (model.in_flight() > 0) {
    now = model.NextArrival();
    model.Advance(now);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (arrival[i] == 0 && model.Done(ids[i])) arrival[i] = now;
    }
  }
  return arrival;
}

}  // namespace pstrain
