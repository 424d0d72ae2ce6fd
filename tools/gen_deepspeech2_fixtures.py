#!/usr/bin/python3
"""Regenerates the PyTorch reference fixtures of Shardlight's DeepSpeech2 (models/deepspeech2.h).

    /tmp/hfvenv/bin/python tools/gen_deepspeech2_fixtures.py [--out tests/fixtures/models]

Environment: PyTorch 1.13 (Debian's python3-torch) and the `safetensors` package
(`/usr/bin/python3 -m pip install --break-system-packages safetensors`, or any venv with both, such
as /tmp/hfvenv). Runs on the CPU in a few seconds; fixed seeds, so a rerun on the same PyTorch
build reproduces the file bit for bit.

The reference is deepspeech.pytorch's model as tools/deepspeech2_reference.py writes it (that file
lists what it changes).

Keys of deepspeech2.safetensors, per case <c> (float32 unless noted):
    <c>.param.<name>        state dict before the forward (BatchNorm statistics and affine
                            parameters randomised, so eval mode is not an identity)
    <c>.in.spect            [B, 1, F, T] spectrogram; frames past a sequence's length hold
                            noise (the model does not mask its input, as the reference)
    <c>.in.lengths          int64 [B], sorted longest first (pack_padded_sequence's default)
    <c>.in.targets          int64 [B, S] padded CTC targets (labels 1..C-1; 0 is the blank)
    <c>.in.target_lengths   int64 [B]
    <c>.<mode>.logits       [T'', B, C], mode "train" or "eval"
    <c>.<mode>.out_lengths  int64 [B]
    <c>.<mode>.loss         [] CTC loss (sum over the batch)
    <c>.<mode>.gspect       gradient of the loss w.r.t. the spectrogram
    <c>.<mode>.gparam.<n>   gradient of the loss w.r.t. parameter <n>
    <c>.train.after.<n>     every buffer after the training-mode forward (running statistics)
    default.shape.<name>    int64 [1 + ndim]: ndim, then the sizes, of each state-dict entry of
                            deepspeech.pytorch's default model (161 bins, 5 bi-LSTM layers of
                            1024, 29 labels, 32 conv channels): the names and shapes a released
                            checkpoint has (ndim first, so 0-d entries are not empty tensors)
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_nn_fixtures import Writer  # noqa: E402  (the same key layout as the nn fixtures)
from deepspeech2_reference import DeepSpeech  # noqa: E402

torch.set_num_threads(1)


# ---- the cases ---------------------------------------------------------------------------------
def randomise_batch_norms(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
                m.running_mean.normal_(0.0, 0.5)
                m.running_var.uniform_(0.5, 2.0)


def run_case(w, name, seed, rnn_type, bidirectional, lengths, T, n_feats=12, conv_channels=3,
             hidden=8, layers=2, num_classes=5, context=3):
    """The configuration here is repeated beside the case name in tests/models/test_deepspeech2.cpp."""
    torch.manual_seed(seed)
    model = DeepSpeech(num_classes, n_feats, hidden, layers, rnn_type, bidirectional,
                       conv_channels, context)
    randomise_batch_norms(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for k, v in state.items():
        w.put(f"{name}.param.{k}", v)
    B = len(lengths)
    lengths = torch.tensor(lengths, dtype=torch.int64)
    spect = torch.randn(B, 1, n_feats, T)  # padded frames keep their noise
    out_len = model.get_seq_lens(lengths).long()
    # Targets of at most half the output length (no impossible alignment), labels 1..C-1.
    target_lengths = torch.clamp((out_len + 1) // 2, min=1)
    S = int(target_lengths.max())
    targets = torch.randint(1, num_classes, (B, S))
    w.put(f"{name}.in.spect", spect)
    w.put(f"{name}.in.lengths", lengths)
    w.put(f"{name}.in.targets", targets)
    w.put(f"{name}.in.target_lengths", target_lengths)
    for mode in ("train", "eval"):
        model.load_state_dict(state)
        model.train(mode == "train")
        model.zero_grad(set_to_none=True)
        x = spect.clone().requires_grad_(True)
        logits, out_lengths = model(x, lengths)
        loss = F.ctc_loss(logits.log_softmax(-1), targets, out_lengths, target_lengths, blank=0,
                          reduction="sum", zero_infinity=True)
        loss.backward()
        w.put(f"{name}.{mode}.logits", logits)
        w.put(f"{name}.{mode}.out_lengths", out_lengths.long())
        w.put(f"{name}.{mode}.loss", loss)
        w.put(f"{name}.{mode}.gspect", x.grad)
        for k, p in model.named_parameters():
            w.put(f"{name}.{mode}.gparam.{k}", p.grad)
        if mode == "train":
            for k, b in model.named_buffers():
                w.put(f"{name}.train.after.{k}", b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "models"))
    args = ap.parse_args()
    w = Writer()
    # Bidirectional LSTM; the longest sequence fills the batch (T'' = T' = 7).
    run_case(w, "lstm_bi", 1, nn.LSTM, True, lengths=[14, 11, 6], T=14)
    # Bidirectional GRU; no sequence fills the batch, so pad_packed_sequence trims the time axis
    # to the longest output length (6 < T' = 7).
    run_case(w, "gru_bi", 2, nn.GRU, True, lengths=[12, 9, 5], T=14)
    # Unidirectional LSTM with the lookahead convolution (context 3).
    run_case(w, "lstm_lookahead", 3, nn.LSTM, False, lengths=[13, 13, 8], T=13, context=3)
    # deepspeech.pytorch's default model: names and shapes only.
    torch.manual_seed(0)
    full = DeepSpeech(29, 161, 1024, 5, nn.LSTM, True)
    for k, v in full.state_dict().items():
        w.put(f"default.shape.{k}", torch.tensor([v.dim()] + list(v.shape), dtype=torch.int64))
    # Parameter counts the C++ registry test asserts (deepspeech2, deepspeech2_small).
    small = DeepSpeech(29, 81, 128, 2, nn.GRU, True, conv_channels=16)
    for name, m in (("deepspeech2", full), ("deepspeech2_small", small)):
        print(f"{name}: {len(m.state_dict())} state-dict entries, "
              f"{sum(p.numel() for p in m.parameters())} parameters")
    os.makedirs(args.out, exist_ok=True)
    w.save(os.path.join(args.out, "deepspeech2.safetensors"))


if __name__ == "__main__":
    main()
