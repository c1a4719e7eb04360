# Prints PyTorch's results for the non-finite inputs of test_nonfinite_pytorch.cpp ("non-finite
# inputs give PyTorch's results"), so the expected values there can be checked again against a
# new PyTorch:
#   python3 tests/tensors/nonfinite_pytorch.py   (in an environment with torch installed)
import torch
import torch.nn.functional as F

nan, inf = float("nan"), float("inf")
x = torch.tensor([nan, inf, -inf, 1.0, -2.0, 0.0])
torch.set_printoptions(precision=4)
print("relu", F.relu(x))
print("gelu", F.gelu(x, approximate="tanh"))  # tensorplay's gelu is the tanh approximation
for name in ["tanh", "exp", "log", "sqrt", "sigmoid", "square"]:
    print(name, getattr(torch, name)(x))
print("sum", x.sum(), torch.tensor([inf, -inf]).sum(), "mean", torch.tensor([inf, 1.0]).mean())
leaf = x.clone().requires_grad_()
F.relu(leaf).backward(torch.ones(6))
print("relu gradient", leaf.grad)
rows = torch.tensor([[nan, 1, 2], [inf, 1, 2], [-inf, 1, 2], [-inf, -inf, -inf], [0, 1, 2.0]])
print("softmax", F.softmax(rows, -1))
print("log_softmax", F.log_softmax(rows, -1))
print("layer_norm", F.layer_norm(rows[:3], (3,)))
logits = torch.tensor([[nan, 1, 2], [0, 1, 2.0]])
print("cross_entropy", F.cross_entropy(logits, torch.tensor([1, 0]), reduction="none"))
print("ignored", F.cross_entropy(logits, torch.tensor([-100, 0]), reduction="none"))
print("ignored mean", F.cross_entropy(logits, torch.tensor([-100, 0])))
print("infinite logits", F.cross_entropy(torch.tensor([[inf, 1, 2], [-inf, 1, 2.0]]),
                                         torch.tensor([1, 1]), reduction="none"))
print("target -inf", F.cross_entropy(torch.tensor([[-inf, 1, 2.0]]), torch.tensor([0]),
                                     reduction="none"))
print("mse_loss", F.mse_loss(torch.tensor([inf, 1.0]), torch.tensor([inf, 1.0]), reduction="none"))
print("matmul", torch.tensor([[inf, 1.0]]) @ torch.tensor([[0.0], [1.0]]))
print("dropout", F.dropout(torch.full((64,), nan), 0.5, True).isnan().all())
p = torch.nn.Parameter(torch.ones(3))
for g in ([nan, 1.0, 2.0], [inf, 1.0, 2.0]):
    p.grad = torch.tensor(g)
    print("clip_grad_norm", torch.nn.utils.clip_grad_norm_([p], 1.0), p.grad)
