// ObjectReader walks one JSON object of an input file (scenario, converge scenario): every get_*
// marks its key as used and checks type and range; finish() rejects the keys nobody asked for.
// Every message has the shape
//   <file>: "<dotted.key>"=<value as JSON> <what is wrong>
// and is thrown as dcp::InputError (exit 2 at the CLI).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/json_io.h"
#include "core/text.h"

namespace dcp::harness {

using nlohmann::json;

// A JSON value for an error message: a bounded excerpt of about 80 characters (core/json_io.h),
// never a dump of the whole (possibly huge) value.
inline std::string show(const json& v) { return json_excerpt(v, 80); }

class ObjectReader {
 public:
  ObjectReader(const json& obj, const std::string& file, std::string prefix)
      : obj_(obj), file_(show_path(file)), raw_file_(file), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const json& value, const std::string& what) const {
    throw InputError(file_ + ": \"" + path(key) + "\"=" + show(value) + " " + what);
  }
  [[noreturn]] void fail_missing(const std::string& key) const {
    // A misspelt required key would otherwise read as missing, its typo unnamed until finish()
    // (new-user trial, helper-73): name the key of the object, not yet asked for, closest to it
    // when it is at most |key| / 4 edits away, case aside ("global_batchh", "Cluster"). The bound
    // keeps real keys of one object from reading as each other's typos: "max" is two edits from a
    // missing "mean", "cp" one from a missing "dp" (helper-74); no two keys the readers ask for in
    // one object are that close.
    std::string near;
    size_t best = key.size() / 4 + 1;
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (used_.count(it.key())) continue;
      const size_t d = key_distance(it.key(), key, best);
      if (d < best) {
        best = d;
        near = it.key();
      }
    }
    throw InputError(file_ + ": \"" + path(key) + "\" is missing (required)" +
                     (near.empty() ? "" : "; the object has " + quote(near, 80) + ": a typo?"));
  }
  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  const std::string& file() const { return raw_file_; }  // as given (to resolve relative paths)

  bool has(const std::string& key) const { return obj_.contains(key); }

  const json* find(const std::string& key, bool required) {
    used_.insert(key);
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) fail_missing(key);
      return nullptr;
    }
    return &*it;
  }

  std::optional<std::string> get_string(const std::string& key, bool required,
                                        const std::vector<std::string>& allowed = {}) {
    const json* v = find(key, required);
    if (!v) return std::nullopt;
    if (!v->is_string()) fail(key, *v, "is not a string");
    std::string s = v->get<std::string>();
    if (required && s.empty()) fail(key, *v, "is empty");
    if (!allowed.empty()) {
      bool ok = false;
      std::string list;
      for (const auto& a : allowed) {
        ok = ok || a == s;
        list += (list.empty() ? "" : ", ") + a;
      }
      if (!ok) fail(key, *v, "is not one of: " + list);
    }
    return s;
  }

  std::optional<int64_t> get_int(const std::string& key, bool required, int64_t lo, int64_t hi) {
    const json* v = find(key, required);
    if (!v) return std::nullopt;
    if (const std::string why = json_int_problem(*v, lo, hi); !why.empty()) fail(key, *v, why);
    return v->get<int64_t>();
  }

  std::optional<double> get_number(const std::string& key, bool required, double lo, double hi) {
    const json* v = find(key, required);
    if (!v) return std::nullopt;
    if (!v->is_number()) fail(key, *v, "is not a number");
    const double x = v->get<double>();
    if (!(x >= lo)) fail(key, *v, "is below the minimum " + show(json(lo)));
    if (!(x <= hi)) fail(key, *v, "is above the maximum " + show(json(hi)));
    return x;
  }

  // A number in (0, hi]: 0 and negatives both "must be > 0" (a negative one had read "is below the
  // minimum 0.0", as if 0 were allowed; helper-47).
  std::optional<double> get_positive(const std::string& key, bool required, double hi) {
    const std::optional<double> x = get_number(key, required, -std::numeric_limits<double>::infinity(), hi);
    if (x && !(*x > 0)) fail(key, *find(key, false), "must be > 0");
    return x;
  }

  std::optional<bool> get_bool(const std::string& key, bool required) {
    const json* v = find(key, required);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(key, *v, "is not true or false");
    return v->get<bool>();
  }

  const json* get_object(const std::string& key, bool required) {
    const json* v = find(key, required);
    if (v && !v->is_object()) fail(key, *v, "is not an object");
    return v;
  }

  const json* get_array(const std::string& key, bool required) {
    const json* v = find(key, required);
    if (v && !v->is_array()) fail(key, *v, "is not an array");
    if (v && required && v->empty()) fail(key, *v, "is empty");
    return v;
  }

  void finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (!used_.count(it.key())) {
        throw InputError(file_ + ": " + quote(path(it.key()), 80) + "=" + show(it.value()) +
                         " is not a known key (see scenarios/SCHEMA.md)");
      }
    }
  }

  ObjectReader child(const json& obj, const std::string& key) const { return ObjectReader(obj, raw_file_, path(key)); }

  // Edit distance (insert, delete, replace) between `a` and `b`, ignoring ASCII case, or `cap` when
  // it is at least `cap`: the typo test of fail_missing. Keys are short; one DP row, O(|a| |b|).
  static size_t key_distance(const std::string& a, const std::string& b, size_t cap) {
    if (a.size() >= b.size() + cap || b.size() >= a.size() + cap) return cap;
    const auto lower = [](char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c); };
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
        diag = up;
      }
    }
    return std::min(row[b.size()], cap);
  }

 private:
  const json& obj_;
  std::string file_;      // for messages (escaped, shortened: core/files.h show_path)
  std::string raw_file_;  // as given
  std::string prefix_;
  std::set<std::string> used_;
};

// Another dcpbench file given where a scenario is read (a results file, a conformance case, a plan):
// those carry a string "schema" and no scenario does, so say what the file is instead of its first
// missing key (helper-73). `what`: the kind of scenario expected ("run scenario", ...).
inline void refuse_other_dcpbench_file(const json& j, const std::string& file, const std::string& what) {
  if (auto it = j.find("schema"); it != j.end() && it->is_string())
    throw InputError(show_path(file) + ": is a " + quote(it->get<std::string>(), 60) + " file, not a " + what +
                     " (scenarios/SCHEMA.md)");
}

// Which kind of scenario a JSON object is, by the keys only that kind has (scenarios/SCHEMA.md): a
// run scenario's "cluster" / "dataset", a convergence scenario's "pool" / "data"; the first such key
// found, or nullopt where it has neither kind's keys or both. The one test the run and convergence
// readers and the results reader use to say what a wrong file is.
struct ScenarioMark {
  bool run = false;  // true: a run scenario; false: a convergence scenario
  std::string key;   // the key that says so
};
inline std::optional<ScenarioMark> scenario_mark(const json& j) {
  if (!j.is_object()) return std::nullopt;
  const auto first_of = [&j](const char* a, const char* b) -> std::string {
    return j.contains(a) ? a : j.contains(b) ? b : "";
  };
  const std::string run = first_of("cluster", "dataset"), convergence = first_of("pool", "data");
  if (run.empty() == convergence.empty()) return std::nullopt;
  return run.empty() ? ScenarioMark{false, convergence} : ScenarioMark{true, run};
}

// A path written in `file` (relative to that file's folder unless absolute).
inline std::string resolve_path(const std::string& file, const std::string& rel) {
  namespace fs = std::filesystem;
  fs::path p(rel);
  if (p.is_absolute()) return rel;
  const fs::path base = fs::path(file).parent_path();
  return (base / p).lexically_normal().string();
}

}  // namespace dcp::harness
