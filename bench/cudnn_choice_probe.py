"""Does cuDNN's per-process plan choice (torch.backends.cudnn.benchmark) move a CUDA graph's latency, and does other
work on the GPU while it times its candidates move it more? One fresh process per call (issue 55/56, BENCHMARKS.md):
    python bench/cudnn_choice_probe.py resnet18 benchmark|heuristic|busy
``busy``: benchmark mode while another process runs matrix products on the GPU during the first call (the capture),
stopped before the timing, as a sweep's other job can. Prints one CSV line: arch, mode, median and p10/p90 ms."""
import subprocess
import sys
import time

import timm
import torch

arch, mode = sys.argv[1], sys.argv[2]
torch.backends.cudnn.benchmark = mode != "heuristic"
model = timm.create_model(arch).eval().cuda().half().to(memory_format=torch.channels_last)
x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
busy = None
if mode == "busy":
    busy = subprocess.Popen([sys.executable, "-c", "import torch\na = torch.randn(8192, 8192, device='cuda', "
                             "dtype=torch.half)\nwhile True:\n    a @ a"])
    time.sleep(6)
with torch.inference_mode():
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        model(x)
if busy is not None:
    busy.kill()
    busy.wait()
    time.sleep(1)
for _ in range(500):
    g.replay()
times = []
for _ in range(2000):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    times.append(a.elapsed_time(b))
times.sort()
n = len(times)
print(f"{arch},{mode},{times[n // 2]:.4f},{times[n // 10]:.4f},{times[9 * n // 10]:.4f}", flush=True)
