"""What makes a training at a seed give the same weights on every machine: the seeds, and a
fixed number of threads (a float reduction split across threads sums in another order)."""

from __future__ import annotations

import contextlib
import importlib
import os
import random
from collections.abc import Iterator

from harness.errors import HarnessError

#: The intra-op threads torch (and NumPy's BLAS) train on, whatever the machine has. A float
#: reduction split across threads sums in another order with another thread count (torch's
#: LayerNorm backward keeps a partial sum per thread, for one), so the same seed trained other
#: weights on a machine with other cores (issue 31: qagnn). 2 is what the published trained rows
#: trained with (torch's default on their 2-core machine), so a retraining still reproduces them.
TRAINING_THREADS = 2
#: Another thread count for training (faster on a big machine, or 1 on a shared one): it enters
#: the checkpoint key, since it trains other weights.
THREADS_VARIABLE = "HARNESS_TRAIN_THREADS"


def training_threads() -> int:
    """The threads a training runs on: ``$HARNESS_TRAIN_THREADS``, else :data:`TRAINING_THREADS`."""
    value = os.environ.get(THREADS_VARIABLE, "").strip()
    if not value:
        return TRAINING_THREADS
    if not value.isdigit() or int(value) < 1:
        raise HarnessError(f"{THREADS_VARIABLE}={value!r}: give a whole number of threads, 1 or more")
    return int(value)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and (when installed) PyTorch, with deterministic kernels (a training's
    threads are fixed apart: :func:`fixed_threads`)."""
    import numpy as np  # numerics load when something trains, not with the module

    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch  # optional: the core does not depend on torch
    except ImportError:
        return
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextlib.contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """Torch and NumPy's BLAS compute on ``threads`` threads inside (see :data:`TRAINING_THREADS`);
    the counts they had are put back after."""
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(ImportError):  # optional (untyped): NumPy's BLAS, where threadpoolctl reaches it
            threadpoolctl = importlib.import_module("threadpoolctl")
            stack.enter_context(threadpoolctl.threadpool_limits(limits=threads, user_api="blas"))
        with contextlib.suppress(ImportError):  # optional: the core does not depend on torch
            import torch

            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(threads)
        yield
