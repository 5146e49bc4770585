# Child of bench_python.py --torch: a small PyTorch CPU training loop inside the stage function
# (MEMSHIM_STAGES=bench=work); prints the CPU seconds the loop took (CPU time: the machine may be shared).
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(256, 512)
        self.b = torch.nn.Linear(512, 256)
        self.c = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def work(model, opt, steps=40):
    x = torch.randn(64, 256)
    y = torch.randint(0, 10, (64,))
    t = time.process_time()
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return time.process_time() - t


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
work(model, opt, 5)  # warm up kernels and allocator state; the stage sees this call too
print(work(model, opt))
