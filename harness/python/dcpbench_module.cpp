// The Python module `dcpbench` (pybind11): dcpbench's planners for Megatron's Python users, as a
// drop-in for DefaultDynamicCPScheduler.get_groups_and_subsamples (docs/megatron.md).
//
//   dcpbench.schedule(seqlens, planner="megatron-dev", *, dp, cp, max_seqlen_per_dp_cp_rank,
//                     min_cp=1, vpp_group=None, max_seqlen=None) -> list
//       Megatron's own format: per micro-batch, per rank (N = dp*cp), the list of sample ids
//       (sample i has length seqlens[i]); every rank gets its own list object. Megatron schedules
//       lengths padded to a multiple of 2*dp*cp (sft_dataset.py _calculate_padding_divisor): pass
//       those to reproduce its plan; nothing is padded here (docs/megatron.md).
//   dcpbench.plan(...same arguments...) -> dcpbench.Plan (groups, summary, solve_ms, to_json())
//   dcpbench.find_violation(plan, seqlens, *, dp=None, cp=None, max_seqlen_per_dp_cp_rank=None,
//                           min_cp=None, vpp_group=None, max_seqlen=None) -> str | None
//   dcpbench.validate(...same...) -> None, or raises dcpbench.InvalidPlanError (a ValueError)
//   dcpbench.planners() -> list of the registry's planner names
// `plan` in find_violation/validate is a dcpbench.Plan, a dcpbench.plan.v1 dict (json.load of a
// `dcpbench schedule` file; its summary must agree with it, as in `dcpbench check`), or a plan in
// Megatron's format (then dp, cp and max_seqlen_per_dp_cp_rank are required; read as static CP
// when every group has cp ranks and no dynamic group of that size exists, else as dynamic).
// Bounds: seqlens at most 2^18 items (len() checked before any is read; read once, into a
// snapshot); a result in Megatron's format at most 2^24 rank lists and 2^26 ids (megatron_lists).
//
// Errors: bad input raises ValueError with the one line `dcpbench schedule` prints for the same
// options, naming the CLI's flags (--max-seqlen-per-rank for max_seqlen_per_dp_cp_rank; a bad
// length names the sample, not a file) (dcp::InputError), an argument of the wrong type (a plan, micro-batch, rank list, length
// or option that is not a sequence or integer) TypeError; an internal error raises RuntimeError. The GIL is released while the
// planner runs, so other Python threads (a data loader) keep running.
#include "core/checked_int.h"
#include "core/error.h"
#include "core/text.h"
#include "harness/conform.h"
#include "harness/registry.h"
#include "plan/plan_json.h"
#include "plan/planner.h"
#include "plan/validate.h"

#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace py = pybind11;

namespace dcp::python {

namespace {

[[noreturn]] void value_error(const std::string& msg) { throw py::value_error(msg); }

// An int's decimal text for a message, cut at 40 characters (2**4000 is 1205 digits); "?" where
// Python will not convert it (above sys.get_int_max_str_digits(), 4300 by default).
std::string int_text(PyObject* index, bool cut = true) {
  PyObject* s = PyObject_Str(index);
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  const char* c = PyUnicode_AsUTF8(s);
  std::string out = c ? c : "?";
  if (!c) PyErr_Clear();
  Py_DECREF(s);
  return cut && out.size() > 40 ? out.substr(0, 37) + "..." : out;
}

struct FlagRange {
  int64_t lo, hi;
};

// A Python int (or an object with __index__, e.g. numpy.int64) as int64; ValueError naming `what`
// and the value when it does not fit (helper-75's trial: "--cp is out of range" gave neither), in
// the CLI's words for a flag (`range`: "--dp: \"2^70's digits\" is out of range (allowed: 1 to N)").
int64_t to_int64(PyObject* obj, const std::string& what, std::optional<FlagRange> range = std::nullopt) {
  // bool is an int subclass in Python: True would pass as a length or size of 1. numpy's bool
  // scalar is no int subclass but has __index__ (deprecated since numpy 1.25): the same.
  const std::string_view type = Py_TYPE(obj)->tp_name;
  if (PyBool_Check(obj) || type == "numpy.bool_" || type == "numpy.bool")
    throw py::type_error(what + " must be an integer, not " + std::string(PyBool_Check(obj) ? "bool" : type));
  PyObject* index = PyNumber_Index(obj);
  if (!index) {
    PyErr_Clear();
    throw py::type_error(what + " must be an integer, not " + std::string(Py_TYPE(obj)->tp_name));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
  const std::string shown = overflow != 0 ? int_text(index, !range) : std::string();
  Py_DECREF(index);
  if (overflow != 0 && range)
    value_error(what + ": " + quote(shown) + " is out of range (allowed: " + std::to_string(range->lo) + " to " +
                std::to_string(range->hi) + ")");
  if (overflow != 0) value_error(what + "=" + shown + " is out of range (beyond a 64-bit integer)");
  return v;
}

std::vector<int64_t> to_lengths(const py::handle& seqlens) {
  // Iterables that are not a list of lengths: a dict or set would give its keys (a set in no
  // fixed order, so sample ids would not be positions), bytes and str their characters.
  PyObject* o = seqlens.ptr();
  const auto not_lengths = [o] {
    // A single integer (also a 0-d numpy array, which has __index__ but no iterator) is no batch.
    return py::type_error(std::string("seqlens must be an iterable of integers (list, tuple, range, array or "
                                      "generator), not ") +
                          (PyIndex_Check(o) ? "a single integer (" + std::string(Py_TYPE(o)->tp_name) + ")"
                                            : std::string(Py_TYPE(o)->tp_name)));
  };
  if (PyDict_Check(o) || PyAnySet_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyUnicode_Check(o))
    throw not_lengths();
  // The sample limit before anything is converted: a list, tuple, range or array knows its size
  // (range(10**8) had been turned into 10^8 ints, 4.7 GB and 18 s, before check_config refused it).
  const Py_ssize_t size = PyObject_Size(o);
  if (size < 0) PyErr_Clear();  // an iterable without len(): counted while read, below
  if (size > plan::kMaxBatchSamples)
    value_error("the batch has " + std::to_string(size) + " samples, more than the limit of " +
                std::to_string(plan::kMaxBatchSamples) + " per global batch");
  // A snapshot of the items (owned references) before any is converted: an item's __index__ runs
  // Python code, which could resize the caller's list under a borrowed item array (a segfault,
  // helper-48's review). Read through the iterator, at most the limit + 1 items, so an endless
  // generator is refused too.
  PyObject* it = PyObject_GetIter(o);
  if (!it) {
    PyErr_Clear();
    throw not_lengths();
  }
  const auto iter = py::reinterpret_steal<py::object>(it);
  std::vector<py::object> items;
  if (size > 0) items.reserve(static_cast<size_t>(size));
  while (PyObject* item = PyIter_Next(it)) {
    items.push_back(py::reinterpret_steal<py::object>(item));
    if (static_cast<int64_t>(items.size()) > plan::kMaxBatchSamples)
      value_error("seqlens has more than " + std::to_string(plan::kMaxBatchSamples) +
                  " samples, the limit per global batch");
  }
  if (PyErr_Occurred()) throw py::error_already_set();
  std::vector<int64_t> out(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* item = items[i].ptr();
    int overflow = 0;
    long long v = 0;
    if (PyLong_CheckExact(item)) {
      v = PyLong_AsLongLongAndOverflow(item, &overflow);
      if (overflow != 0)
        value_error("sample " + std::to_string(i) + " has length " + int_text(item) +
                    (overflow > 0 ? ", above the limit of " + std::to_string(plan::kMaxTokensPerRank) + " tokens per sample"
                                  : std::string(" (must be >= 1)")));
    } else {
      v = to_int64(item, "sample " + std::to_string(i) + "'s length");
    }
    out[i] = v;
  }
  return out;
}

// "Type: message" of a Python error on one line (error_already_set::what() appends the traceback,
// which had come out inside ValueError messages).
std::string one_line(const py::error_already_set& e) {
  std::string msg = py::str(e.value());
  if (const size_t nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  const std::string type = py::str(e.type().attr("__name__"));
  return msg.empty() ? type : type + ": " + msg;
}

struct ConfigArgs {
  py::object dp, cp, max_seqlen_per_dp_cp_rank, min_cp, vpp_group, max_seqlen;
};

// The range check of the CLI's integer flags (harness/cli_options.h add_int_option), with the
// same message, so a bad value gives the line `dcpbench schedule` prints.
int64_t in_range(PyObject* obj, int64_t lo, int64_t hi, const std::string& flag) {
  const int64_t v = to_int64(obj, flag, FlagRange{lo, hi});
  if (const auto e = int_error(std::to_string(v), lo, hi)) value_error(flag + ": " + *e);
  return v;
}

// The CLI's flag names and ranges in messages, so they are the lines `dcpbench schedule` prints.
plan::PlanConfig to_config(const ConfigArgs& a) {
  plan::PlanConfig c;
  c.dp = static_cast<int>(in_range(a.dp.ptr(), 1, plan::kMaxPool, "--dp"));
  c.cp = static_cast<int>(in_range(a.cp.ptr(), 1, plan::kMaxPool, "--cp"));
  c.max_seqlen_per_rank =
      in_range(a.max_seqlen_per_dp_cp_rank.ptr(), 1, plan::kMaxTokensPerRank, "--max-seqlen-per-rank");
  if (!a.min_cp.is_none())
    c.min_cp = static_cast<int>(in_range(a.min_cp.ptr(), 1, plan::kMaxPool, "--min-cp"));
  if (!a.vpp_group.is_none())
    c.vpp_group = static_cast<int>(in_range(a.vpp_group.ptr(), 1, plan::kMaxPool, "--vpp-group"));
  if (!a.max_seqlen.is_none())
    c.max_seqlen = in_range(a.max_seqlen.ptr(), 1, plan::kMaxTokensPerRank, "--max-seqlen");
  return c;
}

// Megatron's format from a plan: a fresh list per rank (no aliasing between ranks, unlike
// PR2000's `[[]] * N`, reference §7c); sample id objects are shared (ints are immutable).
// Bounded: every rank list is a Python object (~88 B with its slot in the micro-batch's list) and
// every entry a pointer (8 B), so the limits below keep the result under ~2 GB. The C++ limit of
// samples x ranks (2^27) alone had let 128 samples on 2^20 ranks ask for ~11.5 GB of lists
// (helper-48's review); Plan.microbatches holds one object per group instead.
inline constexpr int64_t kMaxRankLists = int64_t{1} << 24;
inline constexpr int64_t kMaxRankListEntries = int64_t{1} << 26;

py::list megatron_lists(const plan::Plan& p, int64_t samples) {
  const int n = p.config.pool();
  const int64_t lists = static_cast<int64_t>(p.microbatches.size()) * n;
  int64_t entries = 0;
  for (const auto& mb : p.microbatches)
    for (const auto& g : mb.groups) entries += static_cast<int64_t>(g.cp_size) * static_cast<int64_t>(g.samples.size());
  if (lists > kMaxRankLists || entries > kMaxRankListEntries)
    value_error("the plan in Megatron's format would hold " + std::to_string(lists) + " rank lists (" +
                std::to_string(p.microbatches.size()) + " micro-batches x " + std::to_string(n) + " ranks) and " +
                std::to_string(entries) + " sample ids, more than the limits of " + std::to_string(kMaxRankLists) +
                " and " + std::to_string(kMaxRankListEntries) +
                " (~2 GB of Python objects); dcpbench.plan() and Plan.microbatches give one object per group");
  std::vector<py::object> ids(static_cast<size_t>(samples));
  auto id = [&](int s) -> PyObject* {
    py::object& o = ids[static_cast<size_t>(s)];
    if (!o) o = py::reinterpret_steal<py::object>(PyLong_FromLong(s));
    return o.ptr();
  };
  py::list out(p.microbatches.size());
  for (size_t m = 0; m < p.microbatches.size(); ++m) {
    PyObject* ranks = PyList_New(n);
    if (!ranks) throw py::error_already_set();
    for (const auto& g : p.microbatches[m].groups) {
      for (int r = g.first_rank; r < g.first_rank + g.cp_size; ++r) {
        PyObject* lst = PyList_New(static_cast<Py_ssize_t>(g.samples.size()));
        if (!lst) {
          Py_DECREF(ranks);
          throw py::error_already_set();
        }
        for (size_t i = 0; i < g.samples.size(); ++i) {
          PyObject* o = id(g.samples[i]);
          Py_INCREF(o);
          PyList_SET_ITEM(lst, static_cast<Py_ssize_t>(i), o);
        }
        PyList_SET_ITEM(ranks, r, lst);
      }
    }
    PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(m), ranks);
  }
  return out;
}

// A plan made by a planner, with what the plan JSON's summary needs.
struct PyPlan {
  plan::Plan plan;
  plan::Batch batch;
  double solve_ms = 0;

  nlohmann::json json() const {
    nlohmann::json extra;
    extra["solve_ms"] = solve_ms;
    return plan::plan_to_json(plan, batch, extra);
  }
};

std::shared_ptr<PyPlan> make_plan(const py::handle& seqlens, const std::string& planner_name, const ConfigArgs& args) {
  auto out = std::make_shared<PyPlan>();
  const auto& registry = harness::builtin_planners();
  std::unique_ptr<plan::Planner> planner = registry.make(planner_name);  // InputError: unknown planner
  plan::PlanConfig cfg = to_config(args);
  // As `dcpbench schedule`: a static planner's groups are --cp ranks, so a min_cp above 1 would be
  // recorded in the plan and ignored (the default 1 is every planner's).
  if (cfg.min_cp > 1 && !planner->dynamic())
    value_error("--min-cp " + std::to_string(cfg.min_cp) + ": planner '" + planner_name +
                "' is static (every group has --cp ranks); --min-cp applies to dynamic planners");
  out->batch.lengths = to_lengths(seqlens);
  plan::check_config(out->batch, cfg);
  {
    py::gil_scoped_release release;  // the planner touches no Python object
    const auto t0 = std::chrono::steady_clock::now();
    out->plan = planner->plan(out->batch, cfg);
    const auto t1 = std::chrono::steady_clock::now();
    out->solve_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    plan::validate(out->plan, out->batch, cfg);  // a planner bug is a RuntimeError, never a bad plan
  }
  return out;
}

plan::RankLists to_rank_lists(const py::handle& obj) {
  // A value of the wrong type is a TypeError, as Python's own functions raise (a number as the plan
  // was a ValueError, stop 45); a list of the wrong shape stays a ValueError.
  if (!PyList_Check(obj.ptr()) && !PyTuple_Check(obj.ptr()))
    throw py::type_error(std::string("plan must be a dcpbench.Plan, a dcpbench.plan.v1 dict or a list of micro-batches "
                                     "(per rank, the sample ids), not ") +
                         Py_TYPE(obj.ptr())->tp_name);
  plan::RankLists out;
  size_t m = 0;
  for (const py::handle mb : obj) {
    if (!PyList_Check(mb.ptr()) && !PyTuple_Check(mb.ptr()))
      throw py::type_error("plan micro-batch " + std::to_string(m) + " must be a list of rank lists, not " +
                           Py_TYPE(mb.ptr())->tp_name);
    std::vector<std::vector<int>> ranks;
    size_t r = 0;
    for (const py::handle ids : mb) {
      if (!PyList_Check(ids.ptr()) && !PyTuple_Check(ids.ptr()))
        throw py::type_error("plan micro-batch " + std::to_string(m) + " rank " + std::to_string(r) +
                             " must be a list of sample ids, not " + Py_TYPE(ids.ptr())->tp_name);
      std::vector<int> v;
      for (const py::handle s : ids) {
        const int64_t x = to_int64(s.ptr(), "a sample id of micro-batch " + std::to_string(m) + " rank " + std::to_string(r));
        if (x < INT_MIN || x > INT_MAX) value_error("sample id " + std::to_string(x) + " is out of range");
        v.push_back(static_cast<int>(x));
      }
      ranks.push_back(std::move(v));
      ++r;
    }
    out.push_back(std::move(ranks));
    ++m;
  }
  return out;
}

// A plan with its own config (a dcpbench.Plan, or a dcpbench.plan.v1 dict as `dcpbench schedule`
// writes it) checked against that config, the arguments given overriding it (as `dcpbench check`
// does).
// records_max_seqlen false: a plan.v1 document without "max_seqlen" (plan_json.h: written only for
// a plan made with one); it is checked against the value asked for, never refused for not carrying
// one (as `dcpbench check` does).
std::optional<std::string> violation_of_own(const plan::Plan& p, const plan::Batch& batch, const ConfigArgs& a,
                                            bool records_max_seqlen = true) {
  plan::PlanConfig cfg = p.config;
  ConfigArgs full = a;
  if (a.dp.is_none()) full.dp = py::int_(cfg.dp);
  if (a.cp.is_none()) full.cp = py::int_(cfg.cp);
  if (a.max_seqlen_per_dp_cp_rank.is_none()) full.max_seqlen_per_dp_cp_rank = py::int_(cfg.max_seqlen_per_rank);
  const plan::PlanConfig given = to_config(full);
  cfg.dp = given.dp;
  cfg.cp = given.cp;
  cfg.max_seqlen_per_rank = given.max_seqlen_per_rank;
  if (!a.min_cp.is_none()) cfg.min_cp = given.min_cp;
  if (!a.vpp_group.is_none()) cfg.vpp_group = given.vpp_group;
  if (!a.max_seqlen.is_none()) cfg.max_seqlen = given.max_seqlen;
  // A sample longer than the plan's own max_seqlen (no max_seqlen argument given): the plan does
  // not fit the batch, a violation as `dcpbench check` reports it, not a ValueError naming
  // --max-seqlen.
  if (records_max_seqlen && a.max_seqlen.is_none())
    if (auto v = plan::longer_than_plan_max_seqlen(p, batch)) return v;
  plan::check_config(batch, cfg);
  if (records_max_seqlen) return plan::find_violation(p, batch, cfg);
  plan::Plan as_asked = p;
  as_asked.config.max_seqlen = cfg.max_seqlen;
  return plan::find_violation(as_asked, batch, cfg);
}

// The first violation of `plan` (a Plan, a plan.v1 dict or Megatron's format) for `seqlens` and the
// config.
std::optional<std::string> violation_of(const py::object& plan_obj, const py::handle& seqlens, const ConfigArgs& a) {
  plan::Batch batch{to_lengths(seqlens)};
  if (py::isinstance<PyPlan>(plan_obj)) return violation_of_own(plan_obj.cast<const PyPlan&>().plan, batch, a);
  if (PyDict_Check(plan_obj.ptr())) {
    // A dcpbench.plan.v1 document (e.g. json.load of a `dcpbench schedule --out` file): read as
    // `dcpbench check` reads it (a malformed one is a ValueError naming what is wrong), then its
    // summary must agree with its plan.
    // Through Python's json (numpy integers by operator.index, as the list path takes them); what
    // it cannot write (a set, NaN, a cycle) is a ValueError naming the problem, like any bad plan.
    nlohmann::json j;
    try {
      const py::object text = py::module_::import("json").attr("dumps")(
          plan_obj, py::arg("allow_nan") = false, py::arg("default") = py::module_::import("operator").attr("index"));
      j = nlohmann::json::parse(text.cast<std::string>());
    } catch (py::error_already_set& e) {
      value_error("plan dict: cannot be read as JSON (" + one_line(e) + ")");
    } catch (const nlohmann::json::exception& e) {
      value_error(std::string("plan dict: ") + e.what());
    }
    const plan::conformance::Outcome answer = dcp::harness::read_plan_answer(j);
    if (answer.kind != plan::conformance::Outcome::kPlan || !answer.plan)
      value_error("plan dict: " + answer.message);
    // A plan.v1 dict records max_seqlen only where it was made with one (plan_from_json read the key
    // into the config, as for `dcpbench check`).
    if (auto v = violation_of_own(*answer.plan, batch, a, answer.plan->config.max_seqlen.has_value())) return v;
    return plan::summary_violation(j, *answer.plan, batch);
  }
  const plan::RankLists lists = to_rank_lists(plan_obj);  // a plan of the wrong type first (TypeError)
  if (a.dp.is_none() || a.cp.is_none() || a.max_seqlen_per_dp_cp_rank.is_none())
    value_error("dp, cp and max_seqlen_per_dp_cp_rank are required for a plan in Megatron's format");
  const plan::PlanConfig cfg = to_config(a);
  plan::check_config(batch, cfg);
  if (auto v = plan::rank_lists_violation(lists, cfg.pool())) return v;
  // Static or dynamic as the format allows (plan::plan_from_megatron_format, shared with `check`).
  return plan::find_violation(plan::plan_from_megatron_format(lists, cfg), batch, cfg);
}

py::object json_to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

}  // namespace

}  // namespace dcp::python

PYBIND11_MODULE(dcpbench, m) {
  using namespace dcp::python;
  namespace plan = dcp::plan;
  m.doc() =
      "dcpbench: Megatron-exact Dynamic-CP schedulers (and dcpbench's own) for Python. "
      "schedule() returns the plan in Megatron's format (per micro-batch, per rank, the sample ids), "
      "as DefaultDynamicCPScheduler.get_groups_and_subsamples does.";
  m.attr("__version__") = "0.1";

  struct InvalidPlanTag {};
  static py::exception<InvalidPlanTag> invalid_plan(m, "InvalidPlanError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const dcp::InputError& e) {
      // The CLI's line (dcp::one_line: control bytes escaped, at most 300 characters): a long or
      // odd message had reached Python raw (helper-60's review).
      PyErr_SetString(PyExc_ValueError, dcp::one_line(e.what()).c_str());
    } catch (const dcp::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, dcp::one_line(e.what()).c_str());
    }
  });

  py::class_<plan::Group>(m, "Group", "One CP group of a micro-batch: ranks [first_rank, first_rank + cp_size)")
      .def_readonly("first_rank", &plan::Group::first_rank)
      .def_readonly("cp_size", &plan::Group::cp_size)
      .def_property_readonly("ranks", [](const plan::Group& g) {
        std::vector<int> r;
        for (int i = g.first_rank; i <= g.last_rank(); ++i) r.push_back(i);
        return r;
      })
      .def_readonly("samples", &plan::Group::samples, "sample ids in pack order")
      .def("__repr__", [](const plan::Group& g) {
        return "Group(ranks=" + std::to_string(g.first_rank) + ".." + std::to_string(g.last_rank()) +
               ", cp_size=" + std::to_string(g.cp_size) + ", samples=" + std::to_string(g.samples.size()) + ")";
      });

  py::class_<PyPlan, std::shared_ptr<PyPlan>>(m, "Plan", "A plan: micro-batches of CP groups, with its summary")
      .def_property_readonly("planner", [](const PyPlan& p) { return p.plan.planner; })
      .def_property_readonly("dp", [](const PyPlan& p) { return p.plan.config.dp; })
      .def_property_readonly("cp", [](const PyPlan& p) { return p.plan.config.cp; })
      .def_property_readonly("pool", [](const PyPlan& p) { return p.plan.config.pool(); })
      .def_property_readonly("max_seqlen_per_dp_cp_rank", [](const PyPlan& p) { return p.plan.config.max_seqlen_per_rank; })
      .def_property_readonly("min_cp", [](const PyPlan& p) { return p.plan.config.min_cp; })
      .def_property_readonly("vpp_group", [](const PyPlan& p) { return p.plan.config.vpp_group; })
      .def_property_readonly("dynamic", [](const PyPlan& p) { return p.plan.dynamic; })
      .def_property_readonly("solve_ms", [](const PyPlan& p) { return p.solve_ms; },
                             "milliseconds the planner took (C++, measured around the solve)")
      .def_property_readonly("microbatches",
                             [](const PyPlan& p) {
                               std::vector<std::vector<plan::Group>> out;
                               for (const auto& mb : p.plan.microbatches) out.push_back(mb.groups);
                               return out;
                             })
      .def_property_readonly("summary", [](const PyPlan& p) { return json_to_python(p.json()["summary"]); },
                             "the plan JSON's summary (dcpbench schedule): solve_ms, micro-batch count, workload, "
                             "tokens per rank, CP-size histogram")
      .def("groups", [](const PyPlan& p) { return megatron_lists(p.plan, p.batch.size()); },
           "Megatron's format: per micro-batch, per rank, the list of sample ids")
      .def("to_json", [](const PyPlan& p) { return p.json().dump(1); }, "the plan JSON (dcpbench.plan.v1)")
      .def("__len__", [](const PyPlan& p) { return p.plan.microbatches.size(); })
      .def("__repr__", [](const PyPlan& p) {
        return "Plan(planner='" + p.plan.planner + "', microbatches=" + std::to_string(p.plan.microbatches.size()) +
               ", pool=" + std::to_string(p.plan.config.pool()) + ", samples=" + std::to_string(p.batch.size()) + ")";
      });

  m.def(
      "schedule",
      [](const py::object& seqlens, const std::string& planner, const py::object& dp, const py::object& cp,
         const py::object& max_seqlen_per_dp_cp_rank, const py::object& min_cp, const py::object& vpp_group,
         const py::object& max_seqlen) {
        auto p = make_plan(seqlens, planner, ConfigArgs{dp, cp, max_seqlen_per_dp_cp_rank, min_cp, vpp_group, max_seqlen});
        return megatron_lists(p->plan, p->batch.size());
      },
      py::arg("seqlens"), py::arg("planner") = "megatron-dev", py::kw_only(), py::arg("dp"), py::arg("cp"),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("min_cp") = 1, py::arg("vpp_group") = py::none(),
      py::arg("max_seqlen") = py::none(),
      "Plan one global batch; returns Megatron's format: per micro-batch, per rank (dp*cp), the sample ids.\n"
      "seqlens are planned as given: Megatron schedules lengths padded to a multiple of 2*dp*cp, so pad\n"
      "them first to reproduce its plan. Errors name the CLI's flags (--max-seqlen-per-rank for\n"
      "max_seqlen_per_dp_cp_rank, --min-cp, --vpp-group, --max-seqlen, --dp, --cp).");
  m.def(
      "plan",
      [](const py::object& seqlens, const std::string& planner, const py::object& dp, const py::object& cp,
         const py::object& max_seqlen_per_dp_cp_rank, const py::object& min_cp, const py::object& vpp_group,
         const py::object& max_seqlen) {
        return make_plan(seqlens, planner, ConfigArgs{dp, cp, max_seqlen_per_dp_cp_rank, min_cp, vpp_group, max_seqlen});
      },
      py::arg("seqlens"), py::arg("planner") = "megatron-dev", py::kw_only(), py::arg("dp"), py::arg("cp"),
      py::arg("max_seqlen_per_dp_cp_rank"), py::arg("min_cp") = 1, py::arg("vpp_group") = py::none(),
      py::arg("max_seqlen") = py::none(),
      "Plan one global batch; returns a dcpbench.Plan (seqlens as in schedule(): planned as given).");
  m.def(
      "find_violation",
      [](const py::object& plan_obj, const py::object& seqlens, const py::object& dp, const py::object& cp,
         const py::object& max_seqlen_per_dp_cp_rank, const py::object& min_cp, const py::object& vpp_group,
         const py::object& max_seqlen) {
        return violation_of(plan_obj, seqlens, ConfigArgs{dp, cp, max_seqlen_per_dp_cp_rank, min_cp, vpp_group, max_seqlen});
      },
      py::arg("plan"), py::arg("seqlens"), py::kw_only(), py::arg("dp") = py::none(), py::arg("cp") = py::none(),
      py::arg("max_seqlen_per_dp_cp_rank") = py::none(), py::arg("min_cp") = py::none(),
      py::arg("vpp_group") = py::none(), py::arg("max_seqlen") = py::none(),
      "The first violation of the validity rules, or None if the plan is valid.");
  m.def(
      "validate",
      [](const py::object& plan_obj, const py::object& seqlens, const py::object& dp, const py::object& cp,
         const py::object& max_seqlen_per_dp_cp_rank, const py::object& min_cp, const py::object& vpp_group,
         const py::object& max_seqlen) {
        if (auto v = violation_of(plan_obj, seqlens, ConfigArgs{dp, cp, max_seqlen_per_dp_cp_rank, min_cp, vpp_group, max_seqlen})) {
          PyErr_SetString(invalid_plan.ptr(), v->c_str());
          throw py::error_already_set();
        }
      },
      py::arg("plan"), py::arg("seqlens"), py::kw_only(), py::arg("dp") = py::none(), py::arg("cp") = py::none(),
      py::arg("max_seqlen_per_dp_cp_rank") = py::none(), py::arg("min_cp") = py::none(),
      py::arg("vpp_group") = py::none(), py::arg("max_seqlen") = py::none(),
      "Raises dcpbench.InvalidPlanError (a ValueError) with the first violation.");
  m.def("planners", [] { return dcp::harness::builtin_planners().names(); }, "Names of every built-in planner.");
}
