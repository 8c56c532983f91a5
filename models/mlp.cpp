#include "models/mlp.h"

#include "nn/activation.h"
#include "nn/flatten.h"
#include "nn/linear.h"

namespace graft::models {

std::shared_ptr<nn::Sequential> mlp() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  m->push_back(std::make_shared<nn::Linear>(784, 256));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(256, 10));
  return m;
}

}  // namespace graft::models
