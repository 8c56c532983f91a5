#include "models/model.h"

#include "models/cnn.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "models/vit.h"
#include "runtime/error.h"

namespace graft::models {

Model make_model(Kind kind) { return make_model(kind, 0.0); }

Model make_model(Kind kind, double dropout, int64_t vocab_size) {
  GRAFT_CHECK(dropout >= 0 && dropout < 1, "models: dropout must be in [0, 1), got ", dropout);
  GRAFT_CHECK(dropout == 0 || kind == Kind::Vit || kind == Kind::Gpt, "models: ", kind_name(kind),
              " has no dropout layers; dropout ", dropout, " applies to vit and gpt only");
  GRAFT_CHECK((kind == Kind::Gpt) == (vocab_size > 0), "models: ",
              kind == Kind::Gpt ? "gpt needs its vocabulary's size (make_model(Kind::Gpt, dropout, vocab_size))"
                                : "only gpt takes a vocabulary size");
  switch (kind) {
    case Kind::Mlp: return mlp();
    case Kind::Cnn: return cnn();
    case Kind::Vit: {
      auto v = vit(dropout);
      return {v, v->stages()};
    }
    case Kind::Gpt: {
      auto g = gpt(vocab_size, dropout);
      return {g, g->stages()};
    }
  }
  GRAFT_ERROR("models: unknown model kind ", static_cast<int>(kind));
}

bool is_image_model(Kind kind) { return kind != Kind::Gpt; }

void place_on(nn::Module& module, Device device) {
  module.to(device);
  if (device.is_cpu()) module.to(MemoryFormat::ChannelsLast);
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Mlp: return "mlp";
    case Kind::Cnn: return "cnn";
    case Kind::Vit: return "vit";
    case Kind::Gpt: return "gpt";
  }
  return "?";
}

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> kinds{Kind::Mlp, Kind::Cnn, Kind::Vit, Kind::Gpt};
  return kinds;
}

Kind kind_from_name(std::string_view name) {
  std::string names;
  for (Kind k : all_kinds()) {
    if (kind_name(k) == name) return k;
    names += std::string(names.empty() ? "" : k == all_kinds().back() ? " or " : ", ") + std::string(kind_name(k));
  }
  GRAFT_ERROR("unknown model '", name, "' (expected ", names, ")");
}

}  // namespace graft::models
