"""The core config groups check their values as their dataclasses are made: directly, through
OmegaConf.to_object of a composed config, and (tests/test_runner.py) from the command line."""

import pytest
from omegaconf import OmegaConf

from harness.config import BenchConfig, ConfigError, DeviceConfig, RunnerConfig, validate
from harness.job import compose
from harness.spec import resolve_run


def test_the_defaults_pass():
    RunnerConfig(), DeviceConfig(), BenchConfig()  # as Hydra's ConfigStore makes them at registration
    typed = validate(compose(["device=cpu"]))
    assert isinstance(typed, BenchConfig) and isinstance(typed.runner, RunnerConfig) and typed.batch == 1
    assert typed.backend.name == "pytorch" and typed.device.type.value == "cpu"


@pytest.mark.parametrize("make,message", [
    (lambda: RunnerConfig(max_iters=0), "runner.max_iters=0 must be >= 1 and >= runner.min_iters=100"),
    (lambda: RunnerConfig(min_iters=50, max_iters=10), "runner.max_iters=10 must be >= 1 and >= runner.min_iters=50"),
    (lambda: RunnerConfig(warmup_iters=-1), "runner.warmup_iters=-1 must be >= 0"),
    (lambda: RunnerConfig(min_time_s=-1.0), "runner.min_time_s=-1.0 must be >= 0"),
    (lambda: RunnerConfig(timeout_s=0.0), "runner.max_time_s and runner.timeout_s must be positive"),
    (lambda: RunnerConfig(percentiles=[0.0]), "runner.percentiles: 0.0 is not a percentile strictly between"),
    (lambda: DeviceConfig(clock="fast"), "device.clock='fast' is invalid: use base, max or a frequency in MHz"),
    (lambda: BenchConfig(batch=0), "batch=0 is invalid: the batch size must be a positive integer"),
])
def test_a_group_refuses_a_bad_value_when_made(make, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
        make()


@pytest.mark.parametrize("override,message", [
    ("batch=0", "batch=0 is invalid"), ("runner.max_iters=0", "runner.max_iters=0 must be >= 1"),
    ("device.clock=1.5GHz", "device.clock='1.5GHz' is invalid"),
])
def test_to_object_of_the_composed_config_runs_the_checks(override, message):
    cfg = compose(["device=cpu", override])  # Hydra composes it checking types only
    with pytest.raises(ConfigError, match=message):
        OmegaConf.to_object(cfg)
    group = override.partition("=")[0].rpartition(".")[0]
    if group:  # and so does the group alone
        with pytest.raises(ConfigError, match=message):
            OmegaConf.to_object(cfg[group])


def test_a_value_left_missing_is_one_line():
    cfg = compose(["model=onnx", "device=cpu"])
    with pytest.raises(ConfigError, match=r"^model=onnx needs the file: add model.path="):
        resolve_run(cfg)
    cfg = compose(["model=inception_v3", "device=cpu"])
    cfg.runner.seed = "???"
    with pytest.raises(ConfigError, match=r"^runner.seed has no value \(\?\?\?\)"):
        validate(cfg)


def test_the_vendor_max_autotune_preset_composes_to_its_label():
    from harness_plugins.pytorch.backend import PyTorchBackend

    cfg = validate(compose(["device=cpu", "backend=pytorch_max_autotune_vendor"]))
    assert (cfg.backend.compile_mode, cfg.backend.autotune_conv_backends, cfg.backend.autotune_gemm_backends) == (
        "max-autotune", "ATEN", "ATEN")
    assert PyTorchBackend.label_of(cfg.backend) == "TorchCompile-MA-Vendor"


@pytest.mark.parametrize("override,first", [("backend.mdoe=x", "mode"), ("runner.min_tme_s=1", "min_time_s")])
def test_a_typo_in_a_key_lists_the_groups_keys_closest_first(override, first):
    with pytest.raises(ConfigError, match=rf"Key '\w+' not in '\w+'; valid keys: {first}, "):
        compose([override])
