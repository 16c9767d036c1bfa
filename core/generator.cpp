#include "core/generator.h"

namespace minigrad {

Generator& default_generator() {
  static Generator g;
  return g;
}

}  // namespace minigrad
