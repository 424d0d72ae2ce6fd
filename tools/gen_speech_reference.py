"""Reference values for the speech job's spectrogram (tools/train/speech.h), printed as C++.

Computes, with torch.stft in float64, deepspeech.pytorch's feature pipeline for a fixed
synthetic signal: STFT magnitude (n_fft 441 = 20 ms at 22050 Hz, hop 220, symmetric Hamming
window, center=True with reflect padding), then log1p and normalisation by the mean and the
unbiased standard deviation. Prints selected entries, pasted into tests/train/test_speech.cpp.

Environment: /usr/bin/python3 with torch 1.13 (any torch with torch.stft(return_complex=True)).
    python3 tools/gen_speech_reference.py
"""
import math

import torch

SR, N_FFT, HOP, BINS, N = 22050, 441, 220, 81, 2000


def signal():
    # The test builds the same int16 samples: round(32767 * x[n]).
    xs = []
    for n in range(N):
        v = (0.5 * math.sin(2 * math.pi * 440 * n / SR)
             + 0.25 * math.sin(2 * math.pi * 1234.5 * n / SR + 0.3)
             + 0.01 * (((n * 7919) % 101) - 50) / 50)
        xs.append(round(32767 * v))
    return torch.tensor(xs, dtype=torch.float64) / 32768


def main():
    x = signal()
    window = torch.hamming_window(N_FFT, periodic=False, dtype=torch.float64)
    mag = torch.stft(x, N_FFT, HOP, N_FFT, window, center=True, pad_mode="reflect",
                     return_complex=True).abs()[:BINS]
    spect = torch.log1p(mag)
    spect = (spect - spect.mean()) / spect.std()
    print("// shape", list(mag.shape))
    picks = [(0, 0), (9, 0), (9, 4), (25, 4), (25, 9), (40, 3), (80, 5), (8, 9), (10, 2), (24, 7)]
    print("// {bin, frame, magnitude, normalized log1p}")
    for b, f in picks:
        print("{%d, %d, %.10g, %.10g}," % (b, f, mag[b, f].item(), spect[b, f].item()))


if __name__ == "__main__":
    main()
