import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")


def pytest_collection_modifyitems(config, items):
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception:  # torch missing or broken: no GPU either
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

# test-only backends (crash, hang, raise, wrong output, missing dependency)
os.environ["HARNESS_PLUGINS"] = "tests.fake_backends"


@pytest.fixture
def bench_cfg(tmp_path):
    """A fast CPU config writing its records and store under tmp_path."""
    def make(**over):
        cfg = {"model": {"name": "sample", "params": {"channels": 8, "size": 7}},
               "backend": {"name": "pytorch"}, "device": {"type": "cpu"},
               "runner": {"warmup_iters": 2, "warmup_time_s": 0.0, "min_iters": 5, "min_time_s": 0.0,
                          "max_time_s": 0.5, "ci_rel_target": 1.0, "isolate": False, "timeout_s": 120},
               "tracking": {"enabled": False, "results_dir": str(tmp_path / "results")}}
        for key, value in over.items():
            node = cfg
            *path, last = key.split(".")
            for p in path:
                node = node.setdefault(p, {})
            node[last] = value
        return cfg
    return make
