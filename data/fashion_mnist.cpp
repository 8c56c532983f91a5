#include "data/fashion_mnist.h"

#include <filesystem>

#include "data/idx_reader.h"
#include "runtime/error.h"

namespace graft::data {

namespace {

const char* kInstallHint = "install the dataset with `apt-get install dataset-fashion-mnist` or pass `--data DIR`";

// root/name.gz, or root/name when only the uncompressed file exists.
std::string find_file(const std::string& root, const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path gz = fs::path(root) / (name + ".gz");
  if (fs::exists(gz, ec)) return gz.string();
  fs::path plain = fs::path(root) / name;
  if (fs::exists(plain, ec)) return plain.string();
  GRAFT_ERROR("FashionMnist: '", gz.string(), "' not found; ", kInstallHint);
}

}  // namespace

FashionMnist::FashionMnist(const std::string& root, bool train) : root_(root), train_(train) {
  std::error_code ec;
  GRAFT_CHECK(std::filesystem::is_directory(root, ec), "FashionMnist: data directory '", root,
              "' does not exist; ", kInstallHint);
  const std::string prefix = train ? "train" : "t10k";
  const std::string img_path = find_file(root, prefix + "-images-idx3-ubyte");
  const std::string lbl_path = find_file(root, prefix + "-labels-idx1-ubyte");
  Tensor images = load_idx_images(img_path);
  labels_ = load_idx_labels(lbl_path);
  GRAFT_CHECK(images.size(1) == 28 && images.size(2) == 28, "FashionMnist: '", img_path, "' holds images of ",
              images.size(1), "x", images.size(2), ", expected 28x28");
  GRAFT_CHECK(images.size(0) == labels_.size(0), "FashionMnist: '", img_path, "' holds ", images.size(0),
              " images but '", lbl_path, "' holds ", labels_.size(0), " labels");
  const int64_t* l = labels_.data_ptr<int64_t>();
  for (int64_t i = 0; i < labels_.numel(); ++i)
    GRAFT_CHECK(l[i] >= 0 && l[i] < kNumClasses, "FashionMnist: '", lbl_path, "' label ", i, " is ", l[i],
                ", outside [0, ", kNumClasses, ")");
  images_ = images.view({images.size(0), 1, 28, 28});
}

const std::vector<std::string>& FashionMnist::class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace graft::data
