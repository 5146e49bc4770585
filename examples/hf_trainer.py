#!/usr/bin/env python3
"""memshim's demo and test workload: the real Hugging Face Trainer on a small GPT-2 built from a
config (no download) and a synthetic in-memory dataset: train (evaluating every epoch), evaluate,
predict.  HF's own memory tracker runs too unless --skip-hf-memory, so both can be compared.

    memshim run -- python examples/hf_trainer.py --output-dir out
    memshim-format --compare out/all_results.json memshim_metrics.json
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402


class Tokens(torch.utils.data.Dataset):
    """Random token sequences: each item is its own language-modelling target."""

    def __init__(self, n, length, vocab, seed):
        gen = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (n, length), generator=gen)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def arguments(out, args):
    kw = dict(output_dir=out, num_train_epochs=args.epochs, per_device_train_batch_size=args.batch,
              per_device_eval_batch_size=args.batch, gradient_accumulation_steps=args.accumulate,
              dataloader_num_workers=args.workers, save_strategy="no", logging_strategy="no",
              report_to=[], disable_tqdm=True, skip_memory_metrics=args.skip_hf_memory, seed=0)
    kw["eval_strategy" if "eval_strategy" in TrainingArguments.__init__.__code__.co_varnames
       else "evaluation_strategy"] = "epoch"
    if "use_cpu" in TrainingArguments.__init__.__code__.co_varnames:
        kw["use_cpu"] = True
    else:
        kw["no_cuda"] = True
    return TrainingArguments(**kw)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--skip-hf-memory", action="store_true", help="turn HF's own tracker off")
    p.add_argument("--hf-metrics", help="write HF's metrics (train, eval, test) to this JSON file")
    p.add_argument("--output-dir", default=None, help="where HF writes all_results.json (default: a temporary directory)")
    p.add_argument("--callback", action="store_true", help="add memshim.hf.MemshimCallback")
    args = p.parse_args()
    torch.manual_seed(0)
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=4, vocab_size=2048,
                        n_positions=64, n_ctx=64)
    model = GPT2LMHeadModel(config)
    params = sum(t.numel() * t.element_size() for t in model.parameters())
    out = args.output_dir or os.path.join(os.environ.get("TMPDIR", "/tmp"), "memshim-hf-%d" % os.getpid())
    callbacks = []
    if args.callback:
        from memshim.hf import MemshimCallback
        callbacks.append(MemshimCallback())
    trainer = Trainer(model=model, args=arguments(out, args), callbacks=callbacks,
                      train_dataset=Tokens(args.samples, 64, 2048, 1),
                      eval_dataset=Tokens(args.samples // 2, 64, 2048, 2))
    metrics = {"train": trainer.train().metrics}
    metrics["eval"] = trainer.evaluate()
    metrics["test"] = trainer.predict(Tokens(args.samples // 2, 64, 2048, 3)).metrics
    for split, m in metrics.items():
        trainer.log_metrics(split, m)
        trainer.save_metrics(split, m)  # HF's results files: OUTPUT_DIR/all_results.json
    info = {"parameter_bytes": params, "transformers": transformers.__version__,
            "torch": torch.__version__, "epochs": args.epochs, "rank": int(os.environ.get("RANK", "0")),
            "log_history": trainer.state.log_history}
    if args.hf_metrics and trainer.is_world_process_zero():  # one writer under torchrun
        with open(args.hf_metrics, "w") as f:
            json.dump({"metrics": metrics, "info": info}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
