// The config's emulation.link_changes applied while the roles run: links that
// slow down or recover mid-run (to see, for example, the layout tuner follow
// them; docs/EMULATION.md).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "tools/launch/emulated_cluster.h"

namespace pstrain::launch {

// One change as the wall clock sees it: `at` after the start, every link
// capped at `gbps` (the config's rate divided by the time scale and the
// byte scale: LinkDilation).
struct LinkStep {
  absl::Duration at;
  double gbps = 0;        // as tc applies it
  double model_gbps = 0;  // as the config says
  double model_seconds = 0;
};

// The changes of `experiment` on the wall clock (after_seconds scaled by
// emulation.time_scale, gbps by LinkDilation), in order.
std::vector<LinkStep> LinkStepsOf(const ExperimentConfig& experiment, double byte_scale = 1);

class LinkSchedule {
 public:
  // Starts a thread that makes each change of `steps` on `cluster` (not
  // owned; it outlives this) when due, saying so through `say` (one line
  // each, with the wall-clock time). A failed change is said and ends the
  // schedule; the run goes on at the links it has.
  LinkSchedule(EmulatedCluster* cluster, std::vector<LinkStep> steps, std::function<void(const std::string&)> say);
  // Stops the thread; changes not yet due are not made.
  ~LinkSchedule();
  LinkSchedule(const LinkSchedule&) = delete;
  LinkSchedule& operator=(const LinkSchedule&) = delete;

 private:
  void Run(absl::Time start);

  EmulatedCluster* const cluster_;
  const std::vector<LinkStep> steps_;
  const std::function<void(const std::string&)> say_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pstrain::launch
