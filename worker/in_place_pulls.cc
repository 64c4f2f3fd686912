#include "worker/in_place_pulls.h"

#include <utility>

namespace pstrain {

struct InPlacePulls::Ticket::State {
  absl::Mutex mu;
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  int open_placed ABSL_GUARDED_BY(mu) = 0;  // calls that placed parts and have not completed
};

InPlacePulls::InPlacePulls() : state_(std::make_shared<Ticket::State>()) {}

InPlacePulls::~InPlacePulls() { Stop(); }

void InPlacePulls::Ticket::Complete() {
  absl::MutexLock lock(&state_->mu);
  if (completed_) return;
  completed_ = true;
  if (placed_) --state_->open_placed;
}

InPlacePulls::Call InPlacePulls::Open(PayloadDestination places) const {
  if (!places) return {};
  int64_t generation;
  {
    absl::MutexLock lock(&state_->mu);
    generation = state_->generation;
  }
  std::shared_ptr<Ticket> ticket(new Ticket(state_, generation));
  PayloadDestination receive_into = [ticket, places = std::move(places)](uint64_t offset, size_t bytes) -> void* {
    Ticket::State& state = *ticket->state_;
    absl::MutexLock lock(&state.mu);
    if (ticket->completed_ || ticket->generation_ != state.generation) return nullptr;
    void* place = places(offset, bytes);
    if (place != nullptr && !ticket->placed_) {
      ticket->placed_ = true;
      ++state.open_placed;
    }
    return place;
  };
  return {std::move(receive_into), std::move(ticket)};
}

void InPlacePulls::Stop() {
  absl::MutexLock lock(&state_->mu);
  ++state_->generation;
  state_->mu.Await(absl::Condition(
      +[](Ticket::State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->open_placed == 0; }, state_.get()));
}

}  // namespace pstrain
