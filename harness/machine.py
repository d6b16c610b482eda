"""The machine a run or a training ran on: the device (``--device auto`` resolved) and the
hardware that rows and checkpoints record."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError


class Hardware(BaseModel):
    model_config = ConfigDict(extra="forbid")
    device: str
    cpu: str
    gpu: str | None = None
    executor: dict[str, Any] | None = Field(
        None,
        description="where the work ran when not in the harness's own process (--executor ray: the executor's "
        "settings and the cluster); device is then the workers' and cpu the driver's. Not part of the "
        "configuration hash: the results are the same",
    )


#: Device files a GPU driver torch can use creates (NVIDIA; AMD's ROCm; WSL's GPU bridge).
_GPU_DRIVER_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def _gpu_driver_present() -> bool:
    return any(os.path.exists(path) for path in _GPU_DRIVER_FILES)


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``."""
    if device not in ("auto", "cpu", "cuda"):
        raise HarnessError(f"--device must be auto, cpu or cuda, not {device!r}")
    if device == "cpu":
        return device
    if device == "auto" and not _gpu_driver_present():
        return "cpu"  # importing torch to learn this costs seconds on every run
    try:  # seconds to import, and optional: only when a GPU may be used
        import torch

        available = torch.cuda.is_available()
    except ImportError:
        available = False
    if device == "cuda" and not available:
        raise HarnessError("--device cuda: no CUDA device is available (torch missing or no GPU)")
    return "cuda" if available else "cpu"


def hardware(device: str) -> Hardware:
    """This machine: the CPU's model name (``/proc/cpuinfo``; elsewhere ``platform``, which on
    Linux would start a ``uname -p`` process on every run) and core count, and the GPU on cuda."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpu = cpu or platform.processor() or platform.machine()
    gpu = None
    if device == "cuda":
        import torch  # imported already: a run on cuda has resolved its device

        gpu = torch.cuda.get_device_name(0)
    return Hardware(device=device, cpu=f"{cpu} ({os.cpu_count()} cores)", gpu=gpu)
