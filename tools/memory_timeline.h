#pragma once
// Draws memory timelines: bytes allocated over one training step (forward, then backward), one
// line per mode on one chart, with the op that was running at each line's peak.
#include <string>
#include <vector>

#include "runtime/memory_log.h"

namespace graft::tools {

struct TimelineSeries {
  std::string label;  // "plain", "checkpoint sqrt", "budget 16 MiB"
  std::vector<MemoryEvent> events;
};

// The x axis is each series' own time as a fraction of its step (steps of different lengths line
// up: forward left, backward right); the y axis is MiB above the step's start.
void write_memory_timeline(const std::string& path, const std::vector<TimelineSeries>& series);

}  // namespace graft::tools
