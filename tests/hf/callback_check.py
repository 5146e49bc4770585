"""MemshimCallback with HF's own tracker on (skip_memory_metrics=False): where its keys land in
TensorBoard's groups (transformers' rewrite_logs, as TensorBoardCallback files them) and in
log_metrics's order.  Runs under the shim; prints one line per fact."""
import types

from transformers.integrations.integration_utils import rewrite_logs

import memshim
from memshim.hf import MemshimCallback

with memshim.stage("eval"):
    kept = bytearray(3 << 20)
with memshim.stage("train"):
    more = bytearray(2 << 20)
cb = MemshimCallback()
args = types.SimpleNamespace(skip_memory_metrics=False)
state = types.SimpleNamespace(log_history=[])
for split, logs in (("eval", {"eval_loss": 1.0, "eval_runtime": 0.5}),
                    ("train", {"train_loss": 1.0, "train_runtime": 0.5})):
    cb.on_log(args, state, None, logs=logs)
    ours = sorted(k for k in rewrite_logs(logs) if "memshim" in k)
    print(split, "tensorboard", " ".join(ours))
