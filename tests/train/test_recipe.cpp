#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "graft.h"
#include "train/recipe.h"

using namespace graft;
using train::Recipe;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("Recipe::defaults holds each model's recipe: mlp and cnn Adam 1e-3, vit AdamW 2e-3 with decay 0.05") {
  for (models::Kind k : {models::Kind::Mlp, models::Kind::Cnn}) {
    Recipe r = Recipe::defaults(k);
    CHECK(r.model == k);
    CHECK(r.optimizer == train::OptimizerKind::Adam);
    CHECK(r.lr == 1e-3);
    CHECK_FALSE(r.weight_decay.has_value());
    CHECK(r.schedule == train::Schedule::Cosine);
    CHECK(r.warmup_epochs == 0);
    CHECK(r.epochs == 1);
    CHECK(r.batch_size == 128);
    CHECK(r.normalize);
    CHECK(r.device == kCPU);
    CHECK(r.checkpoint == train::Checkpointing::None);
    CHECK(r.seed == 0);
  }
  Recipe v = Recipe::defaults(models::Kind::Vit);
  CHECK(v.optimizer == train::OptimizerKind::AdamW);
  CHECK(v.lr == 2e-3);
  CHECK(v.weight_decay == 0.05);
  CHECK(v.warmup_epochs == 0);  // a one-epoch run has no epoch to spare for warmup
  CHECK(Recipe::make({}).model == models::Kind::Mlp);
}

TEST_CASE("Recipe::make: flags given win over the model's defaults, whatever their order") {
  Recipe r = Recipe::make({{"--lr", "0.01"}, {"--model", "vit"}, {"--weight-decay", "0"}, {"--epochs", "3"}});
  CHECK(r.model == models::Kind::Vit);
  CHECK(r.lr == 0.01);
  CHECK(r.weight_decay == 0.0);
  CHECK(r.optimizer == train::OptimizerKind::AdamW);  // not given: vit's
  CHECK(r.warmup_epochs == 1);                         // vit warms up when it trains more than one epoch
  CHECK(Recipe::make({{"--model", "vit"}, {"--epochs", "3"}, {"--warmup-epochs", "2"}}).warmup_epochs == 2);
  CHECK(Recipe::make({{"--model", "vit"}, {"--epochs", "3"}, {"--warmup-epochs", "0"}}).warmup_epochs == 0);
  // The warmup default follows the schedule: none given, no warmup filled in (and no error).
  CHECK(Recipe::make({{"--model", "vit"}, {"--epochs", "3"}, {"--schedule", "none"}}).warmup_epochs == 0);
  Recipe c = Recipe::make({{"--model", "cnn"}, {"--optimizer", "sgd"}, {"--batch-size", "64"}, {"--normalize", "false"},
                           {"--save-on-cpu", "true"}, {"--checkpoint", "nested"}, {"--seed", "18446744073709551615"},
                           {"--device", "cpu"}, {"--schedule", "step"}});
  CHECK(c.model == models::Kind::Cnn);
  CHECK(c.optimizer == train::OptimizerKind::Sgd);
  CHECK(c.batch_size == 64);
  CHECK_FALSE(c.normalize);
  CHECK(c.save_on_cpu);
  CHECK(c.checkpoint == train::Checkpointing::Nested);
  CHECK(c.seed == 18446744073709551615ull);
  CHECK(c.schedule == train::Schedule::Step);
  Recipe b = Recipe::make({{"--memory-budget", "1.5MiB"}});
  REQUIRE(b.memory_budget.has_value());
  CHECK(b.memory_budget->bytes == 3 << 19);
  CHECK(b.memory_budget->text == "1.5MiB");
}

TEST_CASE("Recipe refuses a bad value in words, naming the flag, and check() says the same without it") {
  auto set = [](const std::string& flag, const std::string& text) {
    return error_of([&] { Recipe().set(flag, text); });
  };
  CHECK(set("--epochs", "0") == "--epochs: expected a whole number of at least 1, got 0");
  CHECK(set("--epochs", "2.5") == "--epochs: expected a whole number of at least 1, got 2.5");
  CHECK(set("--batch-size", "x") == "--batch-size: expected a whole number of at least 1, got x");
  CHECK(set("--warmup-epochs", "-1") == "--warmup-epochs: expected a whole number of at least 0, got -1");
  CHECK(set("--lr", "-0.1") == "--lr: expected a number above 0, got -0.1");
  CHECK(set("--lr", "inf") == "--lr: expected a number above 0, got inf");
  CHECK(set("--weight-decay", "-1") == "--weight-decay: expected a number of at least 0, got -1");
  CHECK(set("--optimizer", "rmsprop") == "--optimizer: expected sgd, adam or adamw, got rmsprop");
  CHECK(set("--model", "resnet") == "--model: expected mlp, cnn, vit or gpt, got resnet");
  CHECK(set("--schedule", "linear") == "--schedule: expected none, cosine or step, got linear");
  CHECK(set("--checkpoint", "all") == "--checkpoint: expected none, sqrt or nested, got all");
  CHECK(set("--device", "gpu") == "--device: expected cpu, cuda or cuda:N, got gpu");
  CHECK(set("--seed", "-1") == "--seed: expected a whole number of at least 0, got -1");
  CHECK(set("--normalize", "maybe") == "--normalize: expected true or false, got maybe");
  CHECK(set("--memory-budget", "lots") == "--memory-budget: cannot read 'lots' as a size (for example 16MiB)");
  CHECK(set("--memory-budget", "0MiB") == "--memory-budget: cannot read '0MiB' as a positive size (for example 16MiB)");
  CHECK(set("--memory-budget", "3 parsecs") ==
        "--memory-budget: cannot read '3 parsecs' as a positive size (for example 16MiB)");
  CHECK(set("--epochs", "99999999999999999999") ==
        "--epochs: expected a whole number of at least 1, got 99999999999999999999");
  CHECK(set("--frobnicate", "1").find("the recipe has no field --frobnicate (its fields: --model, --epochs") !=
        std::string::npos);
  CHECK(Recipe::check("--epochs", "0") == "expected a whole number of at least 1, got 0");
  CHECK(Recipe::check("--epochs", "3").empty());
  CHECK(Recipe::check("--memory-budget", "16MiB").empty());
}

TEST_CASE("Recipe refuses conflicting fields, naming the flags") {
  CHECK(error_of([] { Recipe::make({{"--warmup-epochs", "1"}, {"--epochs", "2"}, {"--schedule", "none"}}); }) ==
        "train: --warmup-epochs 1 needs --schedule cosine (got none)");
  CHECK(error_of([] { Recipe::make({{"--warmup-epochs", "2"}, {"--epochs", "2"}}); }) ==
        "train: --warmup-epochs 2 must be fewer than --epochs 2");
  CHECK(error_of([] { Recipe::make({{"--memory-budget", "1MiB"}, {"--checkpoint", "sqrt"}}); }) ==
        "train: --memory-budget plans checkpointing itself; drop --checkpoint sqrt");
  // Fields set in C++ are checked by validate() (a Trainer calls it) with the flags' names.
  Recipe r;
  r.epochs = 0;
  CHECK(error_of([&] { r.validate(); }) == "train: --epochs must be at least 1, got 0");
  r = Recipe();
  r.lr = 0;
  CHECK(error_of([&] { r.validate(); }) == "train: --lr must be a number above 0, got 0");
  r = Recipe();
  r.weight_decay = -0.5;
  CHECK(error_of([&] { r.validate(); }) == "train: --weight-decay must be a number of at least 0, got -0.5");
}

TEST_CASE("Recipe::describe is graft train's banner") {
  CHECK(Recipe::defaults(models::Kind::Mlp).describe() ==
        "model mlp, 1 epochs, batch 128, adam lr 0.001 (cosine schedule), standardised inputs, device cpu, precision fp32, "
        "checkpoint none, seed 0");
  CHECK(Recipe::make({{"--model", "vit"}, {"--epochs", "2"}, {"--batch-size", "32"}}).describe() ==
        "model vit, 2 epochs, batch 32, adamw lr 0.002, weight decay 0.05 (1 warmup epoch(s), then cosine schedule), "
        "standardised inputs, device cpu, precision fp32, checkpoint none, seed 0");
  CHECK(Recipe::make({{"--optimizer", "sgd"}, {"--weight-decay", "1e-4"}, {"--schedule", "step"}, {"--normalize", "false"},
                      {"--checkpoint", "nested"}, {"--save-on-cpu", "true"}, {"--seed", "7"}})
            .describe() ==
        "model mlp, 1 epochs, batch 128, sgd lr 0.001, weight decay 0.0001 (step schedule), raw [0,1] inputs, device "
        "cpu, precision fp32, checkpoint nested, save-on-cpu, seed 7");
  CHECK(Recipe::make({{"--model", "cnn"}, {"--compress", "int8"}}).describe().find(", compress int8, seed 0") !=
        std::string::npos);
  CHECK_THROWS_WITH(Recipe::make({{"--compress", "int8"}, {"--save-on-cpu", "true"}}).validate(),
                    Catch::Contains("--compress int8 and --save-on-cpu cannot be combined"));
  CHECK_THROWS_WITH(Recipe::make({{"--compress", "fp4"}}), Catch::Contains("unknown saved-tensor codec 'fp4'"));
}

TEST_CASE("Recipe::fields: every flag says what it takes and each model's default in words, never a raw bound") {
  const auto& fields = Recipe::fields();
  REQUIRE(fields.size() == 23);
  for (const auto& f : fields) {
    INFO(f.flag << ": " << f.help);
    CHECK(f.flag.rfind("--", 0) == 0);
    CHECK(f.help.find("default") != std::string::npos);
    CHECK(f.help.find(" - ") == std::string::npos);
    CHECK(f.help.find("1099511627776") == std::string::npos);
    CHECK(f.help.find("1e+09") == std::string::npos);
    CHECK(f.is_switch == f.type_name.empty());
    CHECK(Recipe::check(f.flag, "definitely not a value") != "");
  }
  auto help = [&](const std::string& flag) {
    for (const auto& f : fields)
      if (f.flag == flag) return f.help;
    return std::string();
  };
  CHECK(help("--lr").find("default 0.001 for mlp, cnn and gpt, 0.002 for vit") != std::string::npos);
  CHECK(help("--optimizer").find("default adam for mlp and cnn, adamw for vit and gpt") != std::string::npos);
  CHECK(help("--weight-decay").find("a number of at least 0") != std::string::npos);
  CHECK(help("--weight-decay").find("default unset for mlp and cnn, 0.05 for vit, 0.1 for gpt") != std::string::npos);
  CHECK(help("--betas").find("default 0.9,0.999 for mlp, cnn and vit, 0.9,0.99 for gpt") != std::string::npos);
  CHECK(help("--iters").find("default 2000 for gpt") != std::string::npos);
  CHECK(help("--warmup-epochs").find("a whole number of at least 0") != std::string::npos);
  CHECK(help("--epochs").find("(default 1)") != std::string::npos);
  CHECK(help("--dropout").find("(default 0)") != std::string::npos);
}

TEST_CASE("Recipe --dropout: vit and gpt only, in [0, 1), in the banner when set, and to_flags reads back exactly") {
  CHECK(Recipe::check("--dropout", "1") == "expected a number in [0, 1), got 1");
  CHECK_THROWS_WITH(Recipe::make({{"--dropout", "0.1"}}), Catch::Contains("--dropout 0.1 applies to vit and gpt only"));
  const Recipe r = Recipe::make({{"--model", "vit"}, {"--dropout", "0.1"}, {"--lr", "0.00123456789"},
                                 {"--memory-budget", "16MiB"}, {"--normalize", "false"}});
  CHECK_THAT(r.describe(), Catch::EndsWith(", seed 0, dropout 0.1"));
  const Recipe back = Recipe::make(r.to_flags());
  CHECK(back.to_flags() == r.to_flags());
  CHECK(back.lr == r.lr);
  CHECK(back.dropout == r.dropout);
  CHECK(back.memory_budget->bytes == 16 << 20);
  CHECK(back.warmup_epochs == r.warmup_epochs);
  CHECK_FALSE(back.normalize);
  CHECK(back.weight_decay == r.weight_decay);
}

TEST_CASE("Recipe for gpt: nanoGPT's baby recipe in iterations, warmup following --iters, exact to_flags") {
  const Recipe r = Recipe::make({{"--model", "gpt"}});
  CHECK(r.iters == 2000);
  CHECK(r.epochs == 1);
  CHECK(r.batch_size == 12);
  CHECK(r.optimizer == train::OptimizerKind::AdamW);
  CHECK(r.lr == 1e-3);
  CHECK(r.weight_decay == 0.1);
  CHECK(r.betas == std::pair<double, double>{0.9, 0.99});
  CHECK(r.warmup_iters == 100);
  CHECK(r.min_lr == 1e-4);
  CHECK(r.grad_clip == 1.0);
  CHECK(r.eval_every == 500);
  CHECK(r.describe() == "model gpt (4 layers, 4 heads, width 128, context 64), 2000 iterations, batch 12, adamw lr 0.001 "
                        "betas (0.9, 0.99), weight decay 0.1 (100 warmup iterations, then cosine schedule to 0.0001), "
                        "grad clip 1, validation every 500, device cpu, precision fp32, checkpoint none, seed 0");
  CHECK(Recipe::make({{"--model", "gpt"}, {"--iters", "40"}}).warmup_iters == 2);
  CHECK(Recipe::make({{"--model", "gpt"}, {"--iters", "40"}, {"--warmup-iters", "7"}}).warmup_iters == 7);
  const Recipe odd = Recipe::make({{"--model", "gpt"}, {"--betas", "0.85,0.975"}, {"--min-lr", "3.3e-5"},
                                   {"--grad-clip", "0.7"}, {"--dropout", "0.2"}});
  const Recipe back = Recipe::make(odd.to_flags());
  CHECK(back.to_flags() == odd.to_flags());
  CHECK(back.betas == odd.betas);
  CHECK(back.min_lr == odd.min_lr);
  CHECK(back.grad_clip == odd.grad_clip);
  CHECK(Recipe::make(Recipe::make({{"--model", "mlp"}}).to_flags()).iters == 0);
  CHECK_THROWS_WITH(Recipe::make({{"--model", "gpt"}, {"--epochs", "2"}}), Catch::Contains("gpt trains in --iters"));
  CHECK_THROWS_WITH(Recipe::make({{"--model", "cnn"}, {"--iters", "10"}}), Catch::Contains("apply to gpt only"));
  CHECK_THROWS_WITH(Recipe::make({{"--model", "gpt"}, {"--iters", "10"}, {"--warmup-iters", "10"}}),
                    Catch::Contains("--warmup-iters 10 must be fewer than --iters 10"));
  CHECK_THROWS_WITH(Recipe::make({{"--model", "gpt"}, {"--min-lr", "0.01"}}), Catch::Contains("--min-lr"));
  CHECK(Recipe::check("--betas", "0.9") == "expected two numbers in [0, 1) as B1,B2, got 0.9");
  CHECK(Recipe::check("--betas", "0.9,1") == "expected two numbers in [0, 1) as B1,B2, got 0.9,1");
}

TEST_CASE("Recipe::prepare_inputs standardises with the training set's statistics unless told not to") {
  Tensor x = tensor({0.0, 0.2860, 1.0});
  Recipe r;
  auto v = r.prepare_inputs(x).to_vector<float>();
  CHECK(v[0] == Approx(-0.2860 / 0.3530));
  CHECK(v[1] == Approx(0.0).margin(1e-6));
  CHECK(v[2] == Approx((1 - 0.2860) / 0.3530));
  r.normalize = false;
  CHECK(r.prepare_inputs(x).to_vector<float>() == x.to_vector<float>());
}
