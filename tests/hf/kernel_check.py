"""A notebook kernel from `memshim kernel install`: cells open stages and read memshim.metrics();
Jupyter ends it with SIGTERM, and its children's files are not in the notebook's folder.
Usage: kernel_check.py PREFIX FORMATTER (a scratch directory for the kernelspec, memshim-format).
Prints one line per fact."""
import json
import os
import signal
import subprocess
import sys
import time

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
    # what jupyter_client does to a kernel that does not end in time after a shutdown request
    km.signal_kernel(signal.SIGTERM)
    for _ in range(600):
        if not km.is_alive():
            break
        time.sleep(0.05)
    km.shutdown_kernel(now=True)
files = [f for f in os.listdir(prefix) if f.startswith("kernel_") and f.endswith(".json")]
print("kernel metrics files", len(files))
children = os.path.join(prefix, "share", "jupyter", "kernels", "memshim-test", "children")
print("children's files", "in the kernelspec" if os.listdir(children) else "missing")
print("files in the notebook's folder", len([f for f in os.listdir(".") if f.startswith("kernel_")]))
if files:
    with open(os.path.join(prefix, files[0])) as f:
        doc = json.load(f)
    print("kernel file complete", doc.get("complete"), "signal", doc.get("signal"))
    out = subprocess.run([sys.argv[2], os.path.join(prefix, files[0])], capture_output=True, text=True).stdout
    print("formatter", out.splitlines()[0].split(": ", 2)[-1] if out else "nothing")
