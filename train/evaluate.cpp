#include "train/evaluate.h"

#include <optional>

#include "autograd/autocast.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "data/data_loader.h"
#include "runtime/error.h"
#include "runtime/shape.h"

namespace graft::train {

namespace {

data::DataLoader shard_loader(const Tensor& images, const Tensor& labels, const EvalOptions& o) {
  if (o.world.size == 1) return data::DataLoader(images, labels, o.batch_size);
  const int rank = o.world.rank, size = o.world.size;
  const int64_t n = images.size(0);
  return data::DataLoader(images, labels, o.batch_size, [rank, size, n](int64_t) {
    std::vector<int64_t> idx;
    for (int64_t i = rank; i < n; i += size) idx.push_back(i);
    return idx;
  });
}

}  // namespace

EvalResult evaluate(nn::Module& model, const Tensor& images, const Tensor& labels, const EvalOptions& o) {
  GRAFT_CHECK(o.num_classes > 0 && o.batch_size > 0, "evaluate: num_classes and batch_size must be positive, got ",
              o.num_classes, " and ", o.batch_size);
  InferenceMode inference;
  std::optional<autocast::AutocastGuard> mixed;
  if (o.autocast) mixed.emplace(o.device, *o.autocast);
  model.eval();
  data::DataLoader loader = shard_loader(images, labels, o);
  const int64_t nc = o.num_classes;
  std::vector<int64_t> confusion(static_cast<size_t>(nc * nc), 0);
  double loss_sum = 0;
  int64_t correct = 0, n = 0;
  while (auto b = loader.next()) {
    Tensor x = o.prepare_inputs ? o.prepare_inputs(b->images) : b->images.to(o.device), y = b->labels.to(o.device);
    Tensor logits = model(x);
    GRAFT_CHECK(logits.dim() == 2 && logits.size(1) == nc, "evaluate: the model gave ", shape_str(logits.sizes()),
                " for a batch; expected [B, ", nc, "] (num_classes)");
    loss_sum += cross_entropy(logits, y, {}, "sum").item<float>();
    auto pred = logits.argmax(1).to_vector<int64_t>();
    auto truth = b->labels.to_vector<int64_t>();
    for (size_t i = 0; i < pred.size(); ++i) {
      GRAFT_CHECK(truth[i] >= 0 && truth[i] < nc, "evaluate: label ", truth[i], " is outside [0, ", nc, ")");
      correct += pred[i] == truth[i];
      confusion[static_cast<size_t>(truth[i] * nc + pred[i])]++;
    }
    n += static_cast<int64_t>(pred.size());
  }
  model.train();
  std::vector<double> sums{loss_sum, static_cast<double>(correct), static_cast<double>(n)};
  for (int64_t c : confusion) sums.push_back(static_cast<double>(c));
  o.world.sum(sums);
  EvalResult r;
  r.num_classes = nc;
  r.samples = static_cast<int64_t>(sums[2]);
  r.confusion.resize(confusion.size());
  for (size_t i = 0; i < confusion.size(); ++i) r.confusion[i] = static_cast<int64_t>(sums[3 + i]);
  r.loss = sums[0] / sums[2];
  r.accuracy = sums[1] / sums[2];
  return r;
}

}  // namespace graft::train
