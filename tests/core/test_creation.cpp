// Factory functions against PyTorch 1.13's results: linspace with one step.
#include <vector>

#include "support/testing.h"

using namespace sl;

TEST_CASE("linspace with one step gives start, as torch.linspace") {
  CHECK(linspace(0, 1, 1).to_vector<float>() == std::vector<float>{0.0f});
  CHECK(linspace(5, 1, 1).to_vector<float>() == std::vector<float>{5.0f});
  CHECK(linspace(-2.5, 7, 1, {.dtype = DType::f64}).to_vector<double>() ==
        std::vector<double>{-2.5});
  // two and more steps keep both ends
  CHECK(linspace(0, 1, 2).to_vector<float>() == std::vector<float>{0.0f, 1.0f});
  CHECK(linspace(0, 1, 5).to_vector<float>() == std::vector<float>{0.0f, 0.25f, 0.5f, 0.75f, 1.0f});
  CHECK(linspace(0, 1, 0).numel() == 0);
}
