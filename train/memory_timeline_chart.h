#pragma once
// Draws memory timelines: bytes allocated over one training step (forward, then backward), one
// line per mode on one chart, with the op that was running at each line's peak.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/memory_log.h"

namespace graft::train {

struct TimelineSeries {
  std::string label;  // "plain", "checkpoint sqrt", "budget 16 MiB"
  std::vector<MemoryEvent> events;
  int64_t budget_bytes = -1;  // >= 0: drawn as a dashed line in the series' colour (its budget)
};

// Runs `step` (one forward + backward) under the allocation log of `device`: one series. If `step`
// throws, the log is stopped before the error goes on.
TimelineSeries record_timeline(const std::string& label, Device device, const std::function<void()>& step);

// The x axis is each series' own time as a fraction of its step (steps of different lengths line
// up: forward left, backward right); the y axis is MiB above the step's start.
void write_memory_timeline(const std::string& path, const std::vector<TimelineSeries>& series);

}  // namespace graft::train
