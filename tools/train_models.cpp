#include "tools/train_models.h"

#include "nn/activation.h"
#include "nn/conv.h"
#include "nn/flatten.h"
#include "nn/linear.h"
#include "nn/pooling.h"
#include "nn/vision_transformer.h"
#include "runtime/error.h"

namespace graft::tools {

TrainModel make_model(const std::string& name) {
  if (name == "vit") {
    auto vit = std::make_shared<nn::VisionTransformer>();  // its defaults are this recipe's model
    return {vit, vit->stages()};
  }
  auto m = std::make_shared<nn::Sequential>();
  if (name == "mlp") {
    m->push_back(std::make_shared<nn::Flatten>());
    m->push_back(std::make_shared<nn::Linear>(784, 256));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(256, 10));
  } else if (name == "cnn") {
    m->push_back(std::make_shared<nn::Conv2d>(1, 32, 3, 1, 1));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::MaxPool2d>(2));
    m->push_back(std::make_shared<nn::Conv2d>(32, 64, 3, 1, 1));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::MaxPool2d>(2));
    m->push_back(std::make_shared<nn::Flatten>());
    m->push_back(std::make_shared<nn::Linear>(3136, 128));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Linear>(128, 10));
  } else {
    GRAFT_ERROR("unknown model '", name, "' (expected mlp, cnn or vit)");
  }
  return {m, m};
}

}  // namespace graft::tools
