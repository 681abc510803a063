// See conform.h.
#include "harness/conform.h"

#include "core/error.h"
#include "core/json_io.h"
#include "harness/subprocess.h"
#include "plan/plan_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

namespace dcp::harness {

using nlohmann::json;
using plan::conformance::Case;
using plan::conformance::Outcome;

namespace {

Outcome bad(std::string why) {
  Outcome o;
  o.kind = Outcome::kBadOutput;
  o.message = std::move(why);
  return o;
}

// json::parse after the linear check of core/json_io.h: a nesting limit (a hostile answer of a
// million '[') and each key once per object; syntax errors throw json::exception.
json parse_limited(const std::string& text, int max_depth) {
  check_json_text(text, "answer", max_depth);
  return json::parse(text);
}

std::string shorten(std::string s, size_t n = 200) {
  for (char& ch : s)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (s.size() > n) s = s.substr(0, n) + "...";
  return s;
}

}  // namespace

json conform_input_json(const Case& c) {
  json j;
  j["schema"] = "dcpbench.conform.input.v1";
  j["name"] = c.name;
  j["seqlens"] = c.batch.lengths;
  j["dp"] = c.config.dp;
  j["cp"] = c.config.cp;
  j["max_seqlen_per_dp_cp_rank"] = c.config.max_seqlen_per_rank;
  j["min_cp"] = c.config.min_cp;
  j["vpp_group"] = c.config.vpp_group ? json(*c.config.vpp_group) : json(nullptr);
  return j;
}

Outcome read_plan_answer(const json& a) {
  Outcome o;
  if (a.is_object()) {
    if (!a.contains("microbatches")) return bad("the answer is an object without \"microbatches\" (not dcpbench.plan.v1)");
    try {
      o.plan = plan::plan_from_json(a);
    } catch (const InputError& e) {
      return bad(e.what());
    }
    // plan_from_json keeps each group's first rank and cp_size: its "ranks" must say the same.
    for (size_t m = 0; m < o.plan->microbatches.size(); ++m) {
      const auto& groups = a["microbatches"][m]["groups"];
      for (size_t g = 0; g < groups.size(); ++g) {
        const json& ranks = groups[g]["ranks"];
        const plan::Group& gr = o.plan->microbatches[m].groups[g];
        bool ok = ranks.is_array() && static_cast<int64_t>(ranks.size()) == gr.cp_size;
        for (size_t i = 0; ok && i < ranks.size(); ++i)
          ok = ranks[i].is_number_integer() && ranks[i].get<int64_t>() == gr.first_rank + static_cast<int64_t>(i);
        if (!ok)
          return bad(detail::concat("micro-batch ", m, " group ", g, ": \"ranks\" ", shorten(ranks.dump(), 60),
                                    " are not the ", gr.cp_size, " consecutive ranks from ", gr.first_rank,
                                    " that its cp_size says"));
      }
    }
    o.kind = Outcome::kPlan;
    return o;
  }
  if (!a.is_array()) return bad("the answer is neither a list of micro-batches nor a dcpbench.plan.v1 object");
  plan::RankLists lists;
  for (size_t m = 0; m < a.size(); ++m) {
    if (!a[m].is_array()) return bad(detail::concat("micro-batch ", m, " is not a list of rank lists"));
    std::vector<std::vector<int>> ranks;
    for (size_t r = 0; r < a[m].size(); ++r) {
      if (!a[m][r].is_array()) return bad(detail::concat("micro-batch ", m, " rank ", r, " is not a list of sample ids"));
      std::vector<int> ids;
      for (const auto& v : a[m][r]) {
        if (!v.is_number_integer() || v.get<int64_t>() < std::numeric_limits<int>::min() ||
            v.get<int64_t>() > std::numeric_limits<int>::max() ||
            (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max())))
          return bad(detail::concat("micro-batch ", m, " rank ", r, " holds ", shorten(v.dump()),
                                    ", not an integer sample id"));
        ids.push_back(v.get<int>());
      }
      ranks.push_back(std::move(ids));
    }
    lists.push_back(std::move(ranks));
  }
  o.kind = Outcome::kPlan;
  o.lists = std::move(lists);
  return o;
}

Outcome run_builtin(const plan::Planner& planner, const Case& c, double timeout_s, bool* leaked) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Outcome outcome;
  };
  auto shared = std::make_shared<Shared>();
  auto batch = std::make_shared<plan::Batch>(c.batch);
  const plan::PlanConfig config = c.config;
  std::thread worker([shared, batch, config, &planner] {
    Outcome o;
    try {
      o.plan = planner.plan(*batch, config);
      o.kind = Outcome::kPlan;
    } catch (const InputError& e) {
      o.kind = Outcome::kError;
      o.message = e.what();
    } catch (const std::exception& e) {
      o.kind = Outcome::kCrash;
      o.message = std::string("internal error: ") + e.what();
    }
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->outcome = std::move(o);
    shared->done = true;
    shared->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(shared->mu);
  const bool finished =
      shared->cv.wait_for(lock, std::chrono::duration<double>(timeout_s), [&] { return shared->done; });
  if (!finished) {
    lock.unlock();
    worker.detach();  // the planner object outlives it: the caller ends the process with _Exit
    *leaked = true;
    Outcome o;
    o.kind = Outcome::kTimeout;
    o.message = detail::concat("no answer within ", timeout_s, " s");
    return o;
  }
  lock.unlock();
  worker.join();
  return std::move(shared->outcome);
}

Outcome run_external(const std::string& command, const Case& c, double timeout_s) {
  const ProcessResult r = run_shell(command, conform_input_json(c).dump() + "\n", timeout_s);
  Outcome o;
  if (r.timed_out) {
    o.kind = Outcome::kTimeout;
    o.message = detail::concat("no answer within ", timeout_s, " s (process group killed)");
    return o;
  }
  if (r.truncated) return bad("more than 64 MiB of output (process group killed)");
  if (!r.exited) {
    o.kind = Outcome::kCrash;
    o.message = detail::concat("killed by signal ", r.term_signal, " (", strsignal(r.term_signal), ")");
    return o;
  }
  // The command runs under /bin/sh -c, which does not exec it: a scheduler killed by a signal
  // (a segfault, the kernel's OOM killer) shows as the shell's exit status 128 + the signal and
  // one line of its own ("Segmentation fault", "Killed"), which must not read as a clean error.
  if (r.exit_code > 128 && r.exit_code <= 128 + 64) {
    const int sig = r.exit_code - 128;
    o.kind = Outcome::kCrash;
    o.message = detail::concat("exit status ", r.exit_code, ": the shell reports it killed by signal ", sig, " (",
                               strsignal(sig), ")");
    return o;
  }
  if (r.exit_code != 0) {
    std::string err = r.err;
    while (!err.empty() && (err.back() == '\n' || err.back() == '\r' || err.back() == ' ')) err.pop_back();
    const size_t lines = err.empty() ? 0 : 1 + std::count(err.begin(), err.end(), '\n');
    if (lines == 1) {
      o.kind = Outcome::kError;
      // Its head and tail only: the reason is printed as one line of ~300 characters anyway, and
      // escaping a 64 MiB line first had taken gigabytes (helper-78).
      o.message = err.size() <= 4096 ? err : err.substr(0, 2048) + " [...] " + err.substr(err.size() - 2048);
      return o;
    }
    o.kind = Outcome::kCrash;
    const size_t last = err.rfind('\n');
    o.message = detail::concat("exit status ", r.exit_code, " with ", lines, " lines on stderr (not one error line)",
                               lines ? ": " + shorten(last == std::string::npos ? err : err.substr(last + 1)) : "");
    return o;
  }
  json answer;
  try {
    answer = parse_limited(r.out, 16);
  } catch (const InputError& e) {
    return bad(std::string("stdout: ") + e.what());
  } catch (const json::exception& e) {
    return bad("stdout is not one JSON value: " + shorten(e.what()) +
               (r.out.empty() ? " (stdout is empty)" : " (stdout begins: " + shorten(r.out, 60) + ")"));
  }
  o = read_plan_answer(answer);
  // A plan.v1 answer's "pool" and "summary" are held to its plan as `dcpbench check` holds a plan
  // file's (one that contradicted itself passed here and failed there; helper-77's trial).
  // (summary_violation refuses sample ids past the batch before it recomputes anything: such an id
  // had read out of bounds, a segfault, helper-78. Not only for a plan valid under its own config:
  // judge() validates it under the case's, so a false summary would have passed there, helper-79.)
  if (o.kind == Outcome::kPlan && o.plan && answer.is_object())
    if (auto v = plan::summary_violation(answer, *o.plan, c.batch))
      return bad("the dcpbench.plan.v1 answer contradicts its plan: " + *v);
  return o;
}

}  // namespace dcp::harness
