#!/usr/bin/python3
"""PyTorch side of tools/bench_zoo.cpp: one training step of the same models with the same
protocol, "case<TAB>ms" lines (tools/bench_nn.py's command line and timing: one warm-up step,
then the median of R steps).

    /tmp/hfvenv/bin/python tools/bench_zoo.py [--threads N] [--filter SUBSTR | --case NAME] [--reps R]

A step: optimizer.zero_grad(set_to_none=True), forward in training mode, the loss, backward,
AdamW(lr=1e-3, weight_decay=0.01, foreach=True).step() (1.13's multi-tensor implementation,
which took 30 ms a step on ResNet-18's parameters against 46 ms for its single-tensor default,
and 51 against 52 ms on ResNet-50's, at 1 thread here).
The models: torchvision's resnet18 / resnet50; Hugging Face transformers' BertForMaskedLM
(4.30, loss from `labels` as HF computes it: logits at every position), whose cases print n/a
where transformers is missing (/usr/bin/python3: tools/bench_zoo.sh says how to make the venv);
deepspeech.pytorch's DeepSpeech2 as tools/deepspeech2_reference.py writes it; the FashionCNN of
models/fashion_cnn.h. Inputs are drawn as tools/bench_zoo.cpp draws them (not the same values).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_nn import main  # noqa: E402  (the shared command line and timing)
from deepspeech2_reference import DeepSpeech  # noqa: E402


def train_step(model, loss):
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)

    def it():
        opt.zero_grad(set_to_none=True)
        loss(model).backward()
        opt.step()
    return it


def classifier_step(model, b, c, hw, classes):
    x = torch.randn(b, c, hw, hw)
    y = torch.randint(0, classes, (b,))
    return train_step(model, lambda m: F.cross_entropy(m(x), y))


def bert_mlm_step(b, length, **config):
    try:
        from transformers import BertConfig, BertForMaskedLM
    except ImportError as e:
        print(f"bench_zoo.py: BERT needs Hugging Face transformers ({e})", file=sys.stderr)
        return None
    cfg = BertConfig(**config)  # defaults: bert-base-uncased's
    model = BertForMaskedLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (b, length))
    labels = torch.where(torch.rand(b, length) < 0.15, ids, torch.full_like(ids, -100))
    return train_step(model, lambda m: m(input_ids=ids, labels=labels).loss)


def deepspeech2_small_step(b, frames):
    # deepspeech2_small: 81 bins, 2 bidirectional GRU layers of 128, 29 classes, 16 channels
    model = DeepSpeech(29, 81, 128, 2, nn.GRU, True, conv_channels=16)
    spect = torch.randn(b, 1, 81, frames)
    lengths = torch.tensor([frames - (frames // 4) * i // max(b - 1, 1) for i in range(b)])
    out_lengths = model.get_seq_lens(lengths).long()
    target_lengths = out_lengths // 4
    targets = torch.randint(1, 29, (b, int(target_lengths[0])))

    def loss(m):
        logits, out = m(spect, lengths)
        return F.ctc_loss(logits.log_softmax(-1), targets, out.long(), target_lengths, blank=0,
                          reduction="mean", zero_infinity=True)
    return train_step(model, loss)


def zoo_cases():
    import torchvision

    def fashion_cnn():  # models/fashion_cnn.h, by name
        m = nn.Module()
        m.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.MaxPool2d(2))
        m.classifier = nn.Sequential(nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                                     nn.Linear(128, 10))
        m.forward = lambda x: m.classifier(m.features(x))
        return m

    return [
        ("resnet18 b8 3x224x224", 3,
         lambda: classifier_step(torchvision.models.resnet18(), 8, 3, 224, 1000)),
        ("resnet50 b8 3x112x112", 3,
         lambda: classifier_step(torchvision.models.resnet50(), 8, 3, 112, 1000)),
        ("bert_mini_mlm b8 L128", 3,
         lambda: bert_mlm_step(8, 128, hidden_size=256, num_hidden_layers=4,
                               num_attention_heads=4, intermediate_size=1024)),
        ("bert_base b8 L128", 1, lambda: bert_mlm_step(8, 128)),
        ("deepspeech2_small b16 T500", 3, lambda: deepspeech2_small_step(16, 500)),
        ("fashion_cnn b128 1x28x28", 10, lambda: classifier_step(fashion_cnn(), 128, 1, 28, 10)),
    ]


if __name__ == "__main__":
    main(zoo_cases)
