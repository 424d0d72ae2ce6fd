#!/usr/bin/python3
"""Regenerates the PyTorch/torchvision reference fixtures of the ResNet tests (models/resnet.h).

    /usr/bin/python3 tools/gen_resnet_fixtures.py [--out tests/fixtures/models]

Environment: Debian's python3-torch 1.13 and python3-torchvision 0.14 (what the committed files
were made with); no other package (safetensors is written with the standard-library writer of
tools/gen_op_fixtures.py). Writes two files:

resnet_torchvision_names.txt
    torchvision's own resnet18, resnet34 and resnet50 (1000 classes), and resnet_fashion (the
    SmallResNet below with BasicBlock, blocks [1, 1, 1], 10 classes, 1 channel, width 16, the
    small-image stem; models/resnet.h): for each, a line
    "model <name> <number of parameter elements>" and then one line per state-dict entry,
    "<dotted name> <dim> <dim> ..." (no dims for a 0-d tensor such as num_batches_tracked), in
    state-dict order. The C++ test compares our factories' state dicts with these lists.

resnet.safetensors
    Small ResNets built here from torchvision's own BasicBlock / Bottleneck classes and
    ResNet._make_layer (so the residual blocks, their downsample rule and the stride placement
    are torchvision's), at a small width, with the layout of models/resnet.h: a stage count
    given by the blocks list (layer4 is nn.Identity when there are 3, and so on) and the
    small-image stem (conv1 3x3 stride 1, no max pool) as an option. Keys per case, as
    tools/gen_nn_fixtures.py:
        <case>.param.<name>    state dict before forward (BatchNorm weights, biases and running
                               statistics randomised so that none is trivially 1 or 0)
        <case>.in.0            the input x [N, C, H, W]
        <case>.out.0           logits
        <case>.gout.0          the upstream gradient of the logits (random)
        <case>.gin.0           dL/dx for L = sum(logits * gout)
        <case>.gparam.<name>   dL/d(parameter)
        <case>.after.<name>    every BatchNorm buffer after the forward (train-mode cases)
    The configuration of each case is in CASES below and repeated in the C++ test beside its
    name. Every case is seeded, so rerunning reproduces the files bit for bit on this build.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
from torchvision.models import resnet18, resnet34, resnet50
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_op_fixtures import write_safetensors  # noqa: E402

torch.set_num_threads(1)


class SmallResNet(ResNet):
    """torchvision's ResNet with a base width, a stage count and an optional small-image stem.

    Reuses ResNet._make_layer and ResNet.forward unchanged; only the constructor differs (the
    torchvision one hard-codes 64 channels and 4 stages).
    """

    def __init__(self, block, layers, num_classes, in_channels, width, small_stem):
        nn.Module.__init__(self)
        self._norm_layer = nn.BatchNorm2d
        self.inplanes = width
        self.dilation = 1
        self.groups = 1
        self.base_width = 64
        if small_stem:
            self.conv1 = nn.Conv2d(in_channels, width, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if small_stem else nn.MaxPool2d(3, 2, 1)
        for i in range(4):
            name = f"layer{i + 1}"
            if i < len(layers):
                setattr(self, name, self._make_layer(block, width * 2**i, layers[i],
                                                     stride=1 if i == 0 else 2))
            else:
                setattr(self, name, nn.Identity())
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 2**(len(layers) - 1) * block.expansion, num_classes)


# name: (block, blocks per stage, num_classes, in_channels, width, small_stem, input shape, train)
CASES = {
    # torchvision's four stages and stem; 36x36 leaves 2x2 maps at layer4 (8 values per channel
    # for the train-mode BatchNorm there)
    "basic_imagenet_train": (BasicBlock, [1, 1, 1, 1], 5, 3, 2, False, (2, 3, 36, 36), True),
    # three stages, two blocks in the first (a block without downsample), one grey channel
    "basic_small_eval": (BasicBlock, [2, 1, 1], 10, 1, 4, True, (2, 1, 12, 12), False),
    # layer1.0 has a downsample from the expansion alone (stride 1); layer2.1 none
    "bottleneck_small_train": (Bottleneck, [1, 2, 1], 6, 3, 2, True, (4, 3, 8, 8), True),
    "bottleneck_imagenet_eval": (Bottleneck, [1, 1, 1, 1], 4, 3, 2, False, (2, 3, 24, 24), False),
}


def randomise_batch_norms(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.2)
                m.running_mean.normal_(0.0, 0.2)
                m.running_var.uniform_(0.5, 2.0)


def gen_cases(tensors, seed0=100):
    for k, (name, (block, layers, classes, cin, width, small, shape, train)) in enumerate(
            CASES.items()):
        torch.manual_seed(seed0 + k)
        model = SmallResNet(block, layers, classes, cin, width, small)
        randomise_batch_norms(model)
        model.train(train)
        for key, v in model.state_dict().items():
            tensors[f"{name}.param.{key}"] = v.clone()
        x = torch.randn(*shape, requires_grad=True)
        tensors[f"{name}.in.0"] = x.detach().clone()
        y = model(x)
        g = torch.randn_like(y)
        (y * g).sum().backward()
        tensors[f"{name}.out.0"] = y.detach().clone()
        tensors[f"{name}.gout.0"] = g
        tensors[f"{name}.gin.0"] = x.grad.clone()
        for key, p in model.named_parameters():
            tensors[f"{name}.gparam.{key}"] = p.grad.clone()
        if train:
            for key, b in model.named_buffers():
                tensors[f"{name}.after.{key}"] = b.clone()
        print(f"{name}: {sum(p.numel() for p in model.parameters())} parameters, "
              f"logits {list(y.shape)}")


def write_names(path):
    with open(path, "w") as f:
        fashion = lambda: SmallResNet(BasicBlock, [1, 1, 1], 10, 1, 16, True)
        for name, ctor in [("resnet18", resnet18), ("resnet34", resnet34),
                           ("resnet50", resnet50), ("resnet_fashion", fashion)]:
            model = ctor()  # random weights (no download): only names and shapes are kept
            count = sum(p.numel() for p in model.parameters())
            f.write(f"model {name} {count}\n")
            for key, v in model.state_dict().items():
                f.write(" ".join([key] + [str(d) for d in v.shape]) + "\n")
    print(f"wrote {path}: {os.path.getsize(path)} bytes")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "models"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write_names(os.path.join(args.out, "resnet_torchvision_names.txt"))
    tensors = {}
    gen_cases(tensors)
    path = os.path.join(args.out, "resnet.safetensors")
    write_safetensors(path, tensors)
    print(f"wrote {path}: {len(tensors)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
