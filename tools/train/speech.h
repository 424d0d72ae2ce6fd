// Built-in speech data for the DeepSpeech2 job: short spoken texts synthesized with espeak-ng
// (the Debian package espeak-ng), as log spectrograms with character labels.
//
// Utterances. Utterance i of a corpus with seed s is drawn from its own splitmix64 stream,
// seeded with s * 1000003 + i (so it does not depend on the corpus size or on other
// utterances): a word count uniform in [min_words, max_words], then that many words uniform
// over the vocabulary joined by single spaces; then the voice (one of kSpeechVoices), speaking
// rate (espeak-ng -s, words per minute, uniform in [140, 220]) and pitch (-p, uniform in
// [20, 80]). "uniform" is the stream's next value modulo the range size. Vocabularies:
// "digits" (kSpeechDigits, the default: ZERO .. NINE) or "words" (kSpeechWords: 36 words that
// use all 26 letters and the apostrophe, so every label is trained).
//
// Synthesis. `espeak-ng -w FILE -v VOICE -s RATE -p PITCH TEXT` writes a 22050 Hz 16-bit mono
// PCM WAV. Leading and trailing samples with |x| <= kSilence are cut (espeak-ng pads with
// silence), keeping 10 ms on each side.
//
// Features, as deepspeech.pytorch's SpectrogramParser: the STFT magnitude over 20 ms Hamming
// windows (scipy.signal.hamming, the symmetric one) every 10 ms, centred (the signal
// reflect-padded by half a window on both sides, as librosa.stft / torch.stft(center=True)),
// log1p, then normalised to mean 0 and standard deviation 1 (the unbiased one, torch.std) over
// the whole utterance. At espeak-ng's 22050 Hz a 20 ms window is n_fft = 441 samples (bins 50 Hz
// apart) and 10 ms is hop 220; the features are the lowest num_features bins, 0 .. (F - 1) * 50
// Hz: 81 bins span 0 .. 4 kHz, the band of the 8 kHz audio deepspeech2_small is sized for, at
// deepspeech.pytorch's resolution for it (n_fft 160 at 8 kHz: 81 bins, 50 Hz apart).
//
// Labels: deepspeech.pytorch's English alphabet kSpeechLabels, blank "_" = 0, space = 28.
//
// Cache. Synthesis takes a while (espeak-ng runs once per utterance, in parallel over the cores:
// 2000 utterances took 13 s on 2 cores), so a corpus is stored
// as one file <dir>/speech-<key>.bin, key = a hash of every generator and feature setting (and
// the format's version): see speech.cpp for the layout. It is written to a temporary file and
// renamed into place, so a reader never sees a half-written file; it ends with a checksum of
// everything before it, and a file that is short, has another key or a wrong checksum is
// reported and rebuilt, never used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace sl::train {

/// deepspeech.pytorch's labels (labels.json): index 0 "_" is the CTC blank.
inline constexpr const char* kSpeechLabels = "_'ABCDEFGHIJKLMNOPQRSTUVWXYZ ";
/// The espeak-ng voices utterances are spoken in (language + variant).
inline const std::vector<std::string> kSpeechVoices = {
    "en-us", "en-us+f2", "en-gb", "en-gb+f4", "en-gb-x-rp+m3", "en-gb-scotland+m5"};
/// The vocabularies (see the file comment).
inline const std::vector<std::string> kSpeechDigits = {"ZERO", "ONE", "TWO",   "THREE", "FOUR",
                                                       "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"};
inline const std::vector<std::string> kSpeechWords = {
    "THE", "QUICK", "BROWN", "FOX",   "JUMPS", "OVER",  "A",     "LAZY",   "DOG",
    "YES", "NO",    "UP",    "DOWN",  "LEFT",  "RIGHT", "STOP",  "GO",     "ON",
    "OFF", "HELLO", "WORLD", "DON'T", "IT'S",  "WE'LL", "QUEEN", "JAZZY",  "VIEW",
    "KEY", "BOX",   "MAYBE", "WATER", "HAPPY", "GREEN", "SEVEN", "SPEECH", "MODEL"};
/// |sample| at or below this counts as silence when trimming (of 32767).
inline constexpr int kSilence = 100;

/// A WAV file's 16-bit mono PCM audio.
struct Wav {
  int64_t sample_rate = 0;
  std::vector<int16_t> samples;
};

/// Parses the bytes of a RIFF/WAVE file: a "RIFF" header of type "WAVE", a "fmt " chunk of PCM
/// (format 1), 1 channel, 16 bits per sample, then a "data" chunk (other chunks are skipped).
/// Throws IOError naming `what` (a file or command) and the problem for anything else: too short,
/// another header, another format / channel count / bit depth, a chunk running past the end, no
/// data chunk.
Wav parse_wav(const std::string& bytes, const std::string& what);
/// parse_wav of the file at `path`; IOError naming it when it cannot be read.
Wav read_wav(const std::string& path);

/// How one utterance is spoken.
struct UtteranceSpec {
  std::string text;    ///< upper case words from kSpeechLabels' letters, single spaces
  std::string voice;   ///< espeak-ng -v
  int64_t rate = 175;  ///< espeak-ng -s, words per minute
  int64_t pitch = 50;  ///< espeak-ng -p, 0..99
};

struct SpeechOptions {
  int64_t utterances = 2000;  ///< in all; the last test_utterances are the test split
  int64_t test_utterances = 200;
  uint64_t seed = 0;  ///< of the generator (not of training)
  int64_t min_words = 1, max_words = 4;
  std::string vocabulary = "digits";  ///< "digits" or "words"
  int64_t num_features = 81;          ///< spectrogram bins kept (the model's num_features), <= 221
  std::string espeak = "espeak-ng";   ///< the program run (a name on PATH or a path)
};

/// Utterance i of the corpus (see the file comment); deterministic in (opts.seed, i) and the word
/// range and vocabulary. Throws ValueError for i < 0, a word range outside 1 <= min_words <=
/// max_words, or a vocabulary other than "digits" and "words".
UtteranceSpec utterance_spec(const SpeechOptions& opts, int64_t i);

/// Runs espeak-ng (`espeak`) for `spec`, writing its WAV to `wav_path`, and reads it (the file is
/// removed afterwards). Throws IOError naming the package when the program cannot be started, and
/// the command when it fails or writes an unreadable WAV.
Wav synthesize(const UtteranceSpec& spec, const std::string& espeak, const std::string& wav_path);

/// The centred STFT magnitude of `x` with a symmetric Hamming window of n_fft samples every hop
/// samples (x reflect-padded by n_fft / 2 on both sides; 1 + x.size() / hop frames), bins
/// 0 .. bins-1 of the n_fft-point DFT: float32 [bins, frames]. Computed as a product with a
/// cos/sin basis in float32 (the basis itself in double). Throws ValueError when n_fft < 2,
/// hop < 1, bins outside [1, n_fft / 2 + 1], or x has fewer than n_fft / 2 + 1 samples (reflect
/// padding needs them).
Tensor stft_magnitude(const std::vector<float>& x, int64_t n_fft, int64_t hop, int64_t bins);

/// The model's input for a waveform (see the file comment): float32 [num_features, frames],
/// log1p of stft_magnitude(samples / 32768, n_fft = 20 ms, hop = 10 ms), normalised. Throws
/// ValueError for num_features outside the STFT's bins, or audio shorter than half a window.
Tensor log_spectrogram(const Wav& wav, int64_t num_features);

/// Label indices of `text` in kSpeechLabels (ValueError naming a character not in it, or "_").
std::vector<int64_t> encode_transcript(const std::string& text);
/// The text of label indices (ValueError for an index outside the labels).
std::string decode_transcript(const std::vector<int64_t>& labels);

/// A corpus: every utterance's features and text, in order.
struct SpeechCorpus {
  std::vector<Tensor> spectrograms;  ///< float32 [num_features, frames_i]
  std::vector<std::string> texts;
  std::string cache_path;  ///< the cache file read or written
  bool from_cache = false;
  /// Why a cache file present was not used (empty when none was there or it was used).
  std::string rebuilt_because;
  double synthesis_seconds = 0;  ///< 0 when read from the cache
};

/// The corpus of `opts`, from the cache file in `dir` when a valid one is there, otherwise
/// synthesized (creating `dir`) and cached. Processes that miss the cache at the same time take
/// turns under a lock on `dir` (the first synthesizes, the others read its cache). Throws
/// ValueError for bad options (utterances < 2, test_utterances outside [1, utterances - 1],
/// num_features outside [1, 221]), IOError when espeak-ng is missing (naming the Debian package) or
/// fails, or the cache cannot be written.
SpeechCorpus load_speech_corpus(const SpeechOptions& opts, const std::string& dir);

/// Padded utterances: spect float32 [N, 1, F, Tmax] zero-padded, lengths int64 [N] (frames),
/// targets int64 [N, Smax] label indices zero-padded, target_lengths int64 [N].
struct SpeechBatch {
  Tensor spect, lengths, targets, target_lengths;
};
/// The SpeechBatch of utterances [begin, end) of `corpus` (Tmax, Smax: their longest). Throws
/// ValueError for an empty or out-of-range range, or a text encode_transcript refuses.
SpeechBatch pad_utterances(const SpeechCorpus& corpus, int64_t begin, int64_t end);

}  // namespace sl::train
