// FlowModel: concurrent transfers over shared links, as a fluid.
//
// A link carries bytes in one direction at a fixed rate. A flow moves a
// number of bytes along a path of links; while several flows are in flight,
// each moves at its max-min fair share of every link on its path
// (progressive filling: every flow's rate grows together until a link it
// crosses is full; the flows crossing a full link keep that rate, the others
// grow on). Rates are solved again whenever a flow starts or ends, so two
// flows through one link take twice as long as one, and a flow whose other
// links are busy leaves the rest of a link's rate to the others.
//
// Time is given by the caller, in seconds, and never goes backwards: the
// model is pure, so tests run it on virtual time and EmulatedInterconnect
// (emulated_interconnect.h) runs it on the real clock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pstrain {

struct Link {
  std::string name;         // e.g. "gpu3->switch1"
  double bytes_per_second;  // > 0
};

class FlowModel {
 public:
  using FlowId = int64_t;
  explicit FlowModel(std::vector<Link> links);

  const std::vector<Link>& links() const { return links_; }
  // Starts a flow of `bytes` along `path` (indices into links(); a path may
  // be empty, and bytes may be 0: such a flow is done at once) at time `now`,
  // which must not be earlier than any time given before.
  FlowId Start(std::vector<int> path, double bytes, double now);
  // Moves every flow on to `now`; flows that have arrived by then are done.
  void Advance(double now);
  // Whether `id` has arrived (as of the last Start or Advance).
  bool Done(FlowId id) const { return flows_.count(id) == 0; }
  // When the first flow in flight arrives if nothing else starts;
  // +infinity when none is in flight.
  double NextArrival() const;
  // The current rate of a flow in flight, bytes per second (0 when done).
  double Rate(FlowId id) const;
  int in_flight() const { return static_cast<int>(flows_.size()); }

 private:
  struct Flow {
    std::vector<int> path;
    double remaining = 0;
    double rate = 0;
  };
  // Max-min fair rates of the flows in flight (progressive filling).
  void SolveRates();
  // Removes flows with nothing left to move.
  void RemoveArrived();

  std::vector<Link> links_;
  std::map<FlowId, Flow> flows_;
  FlowId next_id_ = 0;
  double now_ = 0;
};

// Runs `flows` (path, bytes), all started at time 0, on a fresh model of
// `links` and returns when each arrives: a known-answer helper for tests and
// benchmarks.
std::vector<double> ArrivalTimes(const std::vector<Link>& links,
                                 const std::vector<std::pair<std::vector<int>, double>>& flows);

}  // namespace pstrain
