// A program outside the project: it finds the installed package and links the umbrella target.
#include "actors/schedule.h"
#include "tensors/tensors.h"
int main() {
  auto t = tensorplay::ones({2, 2});
  return tensorplay::sum(t).item() == 4.0f ? 0 : 1;
}
