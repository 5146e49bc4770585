"""memshim's numbers in the Hugging Face Trainer's logs and metrics.

    from memshim.hf import MemshimCallback
    trainer = Trainer(..., callbacks=[MemshimCallback()])
    MemshimCallback.install(trainer)   # or this: first in line, so report_to loggers get the keys

At each evaluation's log, at the end of training and in predict()'s metrics, the stage's numbers so
far (`eval_mem_cpu_alloc_delta`, ... as memshim names them) are added to the logs (hence
`trainer.state.log_history`, and TensorBoard, W&B and the other `report_to` loggers that come after
it) and to the metrics evaluate() and predict() return.  When HF's own tracker is on
(skip_memory_metrics=False) the same names are HF's, so memshim's keys get a `_memshim` suffix
(`eval_mem_cpu_alloc_delta_memshim`): the split's prefix stays first, as HF's loggers group by it
(TensorBoard's eval/ and test/; the rest under train/), and log_metrics prints each beside HF's.
Under torch.distributed (torchrun, accelerate), every rank's numbers are gathered through the job's
own process group at each of these points (memshim.ranks), and each key also comes as `KEY_max`,
`KEY_max_rank` (the rank that had the max) and `KEY_sum`, so W&B and TensorBoard on the main process
see the worst rank of a multi-node job.
Without the library preloaded the callback adds nothing of its own (one warning; it still takes
part in the gathers, so no rank waits).  Importing this module imports transformers; `import
memshim` alone does not.
"""
import warnings

from transformers import TrainerCallback

import memshim
from memshim import ranks

__all__ = ["MemshimCallback"]


class MemshimCallback(TrainerCallback):
    """Adds memshim's per-stage memory numbers to the Trainer's logs and metrics."""

    def __init__(self):
        self._warned = False

    @classmethod
    def install(cls, trainer):
        """Adds a MemshimCallback to TRAINER ahead of its loggers; returns it."""
        callback = cls()
        trainer.callback_handler.callbacks.insert(0, callback)
        return callback

    def _numbers(self, stage, args):
        """This process's numbers for STAGE, and every rank's max, its rank and sum when distributed
        (a collective: every rank calls it at the same callback)."""
        numbers = self._local(stage, args)
        if ranks.distributed():
            numbers.update(ranks.gather(numbers))
        return numbers

    def _local(self, stage, args):
        if not memshim.active():
            if not self._warned:
                warnings.warn("memshim: libmemshim.so is not preloaded; MemshimCallback adds nothing")
                self._warned = True
            return {}
        try:
            flat = memshim.metrics()
        except memshim.NotActive:
            return {}
        suffix = "" if getattr(args, "skip_memory_metrics", True) else "_memshim"
        keys = [k for k in flat if k.startswith(stage + "_mem_")]
        if stage == "train":  # init is folded into the first stage that reports, as HF does
            keys += [k for k in flat if k.startswith("init_mem_") or k == "before_init_mem_cpu"]
        return {k + suffix: flat[k] for k in keys}

    def _add(self, target, stage, args):
        if target is not None:
            target.update(self._numbers(stage, args))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        stage = "eval" if "eval_runtime" in logs else "train" if "train_runtime" in logs else None
        if stage is None:
            return
        numbers = self._numbers(stage, args)
        logs.update(numbers)
        if state.log_history and numbers:  # the Trainer stored its copy before calling us
            state.log_history[-1].update(numbers)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._add(metrics, "eval", args)

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        self._add(metrics, "test", args)
