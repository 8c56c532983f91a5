#include "train/run_state.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "runtime/generator.h"
#include "train/trainer_callback.h"

namespace graft::train {

namespace {

using nlohmann::json;

// Invariant 2.
json exact(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double exact_double(const json& j, const std::string& what) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string t = j.get<std::string>();
    if (t == "nan") return std::nan("");
    if (t == "inf") return INFINITY;
    if (t == "-inf") return -INFINITY;
  }
  GRAFT_ERROR("run state: '", what, "' is not a number: ", j.dump());
}

json numbers(const std::map<std::string, double>& values) {
  json out = json::object();
  for (const auto& [k, v] : values) out[k] = exact(v);
  return out;
}

std::map<std::string, double> numbers_from(const json& j, const std::string& what) {
  GRAFT_CHECK(j.is_object(), "run state: '", what, "' is not an object");
  std::map<std::string, double> out;
  for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = exact_double(*it, what + "." + it.key());
  return out;
}

json flags_json(const Recipe::Flags& flags) {
  json out = json::array();
  for (const auto& [flag, text] : flags) out.push_back({flag, text});
  return out;
}

Recipe::Flags flags_from(const json& j) {
  Recipe::Flags out;
  for (const json& pair : j) out.emplace_back(pair.at(0).get<std::string>(), pair.at(1).get<std::string>());
  return out;
}

json rng_json(const RngState& r) { return {{"seed", r.seed}, {"offset", r.offset}}; }

const json& field(const json& j, const char* key) {
  GRAFT_CHECK(j.contains(key), "run state: no '", key, "'");
  return j.at(key);
}

json parse(const std::string& state) {
  try {
    json j = json::parse(state);
    GRAFT_CHECK(j.is_object(), "run state: not a JSON object");
    return j;
  } catch (const json::exception& e) {
    GRAFT_ERROR("run state: not valid JSON: ", e.what());
  }
}

}  // namespace

RunState capture_run_state(const TrainerState& s, const Recipe::Flags& job, int64_t save_every) {
  GRAFT_CHECK(s.model && s.optimizer && s.loader && s.world && s.recipe, "capture_run_state: the Trainer is not built");
  RunState out;
  json j;
  j["recipe"] = flags_json(s.recipe->to_flags());
  j["job"] = flags_json(job);
  j["save_every"] = save_every;
  j["world_size"] = s.world->size;
  j["progress"] = {{"epoch", s.epoch},
                   {"step", s.step},
                   {"global_step", s.global_step},
                   {"epochs_done", s.epochs_done},
                   {"epoch_over", s.epoch_over},
                   {"steps_per_epoch", s.steps_per_epoch}};

  // Invariant 3: each rank's own figures land in its slot of lists summed over the ranks (adding
  // zeros keeps each exact): its loader position and its part of the epoch's running loss.
  const auto n = static_cast<size_t>(s.world->size), r = static_cast<size_t>(s.world->rank);
  std::vector<double> mine(3 * n, 0.0);
  mine[r] = static_cast<double>(s.loader->position());
  mine[n + r] = s.epoch_loss_sum;
  mine[2 * n + r] = static_cast<double>(s.epoch_samples);
  s.world->sum(mine);
  json pos = json::array(), sums = json::array(), samples = json::array();
  for (size_t i = 0; i < n; ++i) {
    pos.push_back(static_cast<int64_t>(mine[i]));
    sums.push_back(exact(mine[n + i]));
    samples.push_back(static_cast<int64_t>(mine[2 * n + i]));
  }
  j["progress"]["epoch_loss_sums"] = sums;
  j["progress"]["epoch_samples"] = samples;
  // The time this epoch's steps took so far: a resumed epoch's clock continues from it, so its
  // samples/s and epoch time count only training, not the gap between the kill and the resume.
  j["progress"]["epoch_seconds"] = s.epoch_seconds;
  j["loader"] = {{"epoch", s.loader->epoch()}, {"positions", pos}};

  j["rng"]["cpu"] = rng_json(default_generator(kCPU).get_state());
  if (s.device.is_cuda()) j["rng"][s.device.str()] = rng_json(default_generator(s.device).get_state());

  for (const auto& [name, t] : s.model->state_dict()) out.tensors["model/" + name] = t;
  optim::OptimizerState opt = s.optimizer->state_dict();
  j["optimizer"] = {{"kind", opt.kind}, {"values", numbers(opt.values)}};
  for (auto& [key, t] : opt.tensors) out.tensors["optimizer/" + key] = std::move(t);
  j["scheduler"] = s.scheduler ? numbers(s.scheduler->state_dict()) : json(nullptr);
  j["scaler"] = s.scaler ? numbers(s.scaler->state_dict()) : json(nullptr);

  j["callbacks"] = json::object();
  if (s.callbacks)
    for (const auto& c : *s.callbacks)
      if (const std::string key = c->state_key(); !key.empty()) j["callbacks"][key] = c->save_state();
  out.state = j.dump();
  return out;
}

RunStateSummary summarize_run_state(const std::string& state) {
  const json j = parse(state);
  RunStateSummary r;
  try {
    r.recipe = flags_from(field(j, "recipe"));
    r.job = flags_from(field(j, "job"));
    r.world_size = field(j, "world_size").get<int>();
    r.save_every = field(j, "save_every").get<int64_t>();
    const json& p = field(j, "progress");
    r.epoch = p.at("epoch").get<int64_t>();
    r.step = p.at("step").get<int64_t>();
    r.global_step = p.at("global_step").get<int64_t>();
    r.steps_per_epoch = p.at("steps_per_epoch").get<int64_t>();
    r.epoch_over = p.at("epoch_over").get<bool>();
  } catch (const json::exception& e) {
    GRAFT_ERROR("run state: a field has the wrong type: ", e.what());
  }
  return r;
}

void restore_run_state(const RunState& r, TrainerState& s) {
  GRAFT_CHECK(s.model && s.optimizer && s.loader && s.world, "restore_run_state: the Trainer is not built");
  const json j = parse(r.state);
  const RunStateSummary sum = summarize_run_state(r.state);
  GRAFT_CHECK(sum.world_size == s.world->size, "resume: the run was saved by ", sum.world_size,
              " process(es) and this job has ", s.world->size,
              "; a resumed run keeps its world size (each rank's data position is its own)");
  try {
    const json& loader = field(j, "loader");
    const int64_t position = loader.at("positions").at(static_cast<size_t>(s.world->rank)).get<int64_t>();
    const int64_t loader_epoch = loader.at("epoch").get<int64_t>();
    const json& p = field(j, "progress");

    // The parts that check themselves before they change anything go first.
    nn::StateDict model;
    optim::OptimizerState opt{field(j, "optimizer").at("kind").get<std::string>(),
                              numbers_from(field(j, "optimizer").at("values"), "optimizer"), {}};
    for (const auto& [key, t] : r.tensors) {
      if (key.rfind("model/", 0) == 0) model.insert(key.substr(6), t);
      else if (key.rfind("optimizer/", 0) == 0) opt.tensors[key.substr(10)] = t;
      else GRAFT_ERROR("run state: unexpected tensor '", key, "'");
    }
    const json& sched = field(j, "scheduler");
    const json& scaler = field(j, "scaler");
    GRAFT_CHECK(sched.is_null() == (s.scheduler == nullptr), "resume: the run ",
                sched.is_null() ? "had no" : "had a", " learning-rate schedule and this trainer ",
                s.scheduler ? "has one" : "has none");
    GRAFT_CHECK(scaler.is_null() == (s.scaler == nullptr), "resume: the run ", scaler.is_null() ? "had no" : "had a",
                " GradScaler and this trainer ", s.scaler ? "has one" : "has none");
    s.model->load_state_dict(model, /*strict=*/true);
    s.optimizer->load_state_dict(opt);
    if (s.scheduler) s.scheduler->load_state_dict(numbers_from(sched, "scheduler"));
    if (s.scaler) s.scaler->load_state_dict(numbers_from(scaler, "scaler"));
    s.loader->seek(loader_epoch, position);

    const json& rng = field(j, "rng");
    for (auto it = rng.begin(); it != rng.end(); ++it) {
      const Device d(it.key());
      if (d.is_cuda() && d != s.device) continue;  // a device this run does not use
      default_generator(d).set_state({it->at("seed").get<uint64_t>(), it->at("offset").get<uint64_t>()});
    }

    s.epoch = sum.epoch;
    s.step = sum.step;
    s.global_step = sum.global_step;
    s.epochs_done = p.at("epochs_done").get<int64_t>();
    s.epoch_over = sum.epoch_over;
    s.steps_per_epoch = sum.steps_per_epoch;
    const auto rank = static_cast<size_t>(s.world->rank);
    s.epoch_loss_sum = exact_double(p.at("epoch_loss_sums").at(rank), "progress.epoch_loss_sums");
    s.epoch_samples = p.at("epoch_samples").at(rank).get<int64_t>();
    s.epoch_seconds = p.value("epoch_seconds", 0.0);
    s.resumed = true;

    const json& cbs = field(j, "callbacks");
    if (s.callbacks)
      for (const auto& c : *s.callbacks)
        if (const std::string key = c->state_key(); !key.empty() && cbs.contains(key))
          c->load_state(cbs.at(key).get<std::string>());
  } catch (const json::exception& e) {
    GRAFT_ERROR("run state: a field is missing or has the wrong type: ", e.what());
  }
}

namespace {

std::string flag_value(const Recipe::Flags& flags, const std::string& flag) {
  for (const auto& [f, t] : flags)
    if (f == flag) return t;
  return {};
}

}  // namespace

Recipe resume_recipe(const RunStateSummary& run, const Recipe::Flags& given, std::vector<std::string>* changes) {
  const Recipe saved = Recipe::make(run.recipe);
  const Recipe::Flags saved_flags = saved.to_flags();
  Recipe out = saved;
  std::string conflicts;
  for (const auto& [flag, text] : given) {
    Recipe probe = saved;
    probe.set(flag, text);  // a bad text is refused here, named
    if (flag == "--epochs") {
      if (probe.epochs != saved.epochs && changes)
        changes->push_back("--epochs " + std::to_string(probe.epochs) + " (the run was started with " +
                           std::to_string(saved.epochs) + ")");
      out.epochs = probe.epochs;
      continue;
    }
    const std::string want = flag_value(probe.to_flags(), flag), have = flag_value(saved_flags, flag);
    if (want != have)
      conflicts += std::string(conflicts.empty() ? "" : ", ") + flag + " " + text + " (the run has " +
                   (have.empty() ? std::string("it unset") : have) + ")";
  }
  GRAFT_CHECK(conflicts.empty(), "--resume: these flags differ from the run's recipe: ", conflicts,
              ". Drop them (a resumed run keeps its recipe; only --epochs may change) or start a new run");
  out.validate();
  return out;
}

}  // namespace graft::train
