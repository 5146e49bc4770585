"""A notebook kernel from `memshim kernel install`: cells open stages and read memshim.metrics().
Usage: kernel_check.py PREFIX (a scratch directory for the kernelspec).  Prints one line per fact."""
import os
import subprocess
import sys

from jupyter_client.manager import start_new_kernel

prefix = sys.argv[1]
subprocess.check_call([sys.executable, "-m", "memshim", "kernel", "install", "--prefix", prefix,
                       "--name", "memshim-test", "--output", os.path.join(prefix, "kernel_%p.json")])
os.environ["JUPYTER_PATH"] = os.path.join(prefix, "share", "jupyter")  # where Jupyter looks first
km, kc = start_new_kernel(kernel_name="memshim-test", startup_timeout=120)
cells = [
    "import memshim\nprint('active', memshim.active())",
    "with memshim.stage('cell'):\n    kept = bytearray(6 << 20)",
    "print('cell MiB', memshim.metrics()['cell_mem_cpu_alloc_delta'] >> 20)",
]
try:
    for code in cells:
        out = []
        reply = kc.execute_interactive(code, timeout=60, output_hook=lambda m: out.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        print(reply["content"]["status"], "".join(out).strip())
finally:
    kc.stop_channels()
    km.shutdown_kernel(now=False)
files = [f for f in os.listdir(prefix) if f.startswith("kernel_") and f.endswith(".json")]
print("kernel metrics files", len(files))
