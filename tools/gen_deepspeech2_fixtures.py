#!/usr/bin/python3
"""Regenerates the PyTorch reference fixtures of Shardlight's DeepSpeech2 (models/deepspeech2.h).

    /tmp/hfvenv/bin/python tools/gen_deepspeech2_fixtures.py [--out tests/fixtures/models]

Environment: PyTorch 1.13 (Debian's python3-torch) and the `safetensors` package
(`/usr/bin/python3 -m pip install --break-system-packages safetensors`, or any venv with both, such
as /tmp/hfvenv). Runs on the CPU in a few seconds; fixed seeds, so a rerun on the same PyTorch
build reproduces the file bit for bit.

The reference below is deepspeech.pytorch's model (SeanNaren/deepspeech.pytorch,
deepspeech_pytorch/model.py: SequenceWise, MaskConv, BatchRNN, Lookahead, DeepSpeech) rewritten
without its PyTorch Lightning / omegaconf / warp-ctc dependencies. What differs from it:
  * the conv channel count (32 there) is a parameter, so the fixtures stay small;
  * the spectrogram bin count is given directly instead of sample_rate * window_size / 2 + 1;
  * DeepSpeech.forward returns the logits [T, N, C] before the final transpose(0, 1) and before
    InferenceBatchSoftmax (which is the identity in training and a softmax in eval): Shardlight
    returns logits in CTC's [T, N, C] layout in both modes;
  * the loss is torch.nn.functional.ctc_loss(log_softmax(logits), ..., blank=0, reduction="sum",
    zero_infinity=True), what the current deepspeech.pytorch uses (nn.CTCLoss with those
    settings) in place of the older warp-ctc binding.
Everything else (the MaskConv loop that masks after every module, pack_padded_sequence with
lengths sorted longest first, pad_packed_sequence, the sum of the two directions, SequenceWise
BatchNorm1d over all T*N rows, padded ones included, the lookahead's zero padding) is theirs.

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
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_nn_fixtures import Writer  # noqa: E402  (the same key layout as the nn fixtures)

torch.set_num_threads(1)


# ---- the reference: deepspeech.pytorch's model ------------------------------------------------
class SequenceWise(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        t, n = x.size(0), x.size(1)
        x = x.view(t * n, -1)
        x = self.module(x)
        x = x.view(t, n, -1)
        return x


class MaskConv(nn.Module):
    def __init__(self, seq_module):
        super().__init__()
        self.seq_module = seq_module

    def forward(self, x, lengths):
        for module in self.seq_module:
            x = module(x)
            mask = torch.BoolTensor(x.size()).fill_(0)
            for i, length in enumerate(lengths):
                length = length.item()
                if (mask[i].size(2) - length) > 0:
                    mask[i].narrow(2, length, mask[i].size(2) - length).fill_(1)
            x = x.masked_fill(mask, 0)
        return x, lengths


class BatchRNN(nn.Module):
    def __init__(self, input_size, hidden_size, rnn_type=nn.LSTM, bidirectional=False,
                 batch_norm=True):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bidirectional = bidirectional
        self.batch_norm = SequenceWise(nn.BatchNorm1d(input_size)) if batch_norm else None
        self.rnn = rnn_type(input_size=input_size, hidden_size=hidden_size,
                            bidirectional=bidirectional, bias=True)
        self.num_directions = 2 if bidirectional else 1

    def forward(self, x, output_lengths):
        if self.batch_norm is not None:
            x = self.batch_norm(x)
        x = nn.utils.rnn.pack_padded_sequence(x, output_lengths)
        x, h = self.rnn(x)
        x, _ = nn.utils.rnn.pad_packed_sequence(x)
        if self.bidirectional:
            x = x.view(x.size(0), x.size(1), 2, -1).sum(2).view(x.size(0), x.size(1), -1)
        return x


class Lookahead(nn.Module):
    def __init__(self, n_features, context):
        super().__init__()
        assert context > 0
        self.context = context
        self.n_features = n_features
        self.pad = (0, self.context - 1)
        self.conv = nn.Conv1d(self.n_features, self.n_features, kernel_size=self.context,
                              stride=1, groups=self.n_features, padding=0, bias=False)

    def forward(self, x):
        x = x.transpose(0, 1).transpose(1, 2)
        x = F.pad(x, pad=self.pad, value=0)
        x = self.conv(x)
        x = x.transpose(1, 2).transpose(0, 1).contiguous()
        return x


class DeepSpeech(nn.Module):
    def __init__(self, num_classes, n_feats, hidden_size, hidden_layers, rnn_type, bidirectional,
                 conv_channels=32, lookahead_context=20):
        super().__init__()
        self.bidirectional = bidirectional
        c = conv_channels
        self.conv = MaskConv(nn.Sequential(
            nn.Conv2d(1, c, kernel_size=(41, 11), stride=(2, 2), padding=(20, 5)),
            nn.BatchNorm2d(c),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(c, c, kernel_size=(21, 11), stride=(2, 1), padding=(10, 5)),
            nn.BatchNorm2d(c),
            nn.Hardtanh(0, 20, inplace=True)
        ))
        rnn_input_size = n_feats
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 20 - 41) / 2 + 1)
        rnn_input_size = int(math.floor(rnn_input_size + 2 * 10 - 21) / 2 + 1)
        rnn_input_size *= c
        self.rnns = nn.Sequential(
            BatchRNN(input_size=rnn_input_size, hidden_size=hidden_size, rnn_type=rnn_type,
                     bidirectional=bidirectional, batch_norm=False),
            *(BatchRNN(input_size=hidden_size, hidden_size=hidden_size, rnn_type=rnn_type,
                       bidirectional=bidirectional) for x in range(hidden_layers - 1)))
        self.lookahead = nn.Sequential(
            Lookahead(hidden_size, context=lookahead_context),
            nn.Hardtanh(0, 20, inplace=True)
        ) if not bidirectional else None
        fully_connected = nn.Sequential(
            nn.BatchNorm1d(hidden_size),
            nn.Linear(hidden_size, num_classes, bias=False)
        )
        self.fc = nn.Sequential(SequenceWise(fully_connected))

    def forward(self, x, lengths):
        lengths = lengths.cpu().int()
        output_lengths = self.get_seq_lens(lengths)
        x, _ = self.conv(x, output_lengths)
        sizes = x.size()
        x = x.view(sizes[0], sizes[1] * sizes[2], sizes[3])
        x = x.transpose(1, 2).transpose(0, 1).contiguous()  # TxNxH
        for rnn in self.rnns:
            x = rnn(x, output_lengths)
        if not self.bidirectional:
            x = self.lookahead(x)
        x = self.fc(x)
        return x, output_lengths  # (differs: no transpose(0, 1) / InferenceBatchSoftmax)

    def get_seq_lens(self, input_length):
        seq_len = input_length
        for m in self.conv.modules():
            if type(m) == nn.modules.conv.Conv2d:
                seq_len = ((seq_len + 2 * m.padding[1] - m.dilation[1] * (m.kernel_size[1] - 1) - 1)
                           // m.stride[1] + 1)
        return seq_len.int()


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
