// A program outside the project: it finds the installed package and links the umbrella target.
#include "tensors/tensors.h"
#include "actors/schedule.h"
int main() {
  auto t = tensorplay::ones({2, 2});
  return tensorplay::sum(t).item() == 4.0f ? 0 : 1;
}
