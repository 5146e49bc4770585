"""The approach of the project's starting point, reproduced for comparison: Hugging Face's TrainerMemoryTracker (CPU part).

RSS is read (psutil when importable, else /proc/self/statm, which is what psutil reads) by a
peak-sampling thread that loops without sleeping, started and stopped around each stage.
"""
import gc
import os
import threading

try:
    import psutil
    _proc = psutil.Process()

    def cpu_mem_used():
        return _proc.memory_info().rss
except ImportError:
    _page = os.sysconf("SC_PAGE_SIZE")

    def cpu_mem_used():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _page


class MemoryTracker:
    def __init__(self):
        self.metrics = {}
        self.peak_monitoring = False

    def _peak_monitor(self):
        self.cpu_mem_used_peak = -1
        while True:
            self.cpu_mem_used_peak = max(cpu_mem_used(), self.cpu_mem_used_peak)
            if not self.peak_monitoring:
                break

    def start(self, stage):
        self.stage = stage
        gc.collect()
        self.cpu_mem_used_at_start = cpu_mem_used()
        self.peak_monitoring = True
        self.thread = threading.Thread(target=self._peak_monitor, daemon=True)
        self.thread.start()

    def stop(self):
        self.peak_monitoring = False
        gc.collect()
        end = cpu_mem_used()
        self.thread.join()
        peak = max(self.cpu_mem_used_peak, end)
        self.metrics[f"{self.stage}_mem_cpu_alloc_delta"] = end - self.cpu_mem_used_at_start
        self.metrics[f"{self.stage}_mem_cpu_peaked_delta"] = max(0, peak - end)
