// The speech data of the DeepSpeech2 job (tools/train/speech.h) and the job end to end
// (sl_train --model deepspeech2, tools/train/deepspeech2.cpp): WAV parsing and its errors, the
// spectrogram against torch.stft (tools/gen_speech_reference.py), an independent direct DFT and
// a hand-derived sinusoid, the utterance generator, the on-disk cache (reused, and rebuilt when
// corrupt), and a tiny job stopped after epoch 1 and resumed ending bit-identical to the
// uninterrupted run. Cases that run espeak-ng skip when it is not installed (tools/setup.sh
// installs the Debian package espeak-ng).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <shardlight/shardlight.h>

#include "../dist/mpi_launch.h"
#include "core/device.h"
#include "job_testing.h"
#include "speech.h"
#include "support/testing.h"

using namespace sl;
using namespace sl::train;
using sl::testing::JobResult;
using sl::testing::plus;
using sl::testing::run_job;
using sl::testing::state_digest_of;
using sl::testing::TempDir;

namespace {

bool have_espeak() {
  return std::system("espeak-ng --version > /dev/null 2>&1") == 0;
}

doctest::skip needs_espeak(const std::string& what) {
  return sl::testing::skip_when(!have_espeak(), what,
                                "espeak-ng is not installed (Debian package espeak-ng)");
}

void put16(std::string& b, uint16_t v) {
  b.append(reinterpret_cast<const char*>(&v), 2);
}
void put32(std::string& b, uint32_t v) {
  b.append(reinterpret_cast<const char*>(&v), 4);
}

/// A WAV file's bytes, written field by field after the RIFF/WAVE spec (what espeak-ng -w writes,
/// plus an optional unknown chunk before the data).
std::string wav_bytes(const std::vector<int16_t>& s, uint16_t format = 1, uint16_t channels = 1,
                      uint16_t bits = 16, uint32_t rate = 22050, bool extra_chunk = false) {
  std::string body = "WAVE";
  body += "fmt ";
  put32(body, 16);
  put16(body, format);
  put16(body, channels);
  put32(body, rate);
  put32(body, rate * channels * bits / 8);
  put16(body, static_cast<uint16_t>(channels * bits / 8));
  put16(body, bits);
  if (extra_chunk) {
    body += "LIST";
    put32(body, 3);  // odd: padded to 4
    body += "abc";
    body += '\0';
  }
  body += "data";
  put32(body, static_cast<uint32_t>(s.size() * 2));
  body.append(reinterpret_cast<const char*>(s.data()), s.size() * 2);
  std::string b = "RIFF";
  put32(b, static_cast<uint32_t>(body.size()));
  return b + body;
}

/// The signal of tools/gen_speech_reference.py as int16 samples.
std::vector<int16_t> reference_signal() {
  std::vector<int16_t> s;
  for (int n = 0; n < 2000; ++n) {
    const double v = 0.5 * std::sin(2 * std::numbers::pi * 440 * n / 22050) +
                     0.25 * std::sin(2 * std::numbers::pi * 1234.5 * n / 22050 + 0.3) +
                     0.01 * (((n * 7919) % 101) - 50) / 50.0;
    s.push_back(static_cast<int16_t>(std::lround(32767 * v)));
  }
  return s;
}

}  // namespace

TEST_CASE("speech: WAV files parse, and malformed ones give IOError naming them") {
  TempDir d("speech_wav");
  const std::vector<int16_t> s = {0, 1, -1, 32767, -32768, 1234};
  Wav w = read_wav(d.write("ok.wav", wav_bytes(s)));
  CHECK(w.sample_rate == 22050);
  CHECK(w.samples == s);
  // an unknown (odd-sized, padded) chunk before the data is skipped
  CHECK(parse_wav(wav_bytes(s, 1, 1, 16, 16000, true), "x").samples == s);
  CHECK(parse_wav(wav_bytes(s, 1, 1, 16, 16000, true), "x").sample_rate == 16000);

  const std::string full = wav_bytes(s);
  const std::string cut = d.write("cut.wav", full.substr(0, full.size() - 3));
  SL_CHECK_THROWS(read_wav(cut), IOError, "cut.wav: chunk 'data' of 12 bytes runs past the end");
  SL_CHECK_THROWS(read_wav(d.write("short.wav", "RIFF")), IOError,
                  "short.wav: not a RIFF/WAVE file (4 bytes)");
  SL_CHECK_THROWS(read_wav(d.write("stereo.wav", wav_bytes(s, 1, 2))), IOError,
                  "stereo.wav: format 1, 2 channel(s), 16 bits; expected 16-bit mono PCM");
  SL_CHECK_THROWS(read_wav(d.write("float.wav", wav_bytes(s, 3, 1, 32))), IOError,
                  "float.wav: format 3, 1 channel(s), 32 bits");
  SL_CHECK_THROWS(read_wav(d.write("u8.wav", wav_bytes(s, 1, 1, 8))), IOError, "8 bits");
  // header only: no data chunk
  SL_CHECK_THROWS(parse_wav(full.substr(0, 36), "hdr.wav"), IOError, "hdr.wav: no data chunk");
  SL_CHECK_THROWS(read_wav(d.root + "/missing.wav"), IOError, "cannot open '");
}

TEST_CASE("speech: the STFT magnitude and log spectrogram match torch.stft") {
  const std::vector<int16_t> s = reference_signal();
  std::vector<float> x;
  for (int16_t v : s) x.push_back(static_cast<float>(v) / 32768.0f);
  Tensor mag = stft_magnitude(x, 441, 220, 81);
  REQUIRE(mag.sizes() == Shape{81, 10});  // torch.stft: 1 + 2000 / 220 frames
  Tensor spect = log_spectrogram({22050, s}, 81);
  REQUIRE(spect.sizes() == Shape{81, 10});
  // From tools/gen_speech_reference.py (torch.stft in float64): {bin, frame, |X|, normalized}.
  struct Ref {
    int b, f;
    double mag, spect;
  };
  const Ref refs[] = {
      {0, 0, 9.914541274, 2.09471151},       {9, 0, 8.72548912, 1.966810367},
      {9, 4, 57.62845604, 3.958825741},      {25, 4, 27.52265594, 3.159875672},
      {25, 9, 5.425751862, 1.5072625},       {40, 3, 0.1611362983, -0.389884741},
      {80, 5, 0.02126526241, -0.5322131308}, {8, 9, 52.75667333, 3.862630402},
      {10, 2, 16.82171736, 2.638404765},     {24, 7, 20.21180274, 2.831499834},
  };
  for (const Ref& r : refs) {
    // float32 products summed over 441 terms of |w x| <= 0.76: absolute error ~ 441 * 0.76 *
    // 6e-8 * sqrt-ish growth, well under 1e-4; the normalized values inherit ~1e-5.
    CHECK_MESSAGE(std::fabs(mag[r.b][r.f].item<double>() - r.mag) <= 1e-4 + 1e-5 * r.mag, "bin ",
                  r.b, " frame ", r.f, ": ", mag[r.b][r.f].item<double>(), " vs ", r.mag);
    CHECK_MESSAGE(std::fabs(spect[r.b][r.f].item<double>() - r.spect) <= 1e-4, "bin ", r.b,
                  " frame ", r.f, ": ", spect[r.b][r.f].item<double>(), " vs ", r.spect);
  }
  // Every entry against a direct complex DFT in double (std::polar per term, the reflect padding
  // written out as numpy's): same magnitudes to float32's accumulated rounding.
  const int n = 2000, pad = 220;
  std::vector<double> want;
  for (int b = 0; b < 81; ++b) {
    for (int f = 0; f < 10; ++f) {
      std::complex<double> acc = 0;
      for (int k = 0; k < 441; ++k) {
        int i = f * 220 - pad + k;
        i = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
        const double w = 0.54 - 0.46 * std::cos(2 * std::numbers::pi * k / 440);
        acc += w * x[i] * std::polar(1.0, -2 * std::numbers::pi * b * k / 441);
      }
      want.push_back(std::abs(acc));
    }
  }
  std::string diff = sl::testing::compare(mag.to_double(), from_vector(want, {81, 10}), 1e-5, 1e-4);
  CHECK_MESSAGE(diff.empty(), diff);
}

TEST_CASE("speech: a sinusoid on a bin peaks there with half the window's sum") {
  // x[n] = sin(2 pi 20 n / 441): 1000 Hz at 22050 Hz, exactly bin 20 of a 441-point DFT. Away
  // from the edges a frame's X[20] = (1/2) sum_n w[n] (the positive-frequency half of the sine),
  // and sum_n w[n] = 0.54 * 441 - 0.46 * sum_{k=0}^{440} cos(2 pi k / 440) = 238.14 - 0.46 =
  // 237.68 (the cosines over one full period sum to 0, plus the k = 440 term, 1): 118.84. The
  // negative-frequency image 40 bins away adds at most 1e-4 (torch.stft gives 118.8399 ..
  // 118.8401), float32 another ~1e-4: tolerance 1e-3. Bins 19 and 21 hold the main lobe's
  // shoulders and every other bin is far smaller.
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(std::sin(2 * std::numbers::pi * 20 * i / 441));
  Tensor mag = stft_magnitude(x, 441, 220, 221);
  REQUIRE(mag.sizes() == Shape{221, 19});
  for (int f = 3; f < 16; ++f) {
    Tensor col = mag.select(1, f);
    CHECK(col.argmax().item<int64_t>() == 20);
    CHECK(std::fabs(col[20].item<double>() - 118.84) <= 1e-3);
  }
  SL_CHECK_THROWS(stft_magnitude(x, 441, 220, 222), ValueError, "bins 222 outside [1, 221]");
  SL_CHECK_THROWS(stft_magnitude({0.f, 1.f}, 441, 220, 10), ValueError, "2 samples");
  SL_CHECK_THROWS(stft_magnitude(x, 441, 0, 10), ValueError, "hop 0 >= 1");
  // silence: every magnitude 0, so log1p is constant and has no standard deviation
  SL_CHECK_THROWS(log_spectrogram({22050, std::vector<int16_t>(1000, 0)}, 81), ValueError,
                  "constant spectrogram");
  SL_CHECK_THROWS(log_spectrogram({22050, std::vector<int16_t>(1000, 7)}, 300), ValueError,
                  "num_features 300 outside [1, 221]");
}

TEST_CASE("speech: utterances are deterministic, varied, and their labels encode") {
  SpeechOptions o;
  const UtteranceSpec a = utterance_spec(o, 5), b = utterance_spec(o, 5);
  CHECK(a.text == b.text);
  CHECK(a.voice == b.voice);
  CHECK(a.rate == b.rate);
  CHECK(a.pitch == b.pitch);
  std::set<std::string> texts, voices;
  std::set<int64_t> rates, word_counts;
  for (int64_t i = 0; i < 200; ++i) {
    const UtteranceSpec s = utterance_spec(o, i);
    texts.insert(s.text);
    voices.insert(s.voice);
    rates.insert(s.rate);
    CHECK((s.rate >= 140 && s.rate <= 220 && s.pitch >= 20 && s.pitch <= 80));
    const int64_t words = std::count(s.text.begin(), s.text.end(), ' ') + 1;
    CHECK((words >= 1 && words <= 4));
    word_counts.insert(words);
    CHECK(decode_transcript(encode_transcript(s.text)) == s.text);
  }
  // About 50 draws per word count: all 10 one-word texts, ~39 distinct of the 100 two-word ones
  // (100 * (1 - 0.99^50)), and nearly all longer ones distinct: ~148 expected.
  CHECK(texts.size() > 120);
  CHECK(word_counts.size() == 4);
  CHECK(voices.size() == kSpeechVoices.size());
  CHECK(rates.size() > 40);
  // another seed, other utterances
  SpeechOptions o2;
  o2.seed = 1;
  CHECK(utterance_spec(o2, 5).text + utterance_spec(o2, 6).text !=
        utterance_spec(o, 5).text + utterance_spec(o, 6).text);
  // labels: "_'A..Z " with blank 0 and space 28
  CHECK(encode_transcript("A Z'") == std::vector<int64_t>{2, 28, 27, 1});
  SL_CHECK_THROWS(encode_transcript("ONE 2"), ValueError, "character '2' of \"ONE 2\"");
  SL_CHECK_THROWS(encode_transcript("A_B"), ValueError, "blank '_' excluded");
  SL_CHECK_THROWS(decode_transcript({29}), ValueError, "label 29 outside [0, 29)");
  // The "words" vocabulary: utterances of its words only, and the words use every label but the
  // blank (26 letters, the apostrophe, and the space between words).
  SpeechOptions ow;
  ow.vocabulary = "words";
  std::set<int64_t> labels;
  for (int64_t i = 0; i < 100; ++i) {
    std::istringstream words(utterance_spec(ow, i).text);
    for (std::string w; words >> w;) {
      CHECK(std::find(kSpeechWords.begin(), kSpeechWords.end(), w) != kSpeechWords.end());
    }
  }
  for (const std::string& w : kSpeechWords) {
    for (int64_t l : encode_transcript(w + " ")) labels.insert(l);
  }
  CHECK(labels.size() == 28);
  CHECK(utterance_spec(ow, 5).text != utterance_spec(o, 5).text);
  ow.vocabulary = "letters";
  SL_CHECK_THROWS(utterance_spec(ow, 0), ValueError, "vocabulary 'letters' is not digits or words");
  o.min_words = 0;
  SL_CHECK_THROWS(utterance_spec(o, 0), ValueError, "word range 0..4");
}

TEST_CASE("speech: the corpus is synthesized once, read from its cache, and rebuilt when corrupt" *
          needs_espeak("speech corpus")) {
  TempDir d("speech_cache");
  SpeechOptions o;
  o.utterances = 6;
  o.test_utterances = 2;
  SpeechCorpus first = load_speech_corpus(o, d.root);
  CHECK_FALSE(first.from_cache);
  CHECK(first.rebuilt_because.empty());
  REQUIRE(first.texts.size() == 6);
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(first.texts[i] == utterance_spec(o, i).text);
    CHECK(first.spectrograms[i].size(0) == 81);
    // a word at >= 140 words per minute lasts well under a second; 4 of them under 4 s
    CHECK((first.spectrograms[i].size(1) > 10 && first.spectrograms[i].size(1) < 400));
  }
  // Only the cache file is left in the folder (no temporary WAVs or half-written files).
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.root)) {
    ++files;
    CHECK(e.path().string() == first.cache_path);
  }
  CHECK(files == 1);

  SpeechCorpus second = load_speech_corpus(o, d.root);
  CHECK(second.from_cache);
  REQUIRE(second.texts == first.texts);
  for (size_t i = 0; i < 6; ++i) CHECK(equal(second.spectrograms[i], first.spectrograms[i]));

  // A flipped byte in the middle: the checksum catches it and the corpus is rebuilt, equal.
  {
    std::fstream f(first.cache_path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(first.cache_path) / 2));
    f.put('\x5a');
  }
  SpeechCorpus third = load_speech_corpus(o, d.root);
  CHECK_FALSE(third.from_cache);
  CHECK_MESSAGE(third.rebuilt_because.find("checksum mismatch") != std::string::npos,
                third.rebuilt_because);
  for (size_t i = 0; i < 6; ++i) CHECK(equal(third.spectrograms[i], first.spectrograms[i]));
  CHECK(load_speech_corpus(o, d.root).from_cache);  // the rebuilt file is good again
  // Truncated: rebuilt too.
  std::filesystem::resize_file(first.cache_path, 100);
  SpeechCorpus fourth = load_speech_corpus(o, d.root);
  CHECK_FALSE(fourth.from_cache);
  CHECK(!fourth.rebuilt_because.empty());

  // Other settings use another file.
  SpeechOptions o2 = o;
  o2.seed = 3;
  CHECK(load_speech_corpus(o2, d.root).cache_path != first.cache_path);

  SpeechBatch b = pad_utterances(first, 0, 4);
  int64_t tmax = 0;
  for (int i = 0; i < 4; ++i) tmax = std::max(tmax, first.spectrograms[i].size(1));
  CHECK(b.spect.sizes() == Shape{4, 1, 81, tmax});
  CHECK(b.lengths.to_vector<int64_t>()[2] == first.spectrograms[2].size(1));
  CHECK(b.target_lengths.to_vector<int64_t>()[1] == static_cast<int64_t>(first.texts[1].size()));
  SL_CHECK_THROWS(pad_utterances(first, 4, 7), ValueError, "utterances [4, 7) outside [0, 6)");
}

TEST_CASE("speech: loaders that miss the cache together synthesize it once" *
          needs_espeak("speech corpus, two loaders")) {
  TempDir d("speech_lock");
  SpeechOptions o;
  o.utterances = 6;
  o.test_utterances = 2;
  // Two loaders start together on an empty folder (threads: flock locks belong to each open
  // file description, so two opens in one process exclude each other as two processes do).
  SpeechCorpus a, b;
  std::thread other([&] { b = load_speech_corpus(o, d.root); });
  a = load_speech_corpus(o, d.root);
  other.join();
  // Exactly one synthesized; the other read what it wrote.
  CHECK(a.from_cache != b.from_cache);
  REQUIRE(a.texts == b.texts);
  for (size_t i = 0; i < 6; ++i) CHECK(equal(a.spectrograms[i], b.spectrograms[i]));
}

TEST_CASE("speech: a missing espeak-ng is a clear IOError naming the package") {
  TempDir d("speech_missing");
  SpeechOptions o;
  o.utterances = 4;
  o.test_utterances = 1;
  o.espeak = d.root + "/no-such-espeak-ng";
  SL_CHECK_THROWS(load_speech_corpus(o, d.root), IOError, "install the Debian package espeak-ng");
  o.espeak = "espeak-ng";
  o.test_utterances = 4;
  SL_CHECK_THROWS(load_speech_corpus(o, d.root), ValueError, "4 test utterances of 4");
}

namespace {

struct JobEnv {
  TempDir dir{"speech_job"};
  /// A tiny run: 12 utterances (8 train, 4 test) of one or two words, batches of 4 (2 steps an
  /// epoch), a DeepSpeech2 with 4 conv channels and one bidirectional GRU of 16.
  std::vector<std::string> args(const std::string& strategy, const std::string& ckpt) const {
    return {"--model",
            "deepspeech2",
            "--strategy",
            strategy,
            "--data-dir",
            dir.root + "/data",
            "--epochs",
            "3",
            "--batch-size",
            "4",
            "--lr",
            "0.003",
            "--utterances",
            "12",
            "--test-utterances",
            "4",
            "--max-words",
            "2",
            "--hidden",
            "16",
            "--layers",
            "1",
            "--conv-channels",
            "4",
            "--checkpoint-dir",
            dir.root + "/" + ckpt};
  }
};

}  // namespace

TEST_CASE("deepspeech2 job: stopped after epoch 1 and resumed, ends bit-identical" *
          needs_espeak("deepspeech2 job")) {
  JobEnv env;
  JobResult full = run_job(env.args("single", "a"));
  REQUIRE_MESSAGE(full.code == 0, full.out);
  CHECK(full.out.find("speech: 8 train / 4 test utterances synthesized with espeak-ng") !=
        std::string::npos);
  CHECK(full.out.find("character accuracy") != std::string::npos);
  CHECK(full.out.find("epoch 3/3") != std::string::npos);
  JobResult first = run_job(plus(env.args("single", "b"), {"--stop-after-epochs", "1"}));
  REQUIRE_MESSAGE(first.code == 0, first.out);
  CHECK(first.out.find("test utterances from ") != std::string::npos);  // the cache
  CHECK(first.out.find("epoch 2/3") == std::string::npos);
  JobResult rest = run_job(plus(env.args("single", "b"), {"--resume", "1"}));
  REQUIRE_MESSAGE(rest.code == 0, rest.out);
  CHECK(rest.out.find("resumed from") != std::string::npos);
  CHECK(state_digest_of(full.out).size() == 16);
  CHECK_MESSAGE(state_digest_of(rest.out) == state_digest_of(full.out), full.out, "\n---\n",
                rest.out);
  CHECK(state_digest_of(first.out) != state_digest_of(full.out));
  // dp splits all four batch tensors over 2 replicas and gathers their per-utterance losses
  JobResult dp = run_job(plus(env.args("dp", "dp"), {"--dp-replicas", "2"}));
  REQUIRE_MESSAGE(dp.code == 0, dp.out);
  CHECK(dp.out.find("strategy dp") != std::string::npos);
  CHECK(std::isfinite(sl::testing::final_loss(dp.out)));
}

TEST_CASE("deepspeech2 job: zero2 on 2 ranks resumes bit-identical" *
          sl::testing::skip_either(needs_espeak("deepspeech2 job on 2 ranks"),
                                   sl::testing::needs_mpi("deepspeech2 job"))) {
  JobEnv env;
  // Both ranks load the data; on this first run one synthesizes it while the other waits for the
  // cache under the folder's lock.
  auto full = sl::testing::run_ranks(2, sl::testing::sl_train_bin(), env.args("zero2", "a"), 120);
  REQUIRE_MESSAGE(full.exit_code == 0, full.report());
  CHECK(full.rank_stdout[0].find("strategy zero2 on 2 rank(s)") != std::string::npos);
  auto first =
      sl::testing::run_ranks(2, sl::testing::sl_train_bin(),
                             plus(env.args("zero2", "b"), {"--stop-after-epochs", "1"}), 120);
  REQUIRE_MESSAGE(first.exit_code == 0, first.report());
  auto rest = sl::testing::run_ranks(2, sl::testing::sl_train_bin(),
                                     plus(env.args("zero2", "b"), {"--resume", "1"}), 120);
  REQUIRE_MESSAGE(rest.exit_code == 0, rest.report());
  CHECK_MESSAGE(state_digest_of(rest.rank_stdout[0]) == state_digest_of(full.rank_stdout[0]),
                full.report(), rest.report());
}

TEST_CASE("deepspeech2 job: --device cuda trains as on the CPU" *
          sl::testing::skip_either(needs_espeak("deepspeech2 job on a GPU"),
                                   sl::testing::needs_gpu_trainer("deepspeech2 job"))) {
  JobEnv env;
  JobResult cpu = run_job(env.args("single", "cpu"));
  REQUIRE_MESSAGE(cpu.code == 0, cpu.out);
  JobResult gpu =
      run_job(plus(env.args("single", "gpu"), {"--device", "cuda"}), sl::testing::gpu_train_bin());
  REQUIRE_MESSAGE(gpu.code == 0, gpu.out);
  CHECK(gpu.out.find("on cuda:0") != std::string::npos);
  if (!cuda_is_available()) {
    // the fake GPU (Note [Fake GPU]) runs the CPU's kernels in the same order: the same state
    CHECK_MESSAGE(state_digest_of(gpu.out) == state_digest_of(cpu.out), cpu.out, "\n---\n",
                  gpu.out);
  } else {
    // a GPU sums in other orders (test_cnn_job.cpp): 6 AdamW steps end within a thousandth
    CHECK_MESSAGE(std::fabs(sl::testing::final_loss(gpu.out) - sl::testing::final_loss(cpu.out)) <=
                      1e-3 * std::max(1.0, std::fabs(sl::testing::final_loss(cpu.out))),
                  cpu.out, "\n---\n", gpu.out);
  }
}

TEST_CASE("deepspeech2 job: errors are clear") {
  JobEnv env;
  JobResult r = run_job(plus(env.args("single", "x"), {"--rnn", "transformer"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("deepspeech2: --rnn must be gru or lstm, got 'transformer'") != std::string::npos,
      r.out);
  r = run_job(plus(env.args("single", "x"), {"--espeak", env.dir.root + "/nope"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("install the Debian package espeak-ng") != std::string::npos, r.out);
  r = run_job(plus(env.args("single", "x"), {"--utterances", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.out.find("speech: --utterances 1 must be >= 2") != std::string::npos, r.out);
}

// the checkpoint is looked for once the corpus is there, so this one synthesizes it
TEST_CASE("deepspeech2 job: --resume without a checkpoint is a clear error" *
          needs_espeak("deepspeech2 job, resume error")) {
  JobEnv env;
  JobResult r = run_job(plus(env.args("single", "none"), {"--resume", "1"}));
  CHECK(r.code == 1);
  CHECK_MESSAGE(
      r.out.find("deepspeech2: --resume 1 but there is no checkpoint at") != std::string::npos,
      r.out);
}
