#include "models/model.h"

#include "models/cnn.h"
#include "models/mlp.h"
#include "models/vit.h"
#include "runtime/error.h"

namespace graft::models {

Model make_model(Kind kind) { return make_model(kind, 0.0); }

Model make_model(Kind kind, double dropout) {
  GRAFT_CHECK(dropout >= 0 && dropout < 1, "models: dropout must be in [0, 1), got ", dropout);
  GRAFT_CHECK(dropout == 0 || kind == Kind::Vit, "models: ", kind_name(kind), " has no dropout layers; dropout ",
              dropout, " applies to vit only");
  switch (kind) {
    case Kind::Mlp: return mlp();
    case Kind::Cnn: return cnn();
    case Kind::Vit: {
      auto v = vit(dropout);
      return {v, v->stages()};
    }
  }
  GRAFT_ERROR("models: unknown model kind ", static_cast<int>(kind));
}

void place_on(nn::Module& module, Device device) {
  module.to(device);
  if (device.is_cpu()) module.to(MemoryFormat::ChannelsLast);
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::Mlp: return "mlp";
    case Kind::Cnn: return "cnn";
    case Kind::Vit: return "vit";
  }
  return "?";
}

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> kinds{Kind::Mlp, Kind::Cnn, Kind::Vit};
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
