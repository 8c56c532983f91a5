#include "train/run_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "runtime/error.h"
#include "train/checkpoint_file.h"
#include "train/trainer_state.h"

namespace graft::train {

namespace fs = std::filesystem;

namespace {

// The step of a checkpoint file name, or -1 for any other name.
int64_t step_of(const std::string& name) {
  static const std::regex re("checkpoint-([0-9]{8,})\\.safetensors");
  std::smatch m;
  return std::regex_match(name, m, re) ? std::stoll(m[1].str()) : -1;
}

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t global_step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%08lld.safetensors", static_cast<long long>(global_step));
  return (fs::path(dir) / name).string();
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of(e.path().filename().string());
    if (step >= 0) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

LoadedCheckpoint load_latest_checkpoint(const std::string& dir, std::FILE* log) {
  const std::vector<std::string> files = list_checkpoints(dir);
  GRAFT_CHECK(!files.empty(), "resume: '", dir, "' holds no checkpoint (checkpoint-<step>.safetensors)");
  LoadedCheckpoint out;
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      CheckpointContents c = read_checkpoint_file(files[i]);
      summarize_run_state(c.state);  // the state's own fields must read too
      out.path = files[i];
      out.state = RunState{std::move(c.tensors), std::move(c.state)};
      out.bytes = c.bytes;
      return out;
    } catch (const Error& e) {
      out.rejected.push_back(e.what());
      if (log) {
        if (i + 1 < files.size())
          std::fprintf(log, "graft train: %s; falling back to the previous checkpoint, %s\n", e.what(),
                       files[i + 1].c_str());
        std::fflush(log);
      }
    }
  }
  std::string all;
  for (const std::string& r : out.rejected) all += "\n  " + r;
  GRAFT_ERROR("resume: no usable checkpoint in '", dir, "':", all);
}

RunCheckpoint::RunCheckpoint(RunCheckpointOptions options) : options_(std::move(options)) {
  GRAFT_CHECK(!options_.dir.empty() && fs::is_directory(options_.dir), "RunCheckpoint: '", options_.dir,
              "' is not a directory");
  GRAFT_CHECK(options_.save_every >= 0 && options_.keep >= 1, "RunCheckpoint: save_every must be at least 0 and keep "
              "at least 1, got ", options_.save_every, " and ", options_.keep);
  if (options_.watch_signals) signals_ = std::make_unique<StopSignals>();
  if (const char* v = std::getenv("GRAFT_TEST_KILL_AT_STEP")) kill_at_step_ = std::atoll(v);
  // A .tmp left by a run killed mid-save is garbage: its checkpoint was never renamed into place.
  if (options_.write) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() > 4 && name.ends_with(".safetensors.tmp") && step_of(name.substr(0, name.size() - 4)) >= 0)
        fs::remove(e.path(), ec);
    }
  }
}

void RunCheckpoint::on_before_optimizer_step(TrainerState& s) {
  if (kill_at_step_ > 0 && s.global_step + 1 == kill_at_step_) std::raise(SIGKILL);
}

int RunCheckpoint::agreed_signal(const TrainerState& s) const {
  if (!signals_) return 0;
  const int mine = StopSignals::received();
  if (s.world == nullptr || s.world->size == 1) return mine;
  std::vector<double> seen{mine == SIGINT ? 1.0 : 0.0, mine == SIGTERM ? 1.0 : 0.0};
  s.world->sum(seen);
  return seen[0] > 0 ? SIGINT : seen[1] > 0 ? SIGTERM : 0;
}

void RunCheckpoint::on_step_end(TrainerState& s) {
  if (const int sig = agreed_signal(s)) {
    stop_signal_ = sig;
    save(s);
    s.stop = s.interrupted = true;
    if (options_.write && options_.out) {
      std::fprintf(options_.out, "graft train: stopped by %s after step %lld; resume with --resume %s\n",
                   sig == SIGINT ? "SIGINT" : "SIGTERM", static_cast<long long>(s.global_step),
                   options_.dir.c_str());
      std::fflush(options_.out);
    }
    return;
  }
  if (s.interrupted) return save(s);  // another callback cut the run short: keep its place
  if (options_.save_every > 0 && s.global_step % options_.save_every == 0 && s.step != s.steps_per_epoch) save(s);
}

void RunCheckpoint::on_epoch_end(TrainerState& s) { save(s); }

void RunCheckpoint::save(TrainerState& s) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = checkpoint_path(options_.dir, s.global_step);
  try {
    RunState state = capture_run_state(s, options_.job, options_.save_every);  // every rank: a collective
    if (!options_.write) return;
    last_bytes_ = write_checkpoint_file(path, state.tensors, state.state);
  } catch (const Error& e) {
    if (options_.err) {
      std::fprintf(options_.err, "graft train: checkpoint after step %lld not saved: %s; training goes on\n",
                   static_cast<long long>(s.global_step), e.what());
      std::fflush(options_.err);
    }
    return;
  }
  last_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++saves_;
  if (options_.out) {
    std::fprintf(options_.out, "checkpoint: %s (%.2f MiB, %.0f ms)\n", path.c_str(), mib(last_bytes_), last_ms_);
    std::fflush(options_.out);
  }
  const std::vector<std::string> files = list_checkpoints(options_.dir);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(options_.keep); i < files.size(); ++i) fs::remove(files[i], ec);
}

}  // namespace graft::train
