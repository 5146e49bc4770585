#!/usr/bin/env python3
"""memshim's demo: a small real PyTorch CPU training run, shaped like Hugging Face's Trainer.

The default stage names bind transformers' Trainer only (`make demo` runs that one), so this class
is named: scripts/memshim run --stages
"init=Trainer.__init__,train=Trainer.train,eval=Trainer.evaluate,test=Trainer.predict" --
/usr/bin/python3 examples/train.py (Trainer.evaluate -> eval is also the evaluation nested in the
middle of train).
"""
import sys
import time

import torch
from torch import nn


def make_data(n, features, classes, seed):
    """A learnable synthetic classification set: labels from a fixed random linear teacher."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=gen)
    teacher = torch.randn(features, classes, generator=torch.Generator().manual_seed(1))
    return x, (x @ teacher).argmax(dim=1)


class Trainer:
    def __init__(self, features=256, classes=10, hidden=1024, epochs=3, batch_size=512):
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(),
                                   nn.Linear(hidden, hidden), nn.ReLU(),
                                   nn.Linear(hidden, classes))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()
        self.epochs, self.batch_size = epochs, batch_size
        self.train_set = make_data(1024, features, classes, seed=2)
        self.eval_set = make_data(1024, features, classes, seed=3)
        self.test_set = make_data(1024, features, classes, seed=4)

    def _batches(self, data, shuffle):
        x, y = data
        order = torch.randperm(len(x)) if shuffle else torch.arange(len(x))
        for i in range(0, len(x), self.batch_size):
            idx = order[i:i + self.batch_size]
            yield x[idx], y[idx]

    def train(self):
        start, steps = time.time(), 0
        self.model.train()
        for epoch in range(self.epochs):
            for xb, yb in self._batches(self.train_set, shuffle=True):
                self.optimizer.zero_grad()
                loss = self.loss_fn(self.model(xb), yb)
                loss.backward()
                self.optimizer.step()
                steps += 1
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}", flush=True)
            if epoch == self.epochs // 2:
                # Mid-training evaluation, as Trainer's evaluation_strategy does: a nested stage.
                self.evaluate()
                self.model.train()
        runtime = time.time() - start
        return {"train_runtime": round(runtime, 4), "train_steps": steps,
                "train_samples_per_second": round(len(self.train_set[0]) * self.epochs / runtime, 3)}

    def _score(self, data, prefix):
        self.model.eval()
        total, correct, loss = 0, 0, 0.0
        with torch.no_grad():
            for xb, yb in self._batches(data, shuffle=False):
                out = self.model(xb)
                loss += self.loss_fn(out, yb).item() * len(xb)
                correct += (out.argmax(dim=1) == yb).sum().item()
                total += len(xb)
        metrics = {f"{prefix}_loss": round(loss / total, 4),
                   f"{prefix}_accuracy": round(correct / total, 4)}
        print(f"{prefix}: {metrics}", flush=True)
        return metrics

    def evaluate(self):
        return self._score(self.eval_set, "eval")

    def predict(self):
        return self._score(self.test_set, "test")


def main():
    torch.set_num_threads(2)
    trainer = Trainer()
    trainer.train()
    trainer.evaluate()
    trainer.predict()
    return 0


if __name__ == "__main__":
    sys.exit(main())
