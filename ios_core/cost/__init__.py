"""Cost models for the IOS optimizer: ``measured`` (timed on the device, cached
persistently) and ``analytic`` (deterministic); both give the critical-path and
sum-of-ops bounds of a graph."""

from .analytic import DEVICES, AnalyticCostModel, DeviceSpec
from .bounds import bounds
from .calibrated import CalibratedCostModel
from .measured import CostCache, MeasuredCostModel
from .signature import signature, stage_nodes

__all__ = ["DEVICES", "AnalyticCostModel", "CalibratedCostModel", "CostCache", "DeviceSpec", "MeasuredCostModel",
           "bounds", "signature", "stage_nodes"]
