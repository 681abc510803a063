// See async_planner.h. One background std::jthread; the handshake is one mutex, one condition
// variable (waits are interruptible by the thread's stop token) and a one-entry slot `ready_`.
#include "plan/async_planner.h"

#include <chrono>

#include "core/error.h"
#include "core/nvtx.h"

namespace dcp::plan {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
}  // namespace

AsyncPlanner::AsyncPlanner(const Planner& planner, const PlanConfig& config, BatchSource source, PlanningMode mode)
    : AsyncPlanner(
          [p = std::shared_ptr<const Planner>(std::shared_ptr<const Planner>(), &planner), config,
           src = std::move(source)](int64_t step) -> std::optional<PlanRequest> {
            std::optional<Batch> b = src(step);
            if (!b) return std::nullopt;
            return PlanRequest{std::move(*b), config, p};
          },
          mode) {}

AsyncPlanner::AsyncPlanner(RequestSource source, PlanningMode mode) : source_(std::move(source)), mode_(mode) {
  DCP_CHECK(static_cast<bool>(source_), "AsyncPlanner: no source");
  if (mode_ == PlanningMode::async) thread_ = std::jthread([this](std::stop_token st) { worker(st); });
}

AsyncPlanner::~AsyncPlanner() {
  if (thread_.joinable()) {
    thread_.request_stop();  // wakes the worker's wait (condition_variable_any + stop token)
    thread_.join();          // a plan in flight finishes first; its result is dropped
  }
}

AsyncPlanner::Outcome AsyncPlanner::run_step(const RequestSource& source, int64_t step) {
  Outcome out;
  try {
    std::optional<PlanRequest> req = source(step);
    if (!req) return out;  // the end: neither a plan nor an error
    DCP_CHECK(req->planner != nullptr, "AsyncPlanner: the source gave no planner for step ", step);
    DCP_NVTX_RANGE();
    PlannedStep ps;
    ps.step = step;
    const auto t0 = Clock::now();
    ps.plan = req->planner->plan(req->batch, req->config);
    ps.timing.plan_s = seconds_since(t0);
    ps.batch = std::move(req->batch);
    ps.config = req->config;
    out.planned = std::move(ps);
  } catch (...) {
    out.error = std::current_exception();
  }
  return out;
}

void AsyncPlanner::worker(std::stop_token stop) {
  for (int64_t step = 0;; ++step) {
    {
      std::unique_lock lock(mu_);
      // Runs step `step` only once next() has handed out step-1 (allowed_ = step+1).
      if (!cv_.wait(lock, stop, [&] { return step < allowed_; })) return;  // stop requested
    }
    Outcome out = run_step(source_, step);
    const bool end = !out.planned && !out.error;
    {
      std::lock_guard lock(mu_);
      ready_ = std::move(out);
    }
    cv_.notify_all();
    if (end) return;
  }
}

std::optional<PlannedStep> AsyncPlanner::next() {
  DCP_NVTX_RANGE();  // on a profile, the exposed planning wait of the training loop
  const auto t0 = Clock::now();
  Outcome out;
  if (mode_ == PlanningMode::sync) {
    {
      std::lock_guard lock(mu_);
      if (ended_) return std::nullopt;
    }
    out = run_step(source_, returned_);
  } else {
    std::unique_lock lock(mu_);
    if (ended_) return std::nullopt;
    cv_.wait(lock, [&] { return ready_.has_value(); });
    out = std::move(*ready_);
    ready_.reset();
  }
  const double waited = seconds_since(t0);
  {
    std::lock_guard lock(mu_);
    if (!out.planned && !out.error) {
      ended_ = true;
      return std::nullopt;
    }
    ++returned_;
    allowed_ = returned_ + 1;  // the worker may now plan step returned_ (one ahead)
  }
  cv_.notify_all();
  if (out.error) std::rethrow_exception(out.error);
  out.planned->timing.wait_s = waited;
  return std::move(out.planned);
}

int64_t AsyncPlanner::steps_returned() const {
  std::lock_guard lock(mu_);
  return returned_;
}

}  // namespace dcp::plan
