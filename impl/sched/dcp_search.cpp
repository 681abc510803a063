// See dcp_search.h and dcp_solver.h.
#include "sched/dcp_search.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

namespace dcp::sched::detail {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// A step must lower the surrogate by more than this relative amount (no cycling on round-off).
constexpr double kRelEps = 1e-12;
// Targets tried per level for a move or swap (the groups with the most slack), and samples of a
// target tried as swap partners: small constants so one step costs O(levels) evaluations.
constexpr int kTargetsPerLevel = 6;
constexpr int kSwapPartners = 8;
}  // namespace

SampleTimes::SampleTimes(const plan::Batch& batch, std::vector<int> sizes, std::function<double(int64_t, int)> fn)
    : sizes_(std::move(sizes)), fn_(std::move(fn)), unique_(batch.lengths) {
  std::sort(unique_.begin(), unique_.end());
  unique_.erase(std::unique(unique_.begin(), unique_.end()), unique_.end());
  uid_.resize(batch.lengths.size());
  for (size_t i = 0; i < batch.lengths.size(); ++i)
    uid_[i] = static_cast<int>(std::lower_bound(unique_.begin(), unique_.end(), batch.lengths[i]) - unique_.begin());
  cache_.assign(unique_.size() * sizes_.size(), std::numeric_limits<double>::quiet_NaN());
}

double SampleTimes::compute(size_t slot) const {
  const size_t levels = sizes_.size();
  return cache_[slot] = fn_(unique_[slot / levels], sizes_[slot % levels]);
}

std::optional<std::pair<plan::MicroBatch, plan::MicroBatch>> split_halves(
    const plan::MicroBatch& mb, const std::function<double(int, int)>& load) {
  plan::MicroBatch a, b;
  for (const auto& gr : mb.groups) {
    if (gr.samples.size() < 2) return std::nullopt;
    std::vector<std::pair<double, int>> by_load;  // (load, sample): heaviest first, ties by position
    for (int x : gr.samples) by_load.emplace_back(load(x, gr.cp_size), x);
    std::stable_sort(by_load.begin(), by_load.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    plan::Group ga{gr.first_rank, gr.cp_size, {}}, gb{gr.first_rank, gr.cp_size, {}};
    double la = 0, lb = 0;
    for (const auto& [l, x] : by_load) {
      const bool to_a = la <= lb;
      (to_a ? ga : gb).samples.push_back(x);
      (to_a ? la : lb) += l;
    }
    a.groups.push_back(std::move(ga));
    b.groups.push_back(std::move(gb));
  }
  return std::make_pair(std::move(a), std::move(b));
}

double critical_path(const plan::MicroBatch& mb, const std::function<double(int, int)>& load) {
  double mx = 0;
  for (const auto& gr : mb.groups) {
    double l = 0;
    for (int x : gr.samples) l += load(x, gr.cp_size);
    mx = std::max(mx, l);
  }
  return mx;
}

Ramped pipeline_ramp(const plan::Plan& start, const std::function<double(int, int)>& load, double start_rank,
                     const std::function<double(const plan::Plan&)>& rank) {
  Ramped best{start, start_rank};
  for (int round = 0; round < kRampRounds; ++round) {
    const plan::Plan cur = best.plan;
    const auto& mbs = cur.microbatches;
    std::vector<std::pair<double, size_t>> light;  // (critical path, index) of the splittable ones
    for (size_t i = 0; i < mbs.size(); ++i) {
      const auto& gs = mbs[i].groups;
      if (std::all_of(gs.begin(), gs.end(), [](const plan::Group& gr) { return gr.samples.size() >= 2; }))
        light.emplace_back(critical_path(mbs[i], load), i);
    }
    std::stable_sort(light.begin(), light.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (light.size() > kRampTries) light.resize(kRampTries);
    bool improved = false;
    for (const auto& [c, i] : light) {
      auto halves = split_halves(mbs[i], load);
      for (int where = 0; where < 3; ++where) {  // front + back, both front, both back
        plan::Plan p = cur;
        auto& v = p.microbatches;
        v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
        if (where == 0) {
          v.insert(v.begin(), halves->first);
          v.push_back(halves->second);
        } else if (where == 1) {
          v.insert(v.begin(), {halves->first, halves->second});
        } else {
          v.insert(v.end(), {halves->first, halves->second});
        }
        const double r = rank(p);
        if (r < best.rank) {
          best = Ramped{std::move(p), r};
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
  return best;
}

double pipeline_estimate(double surrogate, int m, int pp) {
  const double p = static_cast<double>(std::max(1, pp));
  return (surrogate + (p - 1) * surrogate / static_cast<double>(std::max(1, m))) / p;
}

int JoinProbe::find(int64_t tokens, int64_t min_future, const std::vector<double>& load_of,
                    const std::vector<int64_t>& room_of) {
  auto next_parked = parked_.begin();
  int probed = 0;
  while (probed < kJoinProbe) {
    const bool heap_first = !heap_.empty() && (next_parked == parked_.end() || heap_.top() < *next_parked);
    if (!heap_first && next_parked == parked_.end()) break;
    const auto [load, id] = heap_first ? heap_.top() : *next_parked;
    const bool live = load == load_of[id];
    const int64_t r = room_of[id];
    if (live && tokens <= r) return id;
    if (live && r >= min_future) {  // no room for this sample, maybe for a later one: parked
      ++probed;
      if (heap_first) {
        parked_.insert(next_parked, {load, id});  // before the next parked entry: still in order
        heap_.pop();
      } else {
        ++next_parked;
      }
    } else if (heap_first) {  // stale, or full for every sample still to come: dropped
      heap_.pop();
    } else {
      next_parked = parked_.erase(next_parked);
    }
  }
  return -1;
}

Packing::Packing(const plan::Batch& batch, const SampleTimes& times, int n, int m, int64_t cap,
                 const std::vector<int>& kmin)
    : batch_(batch), times_(times), n_(n), m_(m), cap_(cap), kmin_(kmin) {}

int Packing::new_group(int mb, int first, int level) {
  groups_.push_back(Group{mb, first, level, 0, 0.0, true, {}});
  return static_cast<int>(groups_.size()) - 1;
}

void Packing::add_sample(int gid, int sample) {
  add_sample(gid, sample, batch_.lengths[sample], t(sample, groups_[gid].level));
}

void Packing::add_sample(int gid, int sample, int64_t length_tokens, double time) {
  Group& g = groups_[gid];
  g.samples.push_back(sample);
  g.tokens += length_tokens;
  g.load += time;
}

bool Packing::build(const std::vector<int>& level, bool spread) {
  const int g_count = static_cast<int>(batch_.size());
  const int levels = times_.levels();
  groups_.clear();
  groups_.reserve(static_cast<size_t>(g_count));
  // Longest processing time first: by total work k * t(L, k), ties by id (a total order, so the
  // result does not depend on the sort). Each sample carries what placing it reads (its length,
  // distinct-length index, levels), so the loop below reads them in sequence instead of at random
  // sample ids. With the inline SampleTimes this took dcp's median at 262144 samples on 64 ranks
  // from 1.48 to 0.95 s (bench_sched, the join probe already in place; 2026-12-04).
  struct Item {
    double work;
    int64_t len;
    int id, uid, kmin, level;
  };
  std::vector<Item> order(g_count);
  for (int i = 0; i < g_count; ++i)
    order[i] = Item{size_of(level[i]) * t(i, level[i]), batch_.lengths[i], i, times_.uid(i), kmin_[i], level[i]};
  std::sort(order.begin(), order.end(),
            [](const Item& a, const Item& b) { return a.work != b.work ? a.work > b.work : a.id < b.id; });
  // Each group's load and token room by id, beside groups_ and always equal to its fields: what
  // the join probe reads of each entry it tests (dense, not one 64-byte Group per test).
  std::vector<double> gload;
  std::vector<int64_t> groom;
  gload.reserve(static_cast<size_t>(g_count));
  groom.reserve(static_cast<size_t>(g_count));

  // Buddy bookkeeping per micro-batch: ranks used in each aligned block of each level, the count
  // of entirely free blocks per level and a cursor at the lowest block that may still be free
  // (blocks are only ever consumed while packing, so the cursor only moves forward).
  std::vector<int> offset(levels + 1, 0);
  for (int l = 0; l < levels; ++l) offset[l + 1] = offset[l] + n_ / size_of(l);
  const size_t per_mb = static_cast<size_t>(offset[levels]);
  std::vector<int> used(per_mb * m_, 0);
  std::vector<int> free_count(static_cast<size_t>(m_) * levels);
  std::vector<int> cursor(static_cast<size_t>(m_) * levels, 0);
  for (int mb = 0; mb < m_; ++mb)
    for (int l = 0; l < levels; ++l) free_count[mb * levels + l] = n_ / size_of(l);
  auto allocate = [&](int mb, int j, int first) {
    int* u = used.data() + per_mb * mb;
    for (int l = 0; l < levels; ++l) {
      const int s = size_of(l);
      if (l <= j) {
        for (int b = first / s; b < (first + size_of(j)) / s; ++b) u[offset[l] + b] = s;
        free_count[mb * levels + l] -= size_of(j) / s;
      } else {
        int& x = u[offset[l] + first / s];
        if (x == 0) --free_count[mb * levels + l];
        x += size_of(j);
      }
    }
  };
  auto lowest_free = [&](int mb, int j) {
    const int* u = used.data() + per_mb * mb + offset[j];
    int& c = cursor[mb * levels + j];
    while (u[c] != 0) ++c;
    return c * size_of(j);
  };

  using Entry = std::pair<double, int>;
  using MinHeap = std::priority_queue<Entry, std::vector<Entry>, std::greater<>>;
  // A new group opens in the first micro-batch with a free block of its size: long samples end
  // up together and short ones together, so each micro-batch is balanced within itself (as in
  // Megatron's greedy). Measured with the built-in model on log-normal batches (mean 2000,
  // sigma 1.7, 64 ranks, M 8192): the sum of critical paths was 6% (2048 samples) and 5% (16384)
  // lower than opening it in the micro-batch with the least work. Blocks are only consumed, so
  // the first micro-batch with a free block of a level only moves forward (a cursor per level).
  std::vector<int> mb_cursor(levels, 0);
  // `spread` instead: the micro-batch with the least work that has a free block (lazy min-heaps
  // of (work, micro-batch) per level), and joins of any level >= kmin (the pre-search dcp rule;
  // kept as a second candidate per count because under the simulator's pipeline it sometimes
  // wins: measured on llama13b-github, see README "Scheduler speed").
  std::vector<double> mb_work(spread ? m_ : 0, 0.0);
  std::vector<MinHeap> mb_heap(spread ? levels : 0);
  for (int l = 0; spread && l < levels; ++l)
    for (int mb = 0; mb < m_; ++mb) mb_heap[l].push({0.0, mb});
  std::vector<std::priority_queue<std::pair<int64_t, int>>> room_heap(levels);  // (room, group) per level

  // The least-loaded group of `level` with room for `tokens` among the kJoinProbe lightest
  // (JoinProbe), else the group with the most room if it holds the sample.
  std::vector<JoinProbe> probes(levels);
  int64_t min_future = 0;
  auto lightest_with_room = [&](int l, int64_t tokens) {
    const int found = probes[l].find(tokens, min_future, gload, groom);
    if (found >= 0) return found;
    // None of the lightest has room: the group with the most room, if it holds the sample (a
    // max-heap of (room, group) per level, stale entries dropped), so a tight token budget never
    // fails a placement that some group could take.
    auto& rh = room_heap[l];
    while (!rh.empty() && rh.top().first != groom[rh.top().second]) rh.pop();
    return !rh.empty() && rh.top().first >= tokens ? rh.top().second : -1;
  };
  // Sample i: a new group at level kk in the first micro-batch with a free block of that size,
  // or the existing group of a level in [kmin, kk] with room that leaves the smaller load
  // per rank (ties: the new group). Larger groups are joined only as a last resort (`bigger`):
  // their smaller time per rank hides the CP communication the sample would add to the total
  // work (kk is its best size), but their token room keeps tight counts feasible.
  auto place = [&](const Item& it, int kk, bool bigger) {
    const int i = it.id;
    const int64_t len = it.len;
    const auto ti = [&](int l) { return times_.at(it.uid, l); };  // t(i, l)
    int best_mb = -1;
    if (spread) {
      auto& mh = mb_heap[kk];
      while (!mh.empty() && (mh.top().first != mb_work[mh.top().second] || free_count[mh.top().second * levels + kk] == 0))
        mh.pop();
      if (!mh.empty()) best_mb = mh.top().second;
    } else {
      int& mc = mb_cursor[kk];
      while (mc < m_ && free_count[mc * levels + kk] == 0) ++mc;
      if (mc < m_) best_mb = mc;
    }
    double best = best_mb >= 0 ? ti(kk) : kInf;
    int gid = -1;
    for (int l = it.kmin; l <= (bigger || spread ? levels - 1 : kk); ++l) {
      const int id = lightest_with_room(l, len);
      if (id < 0) continue;
      const double joined = gload[id] + ti(l);
      if (joined < best) {
        best = joined;
        gid = id;
      }
    }
    if (gid < 0) {
      if (best_mb < 0) return false;
      const int first = lowest_free(best_mb, kk);
      allocate(best_mb, kk, first);
      gid = new_group(best_mb, first, kk);
      gload.push_back(0);
      groom.push_back(0);
    }
    const Group& g = groups_[gid];
    add_sample(gid, i, len, ti(g.level));
    gload[gid] = g.load;
    groom[gid] = room(g);
    probes[g.level].push(g.load, gid);
    room_heap[g.level].push({groom[gid], gid});
    if (spread) {
      mb_work[g.mb] += ti(g.level) * size_of(g.level);
      for (int l = 0; l < levels; ++l)
        if (free_count[g.mb * levels + l] > 0) mb_heap[l].push({mb_work[g.mb], g.mb});
    }
    return true;
  };
  std::vector<int64_t> suffix_min(order.size() + 1, std::numeric_limits<int64_t>::max());
  for (size_t q = order.size(); q-- > 0;) suffix_min[q] = std::min(suffix_min[q + 1], order[q].len);
  for (size_t q = 0; q < order.size(); ++q) {
    const Item& it = order[q];
    min_future = suffix_min[q];
    bool placed = false;
    for (int kk = it.level; kk >= it.kmin && !placed; --kk) placed = place(it, kk, false);
    if (!placed) placed = place(it, it.level, true);  // last resort: join a larger group with room
    if (!placed) return false;
  }
  return cover_empty_ranks();
}

bool Packing::load(const plan::Plan& plan) {
  if (static_cast<int>(plan.microbatches.size()) != m_) return false;
  const auto& sizes = times_.sizes();
  groups_.clear();
  for (int mb = 0; mb < m_; ++mb) {
    for (const auto& gr : plan.microbatches[mb].groups) {
      const auto it = std::lower_bound(sizes.begin(), sizes.end(), gr.cp_size);
      if (it == sizes.end() || *it != gr.cp_size) return false;
      const int gid = new_group(mb, gr.first_rank, static_cast<int>(it - sizes.begin()));
      for (int s : gr.samples) {
        if (kmin_[s] > groups_[gid].level) return false;
        add_sample(gid, s);
      }
      if (groups_[gid].tokens > cap_ * gr.cp_size) return false;
    }
  }
  return cover_empty_ranks();
}

bool Packing::cover_empty_ranks() {
  const int levels = times_.levels();
  mb_groups_.assign(m_, {});
  for (int id = 0; id < static_cast<int>(groups_.size()); ++id) mb_groups_[groups_[id].mb].push_back(id);
  std::vector<int> rep(n_);
  std::vector<int> inside;
  for (int mb = 0; mb < m_; ++mb) {
    std::fill(rep.begin(), rep.end(), -1);
    for (int id : mb_groups_[mb])
      std::fill(rep.begin() + groups_[id].first, rep.begin() + groups_[id].first + size_of(groups_[id].level), id);
    // Levels ascending: a block holding both empty ranks and work becomes one group (every group
    // meeting it lies inside it, since blocks are nested); its samples keep their rank order.
    for (int l = 1; l < levels; ++l) {
      const int s = size_of(l);
      for (int f = 0; f < n_; f += s) {
        bool empty = false;
        inside.clear();
        for (int r = f; r < f + s; ++r) {
          if (rep[r] < 0) {
            empty = true;
          } else if (inside.empty() || inside.back() != rep[r]) {
            inside.push_back(rep[r]);
          }
        }
        if (!empty || inside.empty()) continue;
        const int gid = new_group(mb, f, l);
        for (int id : inside) {
          groups_[id].alive = false;
          for (int smp : groups_[id].samples) add_sample(gid, smp);
        }
        std::fill(rep.begin() + f, rep.begin() + f + s, gid);
      }
    }
    if (rep[0] < 0) return false;  // a micro-batch without work: this count cannot hold the batch
    auto& ids = mb_groups_[mb];
    ids.clear();
    for (int r = 0; r < n_; r += size_of(groups_[rep[r]].level)) ids.push_back(rep[r]);
  }
  crit_.assign(m_, 0.0);
  total_ = 0;
  for (int mb = 0; mb < m_; ++mb) refresh_mb(mb);
  return true;
}

void Packing::refresh_mb(int mb) {
  double c = 0;
  for (int id : mb_groups_[mb]) c = std::max(c, groups_[id].load);
  total_ += c - crit_[mb];
  crit_[mb] = c;
}

double Packing::max_load_excluding(int mb, int gid_a, int gid_b) const {
  double c = 0;
  for (int id : mb_groups_[mb])
    if (id != gid_a && id != gid_b) c = std::max(c, groups_[id].load);
  return c;
}

void Packing::rebuild_slack_lists() {
  slack_.assign(times_.levels(), {});
  for (int mb = 0; mb < m_; ++mb)
    for (int id : mb_groups_[mb]) slack_[groups_[id].level].push_back(id);
  for (auto& ids : slack_) {
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      const double sa = crit_[groups_[a].mb] - groups_[a].load, sb = crit_[groups_[b].mb] - groups_[b].load;
      return sa != sb ? sa > sb : a < b;
    });
  }
}

bool Packing::try_move_or_swap(int gid, int64_t& units, int64_t budget) {
  const Group& g = groups_[gid];
  const int a = g.mb;
  const double c_a = crit_[a];
  const double other_a = max_load_excluding(a, gid, -1);
  const double eps = kRelEps * std::abs(total_);  // abs: total_ may drift below 0 when every load is ~0
  // Best step found for this group: the largest drop of the surrogate, or, when it stays equal
  // (several groups share a micro-batch's critical path: a plateau for single steps), the largest
  // drop of the secondary objective sum over groups of size x load^2 (it evens loads out so a
  // later step can lower the critical path). Lexicographic: the surrogate never rises, and
  // every step strictly lowers (surrogate, secondary), so the search terminates.
  double best_delta = eps, best_sq = 0;
  const double sq_eps = kRelEps * total_ * total_;
  const int ka = size_of(g.level);
  auto better = [&](double delta, double sq) {
    if (delta < -eps) return delta < best_delta || best_delta >= -eps;
    if (delta > eps || best_delta < -eps) return false;
    return sq < -sq_eps && sq < best_sq;
  };
  int best_s = -1, best_b = -1, best_p = -1;
  std::vector<int> samples = g.samples;
  std::sort(samples.begin(), samples.end(), [&](int x, int y) {
    const double tx = t(x, g.level), ty = t(y, g.level);
    return tx != ty ? tx > ty : x < y;
  });
  for (int s : samples) {
    if (units >= budget) break;
    const double ts = t(s, g.level);
    const int64_t ls = batch_.lengths[s];
    for (int l = kmin_[s]; l < times_.levels(); ++l) {
      int tried = 0;
      for (int b : slack_[l]) {
        if (tried >= kTargetsPerLevel) break;
        const Group& h = groups_[b];
        if (!h.alive || h.level != l || h.mb == a) continue;
        ++tried;
        ++units;
        const double c_b = crit_[h.mb];
        const double other_b = h.load < c_b ? c_b : max_load_excluding(h.mb, b, -1);
        // Move s from g to h (g keeps at least one sample: no empty ranks).
        const int kb = size_of(l);
        if (g.samples.size() >= 2 && ls <= room(h)) {
          const double na = g.load - ts, nb = h.load + t(s, l);
          const double delta = std::max(other_a, na) - c_a + std::max(other_b, nb) - c_b;
          const double sq = ka * (na * na - g.load * g.load) + kb * (nb * nb - h.load * h.load);
          if (better(delta, sq)) {
            best_delta = delta, best_sq = sq;
            best_s = s, best_b = b, best_p = -1;
          }
        }
        // Swap s with a partner p of h that is shorter on g's level.
        int partners = 0;
        for (int p : h.samples) {
          if (partners++ >= kSwapPartners) break;
          ++units;
          if (kmin_[p] > g.level) continue;
          const int64_t lp = batch_.lengths[p];
          if (lp - ls > room(g) || ls - lp > room(h)) continue;
          const double na = g.load - ts + t(p, g.level);
          const double nb = h.load - t(p, l) + t(s, l);
          const double delta = std::max(other_a, na) - c_a + std::max(other_b, nb) - c_b;
          const double sq = ka * (na * na - g.load * g.load) + kb * (nb * nb - h.load * h.load);
          if (better(delta, sq)) {
            best_delta = delta, best_sq = sq;
            best_s = s, best_b = b, best_p = p;
          }
        }
      }
    }
    if (best_s >= 0) break;  // apply the best step for the longest sample that has one
  }
  if (best_s < 0) return false;
  Group& ga = groups_[gid];
  Group& gb = groups_[best_b];
  auto remove = [&](Group& x, int smp) {
    x.samples.erase(std::find(x.samples.begin(), x.samples.end(), smp));
    x.tokens -= batch_.lengths[smp];
    x.load = 0;  // recomputed, not decremented: no drift
    for (int q : x.samples) x.load += t(q, x.level);
  };
  remove(ga, best_s);
  add_sample(best_b, best_s);
  if (best_p >= 0) {
    remove(gb, best_p);
    add_sample(gid, best_p);
  }
  refresh_mb(ga.mb);
  refresh_mb(gb.mb);
  return true;
}

bool Packing::try_merge(int gid, int64_t& units) {
  const Group& g = groups_[gid];
  if (g.level + 1 >= times_.levels()) return false;
  const int a = g.mb;
  const int ps = size_of(g.level + 1);
  const int pf = (g.first / ps) * ps;
  std::vector<int> inside;
  double other = 0, merged = 0;
  int64_t tokens = 0;
  for (int id : mb_groups_[a]) {
    const Group& h = groups_[id];
    if (h.first >= pf && h.first < pf + ps) {
      inside.push_back(id);
      tokens += h.tokens;
      for (int s : h.samples) merged += t(s, g.level + 1);
      units += static_cast<int64_t>(h.samples.size());
    } else {
      other = std::max(other, h.load);
    }
  }
  if (tokens > cap_ * ps) return false;
  if (std::max(other, merged) >= crit_[a] - kRelEps * std::abs(total_)) return false;
  std::sort(inside.begin(), inside.end(), [&](int x, int y) { return groups_[x].first < groups_[y].first; });
  const int nid = new_group(a, pf, g.level + 1);
  for (int id : inside) {
    groups_[id].alive = false;
    for (int s : std::vector<int>(groups_[id].samples)) add_sample(nid, s);
  }
  auto& ids = mb_groups_[a];
  ids.erase(std::remove_if(ids.begin(), ids.end(), [&](int id) { return !groups_[id].alive; }), ids.end());
  ids.push_back(nid);
  refresh_mb(a);
  return true;
}

bool Packing::try_split(int gid, int64_t& units) {
  const Group& g = groups_[gid];
  if (g.level == 0) return false;
  const int cl = g.level - 1;
  const int cs = size_of(cl);
  const int children = size_of(g.level) / cs;
  if (static_cast<int>(g.samples.size()) < children) return false;
  for (int s : g.samples)
    if (kmin_[s] > cl) return false;
  std::vector<int> order = g.samples;
  std::sort(order.begin(), order.end(), [&](int x, int y) {
    const double tx = t(x, cl), ty = t(y, cl);
    return tx != ty ? tx > ty : x < y;
  });
  std::vector<double> load(children, 0.0);
  std::vector<int64_t> tokens(children, 0);
  std::vector<std::vector<int>> part(children);
  for (int s : order) {
    ++units;
    int best = -1;
    for (int c = 0; c < children; ++c) {
      if (tokens[c] + batch_.lengths[s] > cap_ * cs) continue;
      if (best < 0 || load[c] < load[best]) best = c;
    }
    if (best < 0) return false;
    part[best].push_back(s);
    load[best] += t(s, cl);
    tokens[best] += batch_.lengths[s];
  }
  double mx = 0;
  for (int c = 0; c < children; ++c) {
    if (part[c].empty()) return false;
    mx = std::max(mx, load[c]);
  }
  const int a = g.mb;
  const double other = max_load_excluding(a, gid, -1);
  if (std::max(other, mx) >= crit_[a] - kRelEps * std::abs(total_)) return false;
  const int first = g.first;
  groups_[gid].alive = false;
  auto& ids = mb_groups_[a];
  ids.erase(std::find(ids.begin(), ids.end(), gid));
  for (int c = 0; c < children; ++c) {
    const int nid = new_group(a, first + c * cs, cl);
    for (int s : part[c]) add_sample(nid, s);
    mb_groups_[a].push_back(nid);
  }
  refresh_mb(a);
  return true;
}

int64_t Packing::improve(int64_t budget) {
  int64_t units = 0;
  std::vector<int> order(m_);
  while (units < budget) {
    rebuild_slack_lists();
    units += static_cast<int64_t>(groups_.size()) / 8 + 1;  // the sort, in evaluation-sized units
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return crit_[x] > crit_[y]; });
    bool improved = false;
    for (int mb : order) {
      if (units >= budget) break;
      int gid = -1;
      for (int id : mb_groups_[mb])
        if (gid < 0 || groups_[id].load > groups_[gid].load) gid = id;
      if (gid < 0) continue;
      const double before = total_;
      if (try_move_or_swap(gid, units, budget) || try_split(gid, units) || try_merge(gid, units)) {
        // Relative slack for rounding, plus 1e-15 s absolute: when every load is ~0 (samples
        // whose marginal time a host-bound micro-batch absorbs, Megatron's example) the
        // incrementally kept total_ drifts around 0 (-6.9e-18 on a batch of that scenario) and a
        // purely relative test of an unchanged total failed. (The thresholds above use |total_|
        // for the same reason: a negative total_ made them accept zero-gain merges and splits.)
        DCP_CHECK(total_ <= before + 1e-9 * std::abs(before) + 1e-15, "dcp local search: a step raised the surrogate from ",
                  before, " to ", total_);
        improved = true;
      }
    }
    if (!improved) break;
  }
  return units;
}

plan::Plan Packing::to_plan(const plan::PlanConfig& config) const {
  plan::Plan p;
  p.planner = "dcp";
  p.config = config;
  p.microbatches.resize(m_);
  for (int mb = 0; mb < m_; ++mb) {
    std::vector<int> ids = mb_groups_[mb];
    std::sort(ids.begin(), ids.end(), [&](int x, int y) { return groups_[x].first < groups_[y].first; });
    for (int id : ids) p.microbatches[mb].groups.push_back(plan::Group{groups_[id].first, size_of(groups_[id].level), groups_[id].samples});
  }
  return p;
}

}  // namespace dcp::sched::detail

