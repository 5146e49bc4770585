"""memshim's numbers in PyTorch Lightning's logs (Lightning 2.x).

    from memshim.lightning import MemshimCallback
    trainer = lightning.pytorch.Trainer(..., callbacks=[MemshimCallback()])

Trainer.fit, validate, test and predict are the stages `fit`, `validate` (also each validation
loop inside fit), `test` and `predict`, begun and ended by the callback.  Their numbers (the
metrics file's flat keys: `fit_mem_cpu_alloc_delta`, `fit_mem_cpu_peaked_delta`, `fit_runtime`,
`..._mem_gpu_*` when the process used the GPU) go to the LightningModule's `log_dict` at each
training, validation and test epoch end (so far, the stage being open), hence to every logger and
to what `trainer.validate()` / `trainer.test()` return; at the end of fit and predict, where
Lightning allows no `log`, the final numbers go to each of `trainer.loggers` directly.  The last
numbers of each stage, exact, are in `callback.metrics`; loggers get them as floats, at every point.

When torch.distributed is initialised (ddp), every rank's numbers are gathered at each of those
points on the job's own process group (memshim.ranks): `KEY_max`, `KEY_max_rank` (which rank had
it), `KEY_sum` are logged beside the rank's own keys, so rank 0's loggers show the worst rank.
Without the library preloaded the callback logs nothing (one warning) but still takes part in the
gathers, so ranks never wait on each other.  Importing this module imports Lightning (the
`lightning` package, else `pytorch_lightning`); `import memshim` alone does not.
"""
import warnings

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback

import memshim
from memshim import ranks

__all__ = ["MemshimCallback", "STAGES"]

STAGES = ("fit", "validate", "test", "predict")
# Lightning advises sync_dist=True for every key logged per epoch under ddp; ours are per rank on
# purpose (the gathered keys say the rest): that advice, for our keys only, is not shown.
_SYNC_ADVICE = r"It is recommended to use `self\.log\('(%s)_(mem_|runtime)" % "|".join(STAGES)


def _floats(numbers):
    """What loggers get: floats, at every point (callback.metrics keeps the exact ints)."""
    return {k: float(v) for k, v in numbers.items()}


class MemshimCallback(Callback):
    """Per-stage memory numbers of Trainer.fit/validate/test/predict into Lightning's logs."""

    def __init__(self, gather=True):
        if not any(f[1] is not None and f[1].pattern == _SYNC_ADVICE for f in warnings.filters):
            warnings.filterwarnings("ignore", message=_SYNC_ADVICE)
        self.gather = gather
        self.metrics = {}
        self._open = []
        self._warned = False

    def _active(self):
        if memshim.active():
            return True
        if not self._warned:
            warnings.warn("memshim: libmemshim.so is not preloaded; MemshimCallback logs nothing")
            self._warned = True
        return False

    def _begin(self, stage):
        if self._active() and memshim.begin(stage) == 0:
            self._open.append(stage)

    def _end(self, stage):
        if stage in self._open:
            self._open.remove(stage)
            memshim.end(stage)

    def _numbers(self, stage):
        """STAGE's keys (so far when open), and every rank's gathered (a collective when distributed)."""
        out = {}
        if memshim.active():
            try:
                flat = memshim.metrics()
            except memshim.NotActive:
                flat = {}
            out = {k: v for k, v in flat.items() if k.startswith(stage + "_mem_") or k == stage + "_runtime"}
        if self.gather:
            out.update(ranks.gather(out))
        self.metrics.update(out)
        return out

    def _log(self, pl_module, stage):
        numbers = _floats(self._numbers(stage))
        if numbers:
            pl_module.log_dict(numbers, on_step=False, on_epoch=True, sync_dist=False,
                               rank_zero_only=ranks.distributed())

    def _to_loggers(self, trainer, stage):
        numbers = _floats(self._numbers(stage))
        if numbers:
            for logger in trainer.loggers:
                logger.log_metrics(numbers, step=trainer.global_step)

    def on_fit_start(self, trainer, pl_module):
        self._begin("fit")

    def on_train_epoch_end(self, trainer, pl_module):
        self._log(pl_module, "fit")

    def on_fit_end(self, trainer, pl_module):
        self._end("fit")
        self._to_loggers(trainer, "fit")

    def on_validation_start(self, trainer, pl_module):
        self._begin("validate")

    def on_validation_epoch_end(self, trainer, pl_module):
        self._log(pl_module, "validate")

    def on_validation_end(self, trainer, pl_module):
        self._end("validate")

    def on_test_start(self, trainer, pl_module):
        self._begin("test")

    def on_test_epoch_end(self, trainer, pl_module):
        self._log(pl_module, "test")

    def on_test_end(self, trainer, pl_module):
        self._end("test")

    def on_predict_start(self, trainer, pl_module):
        self._begin("predict")

    def on_predict_end(self, trainer, pl_module):
        self._end("predict")
        self._to_loggers(trainer, "predict")

    def on_exception(self, trainer, pl_module, exception):
        for stage in list(self._open):
            self._end(stage)
