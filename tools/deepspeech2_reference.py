#!/usr/bin/python3
"""deepspeech.pytorch's DeepSpeech2 model in plain PyTorch: the reference of Shardlight's
models/deepspeech2.h, used by tools/gen_deepspeech2_fixtures.py (parity fixtures) and
tools/bench_zoo.py (training-step benchmark). Needs only PyTorch.

This is deepspeech.pytorch's model (SeanNaren/deepspeech.pytorch,
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
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


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
