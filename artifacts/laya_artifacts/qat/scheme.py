"""The artifact's int8 scheme as PyTorch fake quantization, for the quantization-aware fine-tune (`qat/finetune.py`).

Each encoder MatMul the `encoder` candidate quantizes (`quantize._PARTS`, the same regexes, mapped from module
to node names) becomes a `torch.ao.nn.qat.Linear`, PyTorch's own QAT module, which matches onnxruntime's
dynamic quantization (`quantize.quantize_candidate`, `dynamic-int8`):
- weights: a per-channel symmetric `FakeQuantize` over the output channel (torch's `[out, in]` axis 0 is the
  exported MatMul's axis 1, as `quantize_dynamic` quantizes it), range [-64, 64]: the 7-bit `reduce_range`
  that makes int8 kernel-exact on every x86 class. The observer's averaging constant is 1, so the scale is
  the current weights' absmax / 64, as the quantizer computes it from the weights it is given;
- inputs: torch's `default_dynamic_fake_quant` (uint8, per tensor, the current tensor's min/max with zero
  included: onnxruntime's `DynamicQuantizeLinear`), padding included.
Embeddings and the decision head stay FP32 in the artifact and here.
`trainable_names` says which parameters a fine-tune trains under it.
"""

from __future__ import annotations

import re
from typing import Any

from laya_artifacts.search.quantize import _LAYER, _PARTS, REDUCE_RANGE

WEIGHT_RANGE = (-64, 64) if REDUCE_RANGE else (-127, 127)
TRAINABLE = ("head", "all")  # what a fine-tune may train (`trainable_names`)


def _node_name(module: str) -> str:
    """The exported MatMul's node name for an encoder `nn.Linear` (`export/onnx_export.py`'s TorchScript names)."""
    path = "/" + module.replace(".", "/")
    return re.sub(r"/(layer|layers)/(\d+)/", r"/\1.\2/", path) + "/MatMul"


def quantized_linears(model: Any) -> list[str]:
    """The encoder `nn.Linear` modules whose MatMul the `encoder` candidate quantizes (`quantize._PARTS`)."""
    import torch

    names = []
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or not name.startswith("encoder."):
            continue
        node = _node_name(name)
        if _LAYER.match(node) and any(pattern.search(node) for _, pattern in _PARTS):
            names.append(name)
    return names


def _qconfig() -> Any:
    import torch
    from torch.ao.quantization import FakeQuantize, MovingAveragePerChannelMinMaxObserver, QConfig
    from torch.ao.quantization.fake_quantize import default_dynamic_fake_quant

    weight = FakeQuantize.with_args(observer=MovingAveragePerChannelMinMaxObserver, averaging_constant=1.0,
                                    quant_min=WEIGHT_RANGE[0], quant_max=WEIGHT_RANGE[1], dtype=torch.qint8,
                                    qscheme=torch.per_channel_symmetric, ch_axis=0)
    return QConfig(activation=default_dynamic_fake_quant, weight=weight)


def attach_fake_quant(model: Any) -> list[str]:
    """Swap the quantized encoder Linears for QAT Linears (weights) with a dynamic input fake quant."""
    import torch.ao.nn.qat as nnqat

    qconfig = _qconfig()
    names = quantized_linears(model)
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        linear = getattr(parent, child)
        linear.qconfig = qconfig
        fake = nnqat.Linear.from_float(linear)
        fake.input_fake_quant = qconfig.activation()
        fake.register_forward_pre_hook(lambda module, args: (module.input_fake_quant(args[0]), *args[1:]))
        setattr(parent, child, fake)
    return names


def _encoder_layer(name: str) -> int | None:
    found = re.search(r"\.(?:layer|layers)\.(\d+)\.", name)
    return int(found.group(1)) if found else None


def trainable_names(model: Any, trainable: str, train_layers: int = 0) -> list[str]:
    """The parameters a fine-tune changes: the decision head, the encoder's norms and biases, and all of the
    top `train_layers` encoder layers (`head`); or every encoder tensor but the embedding tables (`all`)."""
    if trainable not in TRAINABLE:
        raise ValueError("unknown trainable set %r; choose one of %s" % (trainable, ", ".join(TRAINABLE)))
    layers = [i for i in (_encoder_layer(n) for n, _ in model.named_parameters()) if i is not None]
    top = max(layers, default=-1) - train_layers + 1
    names = []
    for name, param in model.named_parameters():
        layer = _encoder_layer(name) if name.startswith("encoder.") else None
        if not name.startswith("encoder."):
            names.append(name)
        elif ".embeddings." in name and param.ndim > 1:
            continue  # the embedding tables stay the original's (FP32 in the artifact, not quantized)
        elif param.ndim == 1 or trainable == "all" or (layer is not None and train_layers and layer >= top):
            names.append(name)
    return names
