// Times the probes of a calibration plan (cost/calibrate.h) on this machine's GPU (issue 10:
// `dcpbench calibrate --backend cuda`): one layer's forward GEMMs (cuBLASLt) at every token count
// of the curve, the tensor-core attention (forward causal, forward without mask, backward
// without mask) at every (q, k) of the grid over plan.batch_of(q, k) sequences with the model's
// heads, and one device-to-device copy of plan.copy_bytes. CUDA events after one untimed run,
// the median of `reps`; inputs a constant finite 16-bit value. Only built with CUDA.
#pragma once

#include "attn/bf16_rule.h"
#include "cost/calibrate.h"

namespace dcp::exec {

cost::CalibrationMeasurements measure_calibration(const cost::CalibrationPlan& plan, attn::Half half, int reps);

}  // namespace dcp::exec
