# Child of bench_python.py --torch-stages: a small PyTorch CPU training script shaped like a
# Trainer's, with MEMSHIM_STAGES="init=build,train=train,eval=evaluate": build the model, train for
# EPOCHS (argv[1]) with an evaluation at each epoch's end (a stage inside a stage), evaluate once
# more.  Small layers and batches, so Python's calls (modules, the optimizer) weigh as much as the
# arithmetic.  Prints the CPU seconds of the whole (the machine may be shared).
import sys
import time

import torch

torch.manual_seed(0)
torch.set_num_threads(1)


def build():
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                                torch.nn.ReLU(), torch.nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(512, 32), torch.randint(0, 10, (512,))
    return model, opt, x, y


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 16):
            correct += (model(x[i:i + 16]).argmax(1) == y[i:i + 16]).sum().item()
    model.train()
    return correct


def train(model, opt, x, y, epochs):
    for _ in range(epochs):
        for i in range(0, len(x), 16):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[i:i + 16]), y[i:i + 16])
            loss.backward()
            opt.step()
        evaluate(model, x, y)


t = time.process_time()
model, opt, x, y = build()
train(model, opt, x, y, int(sys.argv[1]) if len(sys.argv) > 1 else 40)
evaluate(model, x, y)
print(time.process_time() - t)
