// The fixed-width results table printed by `dcpbench run` (units in a second header row, as
// nccl-tests does). Reads only a ResultsFile and its aggregates (harness/aggregate.h), so the
// table of a committed results file can be reprinted without re-running anything.
//
// One block per scenario: a row per strategy as the scenario sets it ("published" setting) and,
// after `run --tune`, a row per strategy at its tuned setting ("tuned", with its knobs); speedups
// are against the scenario's reference strategy in the same setting. Then our numbers beside the
// published ones (absolute and speedups, with the hardware we assume), and the sensitivity
// section when the file has one. The "how obtained" line is derived from the rows' sources.
#pragma once

#include "harness/aggregate.h"
#include "harness/results.h"

#include <ostream>

namespace dcp::harness {

// Prints the table: one block per scenario, a line saying how the numbers were obtained, and the
// published numbers (from results.scenarios[*].published) beside ours, each with its source.
void print_table(std::ostream& os, const ResultsFile& results);

// The "planning off the step" section (report_planning.cpp): per scenario, strategy and setting,
// the measured planning time per step, the part hidden behind the previous step (modelled against
// its simulated step time) and the exposed part. Nothing when no row carries planning fields.
void print_planning_summary(std::ostream& os, const ResultsFile& results);

}  // namespace dcp::harness
