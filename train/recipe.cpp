#include "train/recipe.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "data/fashion_mnist.h"
#include "runtime/error.h"

namespace graft::train {

std::string_view name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

std::string_view name(Schedule schedule) {
  switch (schedule) {
    case Schedule::None: return "none";
    case Schedule::Cosine: return "cosine";
    case Schedule::Step: return "step";
  }
  return "?";
}

std::string_view name(Checkpointing mode) {
  switch (mode) {
    case Checkpointing::None: return "none";
    case Checkpointing::Sqrt: return "sqrt";
    case Checkpointing::Nested: return "nested";
  }
  return "?";
}

std::string_view name(Precision precision) {
  switch (precision) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

DType autocast_dtype(Precision precision) {
  GRAFT_CHECK(precision != Precision::Fp32, "train: fp32 precision runs without autocast");
  return precision == Precision::Bf16 ? kBFloat16 : kFloat16;
}

namespace {

// The defaults of each model before any flag: graft train's recipes, in one place. (The one
// default that follows other fields is in make().)
Recipe model_defaults(models::Kind kind) {
  Recipe r;
  r.model = kind;
  if (kind == models::Kind::Vit) {  // AdamW with decoupled decay, as ViT recipes train
    r.optimizer = OptimizerKind::AdamW;
    r.lr = 2e-3;
    r.weight_decay = 0.05;
  }
  if (kind == models::Kind::Gpt) {  // nanoGPT's baby GPT on characters
    r.iters = 2000;
    r.eval_every = 500;
    r.batch_size = 12;
    r.optimizer = OptimizerKind::AdamW;
    r.lr = 1e-3;
    r.weight_decay = 0.1;
    r.betas = {0.9, 0.99};
    r.warmup_iters = 100;
    r.min_lr = 1e-4;
    r.grad_clip = 1.0;
  }
  return r;
}

template <class E>
E parse_enum(const std::string& text, std::initializer_list<E> values) {
  std::vector<std::string_view> names;
  for (E v : values) names.push_back(name(v));
  return *(values.begin() + parse_choice(text, names));
}

std::vector<std::string_view> model_names() {
  std::vector<std::string_view> names;
  for (models::Kind k : models::all_kinds()) names.push_back(models::kind_name(k));
  return names;
}

std::pair<double, double> parse_betas(const std::string& text) {
  const auto comma = text.find(',');
  if (comma == std::string::npos) GRAFT_ERROR("expected two numbers in [0, 1) as B1,B2, got ", text);
  const double b1 = parse_number(text.substr(0, comma), 0, false), b2 = parse_number(text.substr(comma + 1), 0, false);
  if (b1 >= 1 || b2 >= 1) GRAFT_ERROR("expected two numbers in [0, 1) as B1,B2, got ", text);
  return {b1, b2};
}

// As --help and the banner print numbers: 4 significant digits, a tiny value as 0.
std::string number_text(double v) {
  std::ostringstream os;
  os << std::setprecision(4) << (std::abs(v) < 1e-12 ? 0.0 : v);
  return os.str();
}

struct FieldDef {
  const char* flag;
  const char* negation;   // a switch's off flag, or nullptr
  const char* type_name;  // nullptr for a switch
  const char* help;
  void (*set)(Recipe&, const std::string&);
  std::string (*show)(const Recipe&);  // the value in words, for the defaults --help lists
  const char* default_note;            // replaces the listed defaults where one needs a condition
};

const std::vector<FieldDef>& defs() {
  using R = Recipe;
  using S = const std::string&;
  static const std::vector<FieldDef> d{
      {"--model", nullptr, "{mlp,cnn,vit}",
       "mlp (784-256-10), cnn (conv32-pool-conv64-pool-fc128-fc10) or vit (patch 7, dim 64, depth 6, 4 heads, MLP "
       "128, CLS, pre-norm); the flags not given take that model's defaults",
       [](R& r, S t) { r.model = models::all_kinds()[parse_choice(t, model_names())]; },
       [](const R& r) { return std::string(models::kind_name(r.model)); }, "default mlp"},
      {"--epochs", nullptr, "INT", "Epochs, a whole number of at least 1",
       [](R& r, S t) { r.epochs = parse_whole_number(t, 1); }, [](const R& r) { return std::to_string(r.epochs); },
       nullptr},
      {"--batch-size", nullptr, "INT", "Batch size, a whole number of at least 1; data-parallel, the global batch",
       [](R& r, S t) { r.batch_size = parse_whole_number(t, 1); },
       [](const R& r) { return std::to_string(r.batch_size); }, nullptr},
      {"--lr", nullptr, "FLOAT", "Learning rate, a number above 0", [](R& r, S t) { r.lr = parse_number(t, 0, true); },
       [](const R& r) { return number_text(r.lr); }, nullptr},
      {"--optimizer", nullptr, "{sgd,adam,adamw}", "sgd (momentum 0.9), adam or adamw",
       [](R& r, S t) { r.optimizer = parse_enum(t, {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW}); },
       [](const R& r) { return std::string(name(r.optimizer)); }, nullptr},
      {"--weight-decay", nullptr, "FLOAT",
       "Weight decay, a number of at least 0; unset, the optimizer's own: 0, or 0.01 for adamw",
       [](R& r, S t) { r.weight_decay = parse_number(t, 0, false); },
       [](const R& r) { return r.weight_decay ? number_text(*r.weight_decay) : std::string("unset"); }, nullptr},
      {"--schedule", nullptr, "{none,cosine,step}",
       "Learning-rate schedule per step: none, cosine (to 0 over the run) or step (x0.1 each epoch)",
       [](R& r, S t) { r.schedule = parse_enum(t, {Schedule::None, Schedule::Cosine, Schedule::Step}); },
       [](const R& r) { return std::string(name(r.schedule)); }, nullptr},
      {"--warmup-epochs", nullptr, "INT",
       "Epochs of linear learning-rate warmup before the cosine schedule, a whole number of at least 0 and "
       "fewer than --epochs",
       [](R& r, S t) { r.warmup_epochs = parse_whole_number(t, 0); },
       [](const R& r) { return std::to_string(r.warmup_epochs); },
       "default 0; 1 for vit when it trains more than one epoch on the cosine schedule"},
      {"--normalize", "--no-normalize", nullptr,
       "Standardise pixels with the training set's mean and std (0.2860, 0.3530)",
       [](R& r, S t) { r.normalize = parse_switch(t); },
       [](const R& r) { return std::string(r.normalize ? "on" : "off"); }, nullptr},
      {"--device", nullptr, "TEXT", "cpu, cuda or cuda:N",
       [](R& r, S t) {
         try {
           r.device = Device(t);
         } catch (const Error&) {
           GRAFT_ERROR("expected cpu, cuda or cuda:N, got ", t);
         }
       },
       [](const R& r) { return r.device.str(); }, nullptr},
      {"--checkpoint", nullptr, "{none,sqrt,nested}",
       "Activation checkpointing of the model's stages: none, sqrt (sqrt(N) segments) or nested (recursive halving)",
       [](R& r, S t) {
         r.checkpoint = parse_enum(t, {Checkpointing::None, Checkpointing::Sqrt, Checkpointing::Nested});
       },
       [](const R& r) { return std::string(name(r.checkpoint)); }, nullptr},
      {"--memory-budget", nullptr, "SIZE",
       "Activation memory budget per step, a size such as 16MiB (B, KiB, MiB, GiB): an automatic checkpoint plan "
       "fits it, instead of --checkpoint",
       [](R& r, S t) { r.memory_budget = parse_byte_size(t); },
       [](const R& r) { return r.memory_budget ? r.memory_budget->text : std::string("unset"); }, nullptr},
      {"--save-on-cpu", nullptr, nullptr, "Keep saved activations on the CPU (SaveOnCpu)",
       [](R& r, S t) { r.save_on_cpu = parse_switch(t); },
       [](const R& r) { return std::string(r.save_on_cpu ? "on" : "off"); }, nullptr},
      {"--compress", nullptr, "{none,bf16,int8,auto}",
       "Saved activations in fewer bits: bf16, or int8 with a scale per channel, for the ops that tolerate it, "
       "and 1-bit masks for relu (exact); parameters and softmax outputs are never compressed. With "
       "--memory-budget the plan compresses only the layers it needs to, and auto lets it pick the codec per layer",
       [](R& r, S t) {
         r.compress_auto = t == "auto";
         r.compress = r.compress_auto ? autograd::SavedCodec::kNone : autograd::parse_saved_codec(t);
       },
       [](const R& r) { return r.compress_auto ? std::string("auto") : std::string(autograd::codec_name(r.compress)); },
       nullptr},
      {"--precision", nullptr, "{fp32,bf16,fp16}",
       "Arithmetic of the forward and the loss: fp32, or autocast to bf16 or fp16 (fp16 adds a GradScaler); "
       "parameters, optimizer state and saved weights stay float32",
       [](R& r, S t) { r.precision = parse_enum(t, {Precision::Fp32, Precision::Bf16, Precision::Fp16}); },
       [](const R& r) { return std::string(name(r.precision)); }, nullptr},
      {"--dropout", nullptr, "FLOAT", "Dropout probability of the vit's and gpt's dropout layers, a number in [0, 1)",
       [](R& r, S t) {
         r.dropout = parse_number(t, 0, false);
         if (r.dropout >= 1) GRAFT_ERROR("expected a number in [0, 1), got ", t);
       },
       [](const R& r) { return number_text(r.dropout); }, nullptr},
      {"--iters", nullptr, "INT",
       "gpt: training iterations (batches of random windows of the text), a whole number of at least 1",
       [](R& r, S t) { r.iters = parse_whole_number(t, 1); }, [](const R& r) { return std::to_string(r.iters); },
       "default 2000 for gpt; the image models train in --epochs"},
      {"--eval-every", nullptr, "INT",
       "gpt: the validation loss every N iterations and at the end, a whole number of at least 0 (0: at the end "
       "only)",
       [](R& r, S t) { r.eval_every = parse_whole_number(t, 0); },
       [](const R& r) { return std::to_string(r.eval_every); }, "default 500 for gpt"},
      {"--warmup-iters", nullptr, "INT",
       "gpt: iterations of linear learning-rate warmup (from lr/N) before the cosine schedule, a whole number of at "
       "least 0 and fewer than --iters",
       [](R& r, S t) { r.warmup_iters = parse_whole_number(t, 0); },
       [](const R& r) { return std::to_string(r.warmup_iters); },
       "default 100 for gpt: 5% of --iters on the cosine schedule"},
      {"--min-lr", nullptr, "FLOAT", "The cosine schedule's final learning rate, a number of at least 0 below --lr",
       [](R& r, S t) { r.min_lr = parse_number(t, 0, false); }, [](const R& r) { return number_text(r.min_lr); },
       nullptr},
      {"--betas", nullptr, "B1,B2", "adam and adamw: the moment decay rates, two numbers in [0, 1)",
       [](R& r, S t) { r.betas = parse_betas(t); },
       [](const R& r) { return number_text(r.betas.first) + "," + number_text(r.betas.second); }, nullptr},
      {"--grad-clip", nullptr, "FLOAT",
       "Clip the gradients' total 2-norm to this before each step (clip_grad_norm_), a number of at least 0; 0 is "
       "off",
       [](R& r, S t) { r.grad_clip = parse_number(t, 0, false); },
       [](const R& r) { return number_text(r.grad_clip); }, nullptr},
      {"--seed", nullptr, "UINT", "Random seed (model initialisation, shuffling), a whole number of at least 0",
       [](R& r, S t) { r.seed = parse_unsigned(t); }, [](const R& r) { return std::to_string(r.seed); }, nullptr},
  };
  return d;
}

const FieldDef& def(const std::string& flag) {
  for (const FieldDef& f : defs())
    if (flag == f.flag) return f;
  std::vector<std::string_view> flags;
  for (const FieldDef& f : defs()) flags.push_back(f.flag);
  GRAFT_ERROR("train: the recipe has no field ", flag, " (its fields: ", words_list(flags), ")");
}

// "default 0.001 for mlp and cnn, 0.002 for vit", from each model's defaults.
std::string defaults_text(const FieldDef& f) {
  if (f.default_note) return f.default_note;
  std::vector<std::pair<std::string, std::vector<std::string_view>>> groups;  // value, models
  for (models::Kind k : models::all_kinds()) {
    std::string v = f.show(Recipe::defaults(k));
    auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == v; });
    if (g == groups.end()) g = groups.insert(groups.end(), {v, {}});
    g->second.push_back(models::kind_name(k));
  }
  if (groups.size() == 1) return "default " + groups[0].first;
  std::string s = "default ";
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string who = words_list(groups[i].second);
    if (auto o = who.rfind(" or "); o != std::string::npos) who.replace(o, 4, " and ");
    s += (i ? ", " : "") + groups[i].first + " for " + who;
  }
  return s;
}

}  // namespace

Recipe Recipe::defaults(models::Kind model) { return make({{"--model", std::string(models::kind_name(model))}}); }

Recipe Recipe::make(const Flags& given) {
  models::Kind kind = models::Kind::Mlp;
  bool warmup_given = false, warmup_iters_given = false;
  for (const auto& [flag, text] : given) {
    if (flag == "--model") {
      Recipe probe;
      probe.set(flag, text);
      kind = probe.model;
    }
    warmup_given = warmup_given || flag == "--warmup-epochs";
    warmup_iters_given = warmup_iters_given || flag == "--warmup-iters";
  }
  Recipe r = model_defaults(kind);
  for (const auto& [flag, text] : given) r.set(flag, text);
  // vit warms up for one epoch, when there is an epoch of cosine schedule left after it.
  if (kind == models::Kind::Vit && !warmup_given && r.schedule == Schedule::Cosine)
    r.warmup_epochs = r.epochs > 1 ? 1 : 0;
  // gpt warms up for 5% of its iterations (nanoGPT's 100 of 2000), so --iters alone stays valid.
  if (kind == models::Kind::Gpt && !warmup_iters_given && r.schedule == Schedule::Cosine) r.warmup_iters = r.iters / 20;
  if (kind == models::Kind::Gpt && !warmup_iters_given && r.schedule != Schedule::Cosine) r.warmup_iters = 0;
  r.validate();
  return r;
}

void Recipe::set(const std::string& flag, const std::string& text) {
  const FieldDef& f = def(flag);
  try {
    f.set(*this, text);
  } catch (const Error& e) {
    GRAFT_ERROR(flag, ": ", e.what());
  }
}

std::string Recipe::check(const std::string& flag, const std::string& text) {
  Recipe scratch;
  try {
    def(flag).set(scratch, text);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

void Recipe::validate() const {
  GRAFT_CHECK(epochs >= 1, "train: --epochs must be at least 1, got ", epochs);
  GRAFT_CHECK(batch_size >= 1, "train: --batch-size must be at least 1, got ", batch_size);
  GRAFT_CHECK(lr > 0 && std::isfinite(lr), "train: --lr must be a number above 0, got ", lr);
  GRAFT_CHECK(!weight_decay || (*weight_decay >= 0 && std::isfinite(*weight_decay)),
              "train: --weight-decay must be a number of at least 0, got ", weight_decay.value_or(0));
  GRAFT_CHECK(warmup_epochs >= 0, "train: --warmup-epochs must be at least 0, got ", warmup_epochs);
  GRAFT_CHECK(!memory_budget || memory_budget->bytes > 0, "train: --memory-budget must be a positive size, got ",
              memory_budget ? memory_budget->text : "");
  // Saved-tensor hooks do not chain (the innermost pair packs), so compressed tensors could not
  // also be moved to the CPU.
  GRAFT_CHECK((compress == autograd::SavedCodec::kNone && !compress_auto) || !save_on_cpu, "train: --compress ",
              compress_auto ? "auto" : autograd::codec_name(compress), " and --save-on-cpu cannot be combined (one "
              "saved-tensor hook packs each tensor); pick one");
  GRAFT_CHECK(!compress_auto || memory_budget, "train: --compress auto needs --memory-budget (the plan picks a codec "
              "per layer to fit it); without a budget, name the codec: --compress bf16 or int8");
  GRAFT_CHECK(warmup_epochs == 0 || schedule == Schedule::Cosine, "train: --warmup-epochs ", warmup_epochs,
              " needs --schedule cosine (got ", name(schedule), ")");
  GRAFT_CHECK(warmup_epochs < epochs || warmup_epochs == 0, "train: --warmup-epochs ", warmup_epochs,
              " must be fewer than --epochs ", epochs);
  GRAFT_CHECK(!memory_budget || checkpoint == Checkpointing::None,
              "train: --memory-budget plans checkpointing itself; drop --checkpoint ", name(checkpoint));
  GRAFT_CHECK(dropout >= 0 && dropout < 1, "train: --dropout must be in [0, 1), got ", dropout);
  GRAFT_CHECK(dropout == 0 || model == models::Kind::Vit || model == models::Kind::Gpt, "train: --dropout ", dropout,
              " applies to vit and gpt only (", models::kind_name(model), " has no dropout layers)");
  GRAFT_CHECK(min_lr >= 0 && min_lr < lr, "train: --min-lr ", min_lr, " must be at least 0 and below --lr ", lr);
  GRAFT_CHECK(grad_clip >= 0 && std::isfinite(grad_clip), "train: --grad-clip must be a number of at least 0, got ",
              grad_clip);
  GRAFT_CHECK(betas.first >= 0 && betas.first < 1 && betas.second >= 0 && betas.second < 1,
              "train: --betas must be two numbers in [0, 1), got ", betas.first, ",", betas.second);
  if (model == models::Kind::Gpt) {
    GRAFT_CHECK(iters >= 1, "train: gpt trains in --iters, which must be at least 1, got ", iters);
    GRAFT_CHECK(epochs == 1, "train: gpt trains in --iters, not --epochs (got --epochs ", epochs, ")");
    GRAFT_CHECK(warmup_epochs == 0, "train: gpt warms up in --warmup-iters, not --warmup-epochs");
    GRAFT_CHECK(eval_every >= 0, "train: --eval-every must be at least 0, got ", eval_every);
    GRAFT_CHECK(warmup_iters == 0 || schedule == Schedule::Cosine, "train: --warmup-iters ", warmup_iters,
                " needs --schedule cosine (got ", name(schedule), ")");
    GRAFT_CHECK(warmup_iters < iters || warmup_iters == 0, "train: --warmup-iters ", warmup_iters,
                " must be fewer than --iters ", iters);
    GRAFT_CHECK(!memory_budget, "train: --memory-budget plans image models only; gpt takes --checkpoint");
  } else {
    GRAFT_CHECK(iters == 0 && eval_every == 0 && warmup_iters == 0, "train: --iters, --eval-every and "
                "--warmup-iters apply to gpt only (", models::kind_name(model), " trains in --epochs)");
  }
}

Recipe::Flags Recipe::to_flags() const {
  auto exact = [](double v) {  // the shortest text that reads back to v
    char buf[40];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  };
  Flags out;
  for (const FieldDef& f : defs()) {
    const std::string flag = f.flag;
    if (flag == "--lr") out.emplace_back(flag, exact(lr));
    else if (flag == "--dropout") out.emplace_back(flag, exact(dropout));
    else if (flag == "--min-lr") out.emplace_back(flag, exact(min_lr));
    else if (flag == "--grad-clip") out.emplace_back(flag, exact(grad_clip));
    else if (flag == "--betas") out.emplace_back(flag, exact(betas.first) + "," + exact(betas.second));
    else if (model != models::Kind::Gpt && (flag == "--iters" || flag == "--eval-every" || flag == "--warmup-iters")) {
      // the image models' zeros are "not given" (the flags are gpt's)
    }
    else if (flag == "--weight-decay") {
      if (weight_decay) out.emplace_back(flag, exact(*weight_decay));
    } else if (flag == "--memory-budget") {
      if (memory_budget) out.emplace_back(flag, memory_budget->text);
    } else if (f.type_name == nullptr) {
      out.emplace_back(flag, f.show(*this) == "on" ? "true" : "false");
    } else {
      out.emplace_back(flag, f.show(*this));
    }
  }
  return out;
}

std::string Recipe::describe() const {
  if (model == models::Kind::Gpt) {
    std::ostringstream os;
    os << "model gpt (4 layers, 4 heads, width 128, context 64), " << iters << " iterations, batch " << batch_size
       << ", " << name(optimizer) << " lr " << number_text(lr);
    if (optimizer != OptimizerKind::Sgd) os << " betas (" << number_text(betas.first) << ", " << number_text(betas.second) << ")";
    if (weight_decay) os << ", weight decay " << number_text(*weight_decay);
    os << " (";
    if (warmup_iters > 0) os << warmup_iters << " warmup iterations, then ";
    os << name(schedule) << " schedule";
    if (schedule == Schedule::Cosine && min_lr > 0) os << " to " << number_text(min_lr);
    os << ")";
    if (grad_clip > 0) os << ", grad clip " << number_text(grad_clip);
    os << ", validation every " << eval_every << ", device " << device.str() << ", precision " << name(precision)
       << ", checkpoint " << name(checkpoint) << (save_on_cpu ? ", save-on-cpu" : "");
    if (compress != autograd::SavedCodec::kNone || compress_auto)
      os << ", compress " << (compress_auto ? "auto" : autograd::codec_name(compress));
    os << ", seed " << seed;
    if (dropout > 0) os << ", dropout " << number_text(dropout);
    return os.str();
  }
  std::string wd = weight_decay ? ", weight decay " + number_text(*weight_decay) : "";
  std::string sched = std::string(name(schedule)) + " schedule";
  if (warmup_epochs > 0) sched = std::to_string(warmup_epochs) + " warmup epoch(s), then " + sched;
  const char* format =
      "model %s, %lld epochs, batch %lld, %s lr %g%s (%s), %s inputs, device %s, precision %s, checkpoint %s%s%s, seed %llu";
  const std::string comp = compress_auto ? std::string(", compress auto")
                           : compress != autograd::SavedCodec::kNone ? std::string(", compress ") + autograd::codec_name(compress)
                                                                     : std::string();
  auto print = [&](char* buf, size_t n) {
    return std::snprintf(buf, n, format, std::string(models::kind_name(model)).c_str(), static_cast<long long>(epochs),
                         static_cast<long long>(batch_size), std::string(name(optimizer)).c_str(), lr, wd.c_str(),
                         sched.c_str(), normalize ? "standardised" : "raw [0,1]", device.str().c_str(),
                         std::string(name(precision)).c_str(), std::string(name(checkpoint)).c_str(), save_on_cpu ? ", save-on-cpu" : "",
                         comp.c_str(), static_cast<unsigned long long>(seed));
  };
  std::string s(static_cast<size_t>(print(nullptr, 0)), '\0');
  print(s.data(), s.size() + 1);
  if (dropout > 0) s += ", dropout " + number_text(dropout);
  return s;
}

Tensor Recipe::prepare_inputs(const Tensor& images) const {
  Tensor x = images.to(device);
  return normalize ? (x - data::FashionMnist::kMean) * (1.0 / data::FashionMnist::kStd) : x;
}

const std::vector<RecipeField>& Recipe::fields() {
  static const std::vector<RecipeField> fields = [] {
    std::vector<RecipeField> out;
    for (const FieldDef& f : defs())
      out.push_back({f.flag, f.negation ? f.negation : "", f.type_name ? f.type_name : "",
                     std::string(f.help) + " (" + defaults_text(f) + ")", f.type_name == nullptr});
    return out;
  }();
  return fields;
}

}  // namespace graft::train
