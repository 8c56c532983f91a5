// Saving and loading a model's weights in the safetensors format (readable by Python's
// safetensors and PyTorch), with strict key checking on load.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "graft.h"

using namespace graft;

namespace {
std::shared_ptr<nn::Sequential> make_model() {
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(4, 8));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(8, 2));
  return m;
}
}  // namespace

int main() {
  manual_seed(0);
  auto model = make_model();
  Tensor x = randn({3, 4});
  Tensor before = model->forward(x);

  auto path = std::filesystem::temp_directory_path() / "graft_save_and_load.safetensors";
  nn::save(*model, path.string());
  std::cout << "saved " << model->named_parameters().size() << " tensors to " << path << '\n';

  manual_seed(123);  // a fresh model with different weights...
  auto restored = make_model();
  nn::load(*restored, path.string());  // ...gets the saved ones back
  Tensor after = restored->forward(x);
  bool same = before.to_vector<float>() == after.to_vector<float>();
  std::cout << "outputs identical after load: " << (same ? "yes" : "no") << '\n';

  // A model with other shapes is refused, with the offending keys named.
  auto other = std::make_shared<nn::Sequential>();
  other->push_back(std::make_shared<nn::Linear>(4, 5));
  try {
    nn::load(*other, path.string());
    same = false;
  } catch (const Error& e) {
    std::cout << "loading into a different model: " << e.what() << '\n';
  }
  std::filesystem::remove(path);
  return same ? 0 : 1;
}
