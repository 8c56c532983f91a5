#pragma once
// data::FashionMnist: the Fashion-MNIST dataset (Zalando), read from its IDX files.
//
// Looks in `root` for train-images-idx3-ubyte.gz / train-labels-idx1-ubyte.gz (train = true) or
// t10k-images-idx3-ubyte.gz / t10k-labels-idx1-ubyte.gz (train = false), also accepting the same
// names without ".gz". Debian's dataset-fashion-mnist package installs them under
// /usr/share/datasets/fashion-mnist, the default root.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::data {

class FashionMnist {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr int64_t kNumClasses = 10;
  // The pixel mean and standard deviation over the 60000 training images (values in [0, 1]): the
  // usual Normalize((0.2860,), (0.3530,)) of torchvision recipes.
  static constexpr double kMean = 0.2860, kStd = 0.3530;

  explicit FashionMnist(const std::string& root = kDefaultRoot, bool train = true);

  int64_t size() const { return images_.size(0); }
  // float32 [N, 1, 28, 28], values in [0, 1].
  const Tensor& images() const { return images_; }
  // int64 [N], values in [0, 10).
  const Tensor& labels() const { return labels_; }
  bool train() const { return train_; }
  const std::string& root() const { return root_; }
  // "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"
  static const std::vector<std::string>& class_names();

 private:
  std::string root_;
  bool train_;
  Tensor images_, labels_;
};

}  // namespace graft::data
