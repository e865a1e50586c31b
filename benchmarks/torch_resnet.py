"""The PyTorch side of benchmarks.resnet: t2t's ResNet (the `resnet` model of an hparams
set) written in torch.nn, and its training step. Never a t2t dependency: `pip install
torch==2.13.0` to benchmark against it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Step = Callable[[], tuple[float, float]]


def _conv(c_in: int, c_out: int, kernel: int, stride: int) -> Any:
    """A bias-free convolution; a strided one pads (k-1)//2 before and k//2 after, as
    t2t's fixed padding."""
    from torch import nn

    if stride == 1:
        return nn.Conv2d(c_in, c_out, kernel, 1, padding="same", bias=False)
    total = kernel - 1
    return nn.Sequential(nn.ZeroPad2d((total // 2, total - total // 2) * 2),
                         nn.Conv2d(c_in, c_out, kernel, stride, bias=False))


def _norm(channels: int, zero: bool = False) -> Any:
    """Batch norm with t2t's epsilon and decay 0.9; `zero`: its scale starts at zero."""
    from torch import nn

    layer = nn.BatchNorm2d(channels, eps=1e-5, momentum=0.1)  # t2t's decay 0.9
    if zero:
        nn.init.zeros_(layer.weight)
    return layer


def _block_classes() -> tuple[type, type]:
    """(Residual, Bottleneck): t2t's residual_block and bottleneck_block as nn.Modules."""
    from torch import nn
    from torch.nn import functional as F

    class Residual(nn.Module):  # pre-activation, t2t's residual_block
        def __init__(self, c_in, filters, stride, projection):
            super().__init__()
            self.bn1, self.bn2 = _norm(c_in), _norm(filters)
            self.projection = (nn.Sequential(_conv(c_in, filters, 1, stride), _norm(filters))
                               if projection else None)
            self.conv1 = _conv(c_in, filters, 3, stride)
            self.conv2 = _conv(filters, filters, 3, 1)

        def forward(self, x):
            shortcut = x
            x = F.relu(self.bn1(x))
            if self.projection is not None:
                shortcut = self.projection(x)
            return self.conv2(F.relu(self.bn2(self.conv1(x)))) + shortcut

    class Bottleneck(nn.Module):  # post-activation, t2t's bottleneck_block
        def __init__(self, c_in, filters, stride, projection, ratio, final):
            super().__init__()
            out = ratio * filters
            self.projection = (nn.Sequential(_conv(c_in, out, 1, stride), _norm(out))
                               if projection else None)
            self.conv1, self.bn1 = _conv(c_in, filters, 1, 1), _norm(filters)
            self.conv2, self.bn2 = _conv(filters, filters, 3, stride), _norm(filters)
            self.conv3, self.bn3 = _conv(filters, out, 1, 1), _norm(out, zero=final)

        def forward(self, x):
            shortcut = self.projection(x) if self.projection is not None else x
            y = F.relu(self.bn1(self.conv1(x)))
            y = F.relu(self.bn2(self.conv2(y)))
            return F.relu(self.bn3(self.conv3(y)) + shortcut)

    return Residual, Bottleneck


def resnet_model(hp: Any, num_classes: int) -> Any:
    """The nn.Module of hparams set `hp`'s ResNet: uint8 images [batch, 3, H, W] -> logits
    [batch, num_classes]."""
    from torch import nn

    residual, bottleneck = _block_classes()

    class Resnet(nn.Module):
        def __init__(self):
            super().__init__()
            stem = hp.filter_sizes[0]
            layers: list[nn.Module] = [_conv(3, stem, 7, 1 if hp.is_cifar else 2), _norm(stem),
                                       nn.ReLU()]
            if not hp.is_cifar:  # 3x3 stride-2 SAME max pool
                layers.append(nn.MaxPool2d(3, 2, padding=1))
            channels = stem
            ratios = list(hp.get("bottleneck_ratios") or [4, 4, 4, 4])
            for i in range(3 if hp.is_cifar else 4):
                filters = hp.filter_sizes[i + 1]
                for b in range(hp.layer_sizes[i]):
                    stride = (1 if i == 0 else 2) if b == 0 else 1
                    if hp.block_fn == "bottleneck":
                        final = b > 0 and b + 1 == hp.layer_sizes[i]
                        layers.append(bottleneck(channels, filters, stride, b == 0, ratios[i],
                                                 final))
                        channels = ratios[i] * filters
                    else:
                        layers.append(residual(channels, filters, stride, b == 0))
                        channels = filters
            self.body = nn.Sequential(*layers)
            self.top = nn.Linear(channels, num_classes)

        def forward(self, images):
            x = self.body(images.float() / 255.0)
            return self.top(x.mean(dim=(2, 3)))

    return Resnet()


def train_step(hp: Any, batch: int, image_size: int, num_classes: int, learning_rate: float,
               precision: str = "float32", threads: int | None = None,
               channels_last: bool = True) -> Step:
    """A training step of `resnet_model(hp)` on a constant random batch of `batch` images
    of image_size x image_size x 3: SGD with the set's momentum, Nesterov and weight decay
    at a constant `learning_rate`; bfloat16 under autocast. Returns (images, images)."""
    import torch
    from torch.nn import functional as F

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = resnet_model(hp, num_classes).train().to(memory_format=layout)
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate,
                                momentum=hp.optimizer_momentum_momentum,
                                nesterov=bool(hp.optimizer_momentum_nesterov),
                                weight_decay=float(hp.weight_decay))
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.integers(0, 256, [batch, 3, image_size, image_size],
                                           dtype=np.uint8))
    images = images.contiguous(memory_format=layout)
    labels = torch.from_numpy(rng.integers(0, num_classes, [batch]))
    autocast = precision == "bfloat16"

    def step() -> tuple[float, float]:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(images)
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=hp.label_smoothing)
        loss.backward()
        optimizer.step()
        loss.item()
        return float(batch), float(batch)

    step.model = model  # type: ignore[attr-defined]  (for the parity test)
    return step
