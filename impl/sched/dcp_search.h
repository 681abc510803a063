// Internals of the "dcp" solver (dcp_solver.h describes the algorithm): the packing state of one
// micro-batch count, its longest-processing-time-first construction, the local search on the
// surrogate objective and the conversion to a plan::Plan. Not a public interface: only
// dcp_solver.cpp and the unit tests use it.
#pragma once

#include "plan/plan.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <set>
#include <utility>
#include <vector>

namespace dcp::sched::detail {

// t(L_i, k) per sample and group-size level, memoised per distinct length (real batches repeat
// lengths; the cost callback may run a whole time model).
class SampleTimes {
 public:
  SampleTimes(const plan::Batch& batch, std::vector<int> sizes, std::function<double(int64_t, int)> fn);
  // Inline (the cached value; compute() only on a first use): the packing calls it for every
  // sample at every level it tries.
  double operator()(int sample, int level) const { return at(uid(sample), level); }
  // The same by the index of the sample's distinct length (uid), for callers that hold it.
  int uid(int sample) const { return uid_[static_cast<size_t>(sample)]; }
  double at(int uid, int level) const {
    const size_t slot = static_cast<size_t>(uid) * sizes_.size() + static_cast<size_t>(level);
    const double v = cache_[slot];
    return std::isnan(v) ? compute(slot) : v;
  }
  const std::vector<int>& sizes() const { return sizes_; }
  int levels() const { return static_cast<int>(sizes_.size()); }

 private:
  double compute(size_t slot) const;  // fills cache_[slot] from fn_
  std::vector<int> sizes_;
  std::function<double(int64_t, int)> fn_;
  std::vector<int64_t> unique_;  // distinct lengths, ascending
  std::vector<int> uid_;         // sample -> index into unique_
  mutable std::vector<double> cache_;  // [unique x levels], NaN = not computed
};

// The join probe of Packing::build for the groups of one level: which existing group a sample
// of `tokens` tokens joins. Entries are (load, group), pushed whenever a group's load changes (the
// older ones go stale: `load_of[group]` is the group's current load, `room_of[group]` its token
// room). find() walks the live entries in (load, group) order and returns the first with room
// for the sample among the kJoinProbe lightest live ones, else -1; a live entry without room for
// it stays only while it has room for `min_future`, the shortest sample still to come (room only
// shrinks, so a group dropped here never fits a later sample), and stale entries are dropped.
// Probing a bounded number keeps a placement O(log) instead of rescanning every nearly full
// group for each sample (which made the packing quadratic).
// The live entries without room for the sample at hand are the lightest groups, which nearly
// every later sample probes again. One heap held them and a probe popped and pushed them back
// each time (4.6 million times in one packing of 262144 samples on 64 ranks; the heap's pops and
// pushes were a quarter of dcp's time there). Here they are parked in an ordered set beside the
// heap and a probe walks past them in place, reading the union of both in (load, group) order,
// the order of the one heap holding them all: the same groups in the same order, so the same
// plans (test_dcp_solver checks it against that one heap on random operation sequences).
inline constexpr int kJoinProbe = 4;
class JoinProbe {
 public:
  void push(double load, int group) { heap_.push({load, group}); }
  int find(int64_t tokens, int64_t min_future, const std::vector<double>& load_of, const std::vector<int64_t>& room_of);

 private:
  using Entry = std::pair<double, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
  std::multiset<Entry> parked_;
};

// One micro-batch count's packing. Groups are aligned blocks of plan/geometry's sizes (levels
// index the ascending size list; sizes are nested: each divides the next).
class Packing {
 public:
  // `cap`: token budget per rank (M, or less when the memory model rejects M's plans);
  // `kmin[i]`: the smallest level holding sample i within cap.
  Packing(const plan::Batch& batch, const SampleTimes& times, int n, int m, int64_t cap, const std::vector<int>& kmin);

  // LPT placement of every sample at its preferred level `level[i]` (smaller levels down to
  // kmin when nothing has room), then every empty rank covered by merging groups into the
  // smallest enclosing block that holds work. False if some sample fits nowhere or some
  // micro-batch stays empty (this count cannot hold the batch).
  // `spread`: open new groups in the micro-batch with the least work and let samples join
  // groups of any size >= kmin, instead of the first micro-batch with room and sizes <= level.
  bool build(const std::vector<int>& level, bool spread = false);

  // The state of an existing valid plan (e.g. Megatron's) with this packing's m, cap and sizes:
  // false if some group size is not one of the levels or a group exceeds cap.
  bool load(const plan::Plan& plan);

  // Local search on the surrogate (sum over micro-batches of their critical path, the largest
  // time per rank of a group): moves a sample of a critical group to another group, swaps it
  // with a shorter one, merges the groups of a buddy block, splits a group into its child
  // blocks; a step is applied only if it lowers the surrogate. Stops at a local optimum or after
  // `budget` work units (one unit = one candidate step evaluated); returns the units used.
  int64_t improve(int64_t budget);

  double surrogate() const { return total_; }  // sum of per-micro-batch critical paths
  int microbatches() const { return m_; }
  plan::Plan to_plan(const plan::PlanConfig& config) const;

 private:
  struct Group {
    int mb = 0;
    int first = 0;
    int level = 0;
    int64_t tokens = 0;
    double load = 0;  // time per rank
    bool alive = true;
    std::vector<int> samples;
  };
  int size_of(int level) const { return times_.sizes()[level]; }
  int64_t room(const Group& g) const { return cap_ * size_of(g.level) - g.tokens; }
  double t(int sample, int level) const { return times_(sample, level); }
  int new_group(int mb, int first, int level);
  void add_sample(int gid, int sample);
  // The same with the sample's length and its time t(sample, level of gid) already at hand.
  void add_sample(int gid, int sample, int64_t length_tokens, double time);
  void refresh_mb(int mb);  // recomputes crit_[mb] and total_
  bool cover_empty_ranks();
  bool try_move_or_swap(int gid, int64_t& units, int64_t budget);
  bool try_merge(int gid, int64_t& units);
  bool try_split(int gid, int64_t& units);
  double max_load_excluding(int mb, int gid_a, int gid_b) const;
  void rebuild_slack_lists();

  const plan::Batch& batch_;
  const SampleTimes& times_;
  const int n_;
  const int m_;
  const int64_t cap_;
  const std::vector<int>& kmin_;
  std::vector<Group> groups_;
  std::vector<std::vector<int>> mb_groups_;  // live group ids per micro-batch
  std::vector<double> crit_;                 // critical path per micro-batch
  double total_ = 0;
  std::vector<std::vector<int>> slack_;      // per level: group ids by slack (crit - load), descending
};

// Pipeline ramp (dcp_solver.h step 11). A 1F1B pipeline idles at the start until the first
// micro-batch's forward has crossed pp - 1 stages and at the end while the last one's backward
// crosses them back: the fill and drain scale with the first and last micro-batch, not with the
// average, so light micro-batches at both ends shorten them. Each round takes one of the
// kRampTries lightest micro-batches (critical path under `load`) every group of which holds at
// least two samples, splits it (split_halves) and moves the halves to the front and back, both
// to the front or both to the back; the candidate with the lowest `rank` (lower is better)
// replaces the plan if it beats it. At most kRampRounds rounds (each adds one micro-batch); stops
// at the first round without a gain. So the result never ranks worse than `start`
// (`start_rank` = rank(start)), and every candidate is a valid plan whenever `start` is: the
// halves keep their group's ranks and partition its samples.
// `load(sample, cp_size)`: time per rank of a sample on a group of that size.
inline constexpr int kRampRounds = 6;
// Critical path of a micro-batch: the largest load of a group (sum of its samples' loads).
double critical_path(const plan::MicroBatch& mb, const std::function<double(int, int)>& load);
inline constexpr size_t kRampTries = 3;
struct Ramped {
  plan::Plan plan;
  double rank = 0;
};
Ramped pipeline_ramp(const plan::Plan& start, const std::function<double(int, int)>& load, double start_rank,
                     const std::function<double(const plan::Plan&)>& rank);
// Each group's samples in two halves on the group's ranks: heaviest first, each to the half with
// the smaller load so far (ties: the first). Empty if some group holds fewer than two samples.
std::optional<std::pair<plan::MicroBatch, plan::MicroBatch>> split_halves(
    const plan::MicroBatch& mb, const std::function<double(int, int)>& load);

// The built-in 1F1B estimate of a packing's step (surrogate S over m micro-batches, pp stages):
// (S + (pp - 1) * S / m) / pp.
double pipeline_estimate(double surrogate, int m, int pp);

}  // namespace dcp::sched::detail
