#include "core/lease/planted.h"

namespace stagger::lease {

PlantedRegressions& Planted() {
  static PlantedRegressions planted;
  return planted;
}

}  // namespace stagger::lease
