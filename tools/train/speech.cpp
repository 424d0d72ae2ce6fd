// espeak-ng speech data: WAV parsing, the spectrogram, the corpus and its cache (see speech.h).
//
// Cache file layout (little-endian):
//   "SLSPEECH"  u32 version (kCacheVersion)  u64 key  u32 n + n bytes: the settings string
//   u64 count, then per utterance: u32 n + n bytes of text, u32 F, u32 frames, F * frames f32
//   u64 FNV-1a of every byte before it
#include "speech.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <sstream>
#include <thread>

#include "autograd/ops/matmul.h"
#include "core/creation.h"
#include "core/error.h"
#include "nn/serialize/file_io.h"

extern char** environ;

namespace sl::train {
namespace {

constexpr uint32_t kCacheVersion = 1;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t fnv1a(const char* p, size_t n, uint64_t h = 0xcbf29ce484222325ULL) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint32_t u32_at(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint16_t u16_at(const std::string& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SL_CHECK_IO(in.good(), "speech: cannot open '", path, "'");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs argv (argv[0] looked up on PATH) with stdout and stderr to /dev/null; returns the exit
/// status. Throws IOError when it cannot be started (naming the Debian package for espeak-ng).
int run_quiet(const std::vector<std::string>& args, const std::string& shown) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  SL_CHECK_IO(err == 0, "speech: cannot run '", args[0], "' (", std::strerror(err),
              "): the speech data is synthesized with espeak-ng; install the Debian package "
              "espeak-ng (tools/setup.sh does) or pass --espeak PATH");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    SL_CHECK_IO(errno == EINTR, "speech: waiting for '", shown, "' failed: ", std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string settings_string(const SpeechOptions& o) {
  std::ostringstream s;
  s << "v" << kCacheVersion << " utterances=" << o.utterances << " seed=" << o.seed
    << " words=" << o.min_words << ".." << o.max_words << " features=" << o.num_features
    << " window=20ms hop=10ms hamming log1p normalized silence=" << kSilence << " voices=";
  for (const std::string& v : kSpeechVoices) s << v << ",";
  s << " rate=140..220 pitch=20..80 vocabulary=" << o.vocabulary;
  return s.str();
}

void put_u32(std::string& b, uint32_t v) {
  b.append(reinterpret_cast<const char*>(&v), 4);
}
void put_u64(std::string& b, uint64_t v) {
  b.append(reinterpret_cast<const char*>(&v), 8);
}

std::string encode_cache(const SpeechCorpus& c, uint64_t key, const std::string& settings) {
  std::string b = "SLSPEECH";
  put_u32(b, kCacheVersion);
  put_u64(b, key);
  put_u32(b, static_cast<uint32_t>(settings.size()));
  b += settings;
  put_u64(b, c.texts.size());
  for (size_t i = 0; i < c.texts.size(); ++i) {
    put_u32(b, static_cast<uint32_t>(c.texts[i].size()));
    b += c.texts[i];
    const Tensor& s = c.spectrograms[i];
    put_u32(b, static_cast<uint32_t>(s.size(0)));
    put_u32(b, static_cast<uint32_t>(s.size(1)));
    b.append(static_cast<const char*>(s.contiguous().data_ptr()), s.nbytes());
  }
  put_u64(b, fnv1a(b.data(), b.size()));
  return b;
}

/// Fills `c` from cache bytes `b` and returns true; false with the reason in `why` when `b` is
/// not a complete, intact cache of these settings.
bool decode_cache(const std::string& b, uint64_t key, const std::string& settings,
                  int64_t num_features, SpeechCorpus& c, std::string& why) {
  auto fail = [&](const std::string& w) {
    why = w;
    return false;
  };
  if (b.size() < 8 + 4 + 8 + 4 + 8 + 8 || b.compare(0, 8, "SLSPEECH") != 0) {
    return fail("not a speech cache (no SLSPEECH header)");
  }
  uint64_t sum;
  std::memcpy(&sum, b.data() + b.size() - 8, 8);
  if (sum != fnv1a(b.data(), b.size() - 8)) return fail("checksum mismatch (truncated or corrupt)");
  size_t at = 8;
  if (u32_at(b, at) != kCacheVersion) return fail("another format version");
  at += 4;
  uint64_t k;
  std::memcpy(&k, b.data() + at, 8);
  at += 8;
  const uint32_t n = u32_at(b, at);
  at += 4;
  if (k != key || b.compare(at, n, settings) != 0 || n != settings.size()) {
    return fail("written for other settings");
  }
  at += n;
  uint64_t count;
  std::memcpy(&count, b.data() + at, 8);
  at += 8;
  const size_t end = b.size() - 8;
  for (uint64_t i = 0; i < count; ++i) {
    if (at + 4 > end) return fail("ends early");
    const uint32_t tn = u32_at(b, at);
    at += 4;
    if (at + tn + 8 > end) return fail("ends early");
    c.texts.push_back(b.substr(at, tn));
    at += tn;
    const uint32_t f = u32_at(b, at), frames = u32_at(b, at + 4);
    at += 8;
    const size_t bytes = static_cast<size_t>(f) * frames * 4;
    if (f != num_features || frames == 0 || at + bytes > end) return fail("a malformed utterance");
    Tensor s = empty({f, frames});
    std::memcpy(s.data_ptr(), b.data() + at, bytes);
    at += bytes;
    c.spectrograms.push_back(s);
  }
  if (at != end) return fail("trailing bytes");
  return true;
}

}  // namespace

Wav parse_wav(const std::string& b, const std::string& what) {
  auto bad = [&](const std::string& why) { return IOError("speech: " + what + ": " + why); };
  if (b.size() < 12 || b.compare(0, 4, "RIFF") != 0 || b.compare(8, 4, "WAVE") != 0) {
    throw bad("not a RIFF/WAVE file (" + std::to_string(b.size()) + " bytes)");
  }
  Wav w;
  bool have_fmt = false;
  size_t at = 12;
  while (at + 8 <= b.size()) {
    const std::string id = b.substr(at, 4);
    const uint32_t size = u32_at(b, at + 4);
    at += 8;
    if (size > b.size() - at) {
      throw bad("chunk '" + id + "' of " + std::to_string(size) + " bytes runs past the end (" +
                std::to_string(b.size() - at) + " left; truncated?)");
    }
    if (id == "fmt ") {
      if (size < 16) throw bad("fmt chunk of " + std::to_string(size) + " bytes, expected >= 16");
      const uint16_t format = u16_at(b, at), channels = u16_at(b, at + 2);
      const uint16_t bits = u16_at(b, at + 14);
      if (format != 1 || channels != 1 || bits != 16) {
        throw bad("format " + std::to_string(format) + ", " + std::to_string(channels) +
                  " channel(s), " + std::to_string(bits) +
                  " bits; expected 16-bit mono PCM (format 1)");
      }
      w.sample_rate = u32_at(b, at + 4);
      if (w.sample_rate <= 0) throw bad("sample rate 0");
      have_fmt = true;
    } else if (id == "data") {
      if (!have_fmt) throw bad("data chunk before the fmt chunk");
      if (size % 2 != 0) throw bad("data chunk of an odd " + std::to_string(size) + " bytes");
      w.samples.resize(size / 2);
      std::memcpy(w.samples.data(), b.data() + at, size);
      return w;
    }
    at += size + (size & 1);  // chunks are padded to even sizes
  }
  throw bad(have_fmt ? "no data chunk" : "no fmt chunk");
}

Wav read_wav(const std::string& path) {
  return parse_wav(read_file(path), path);
}

UtteranceSpec utterance_spec(const SpeechOptions& o, int64_t i) {
  SL_CHECK(i >= 0, "speech: utterance index ", i, " < 0");
  SL_CHECK(o.min_words >= 1 && o.min_words <= o.max_words, "speech: the word range ", o.min_words,
           "..", o.max_words, " must satisfy 1 <= min <= max");
  SL_CHECK(o.vocabulary == "digits" || o.vocabulary == "words", "speech: vocabulary '",
           o.vocabulary, "' is not digits or words");
  const std::vector<std::string>& vocab = o.vocabulary == "digits" ? kSpeechDigits : kSpeechWords;
  uint64_t state = o.seed * 1000003ULL + static_cast<uint64_t>(i);
  auto uniform = [&](uint64_t n) { return splitmix64(state) % n; };
  UtteranceSpec s;
  const int64_t words = o.min_words + static_cast<int64_t>(uniform(o.max_words - o.min_words + 1));
  for (int64_t w = 0; w < words; ++w) {
    if (w > 0) s.text += ' ';
    s.text += vocab[uniform(vocab.size())];
  }
  s.voice = kSpeechVoices[uniform(kSpeechVoices.size())];
  s.rate = 140 + static_cast<int64_t>(uniform(81));
  s.pitch = 20 + static_cast<int64_t>(uniform(61));
  return s;
}

Wav synthesize(const UtteranceSpec& spec, const std::string& espeak, const std::string& wav_path) {
  const std::vector<std::string> args = {espeak,
                                         "-w",
                                         wav_path,
                                         "-v",
                                         spec.voice,
                                         "-s",
                                         std::to_string(spec.rate),
                                         "-p",
                                         std::to_string(spec.pitch),
                                         spec.text};
  std::string shown;
  for (const std::string& a : args) shown += (shown.empty() ? "" : " ") + a;
  const int code = run_quiet(args, shown);
  if (code != 0) {
    std::filesystem::remove(wav_path);
    SL_CHECK_IO(code != 127, "speech: '", shown, "' exited with 127: espeak-ng is not installed? ",
                "install the Debian package espeak-ng (tools/setup.sh does)");
    throw IOError("speech: '" + shown + "' failed with exit status " + std::to_string(code));
  }
  Wav w;
  try {
    w = parse_wav(read_file(wav_path), "the WAV of '" + shown + "'");
  } catch (...) {
    std::filesystem::remove(wav_path);
    throw;
  }
  std::filesystem::remove(wav_path);
  // Trim espeak-ng's leading and trailing silence, keeping 10 ms on each side.
  const auto loud = [](int16_t v) { return std::abs(static_cast<int>(v)) > kSilence; };
  auto first = std::find_if(w.samples.begin(), w.samples.end(), loud);
  auto last = std::find_if(w.samples.rbegin(), w.samples.rend(), loud).base();
  SL_CHECK_IO(first < last, "speech: '", shown, "' wrote only silence (", w.samples.size(),
              " samples)");
  const int64_t margin = w.sample_rate / 100;
  const int64_t b = std::max<int64_t>(0, (first - w.samples.begin()) - margin);
  const int64_t e = std::min<int64_t>(static_cast<int64_t>(w.samples.size()),
                                      (last - w.samples.begin()) + margin);
  w.samples = std::vector<int16_t>(w.samples.begin() + b, w.samples.begin() + e);
  return w;
}

Tensor stft_magnitude(const std::vector<float>& x, int64_t n_fft, int64_t hop, int64_t bins) {
  SL_CHECK(n_fft >= 2 && hop >= 1, "stft_magnitude: n_fft ", n_fft, " must be >= 2 and hop ", hop,
           " >= 1");
  SL_CHECK(bins >= 1 && bins <= n_fft / 2 + 1, "stft_magnitude: bins ", bins, " outside [1, ",
           n_fft / 2 + 1, "] for n_fft ", n_fft);
  const int64_t n = static_cast<int64_t>(x.size()), pad = n_fft / 2;
  SL_CHECK(n > pad, "stft_magnitude: ", n, " samples; reflect padding by ", pad, " needs more");
  // x reflect-padded: index -k reads x[k], index n-1+k reads x[n-1-k] (numpy's "reflect").
  auto at = [&](int64_t i) {
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
    return x[static_cast<size_t>(i)];
  };
  const int64_t frames = 1 + n / hop;
  Tensor windowed = empty({frames, n_fft});
  float* wp = windowed.data_ptr<float>();
  std::vector<double> window(static_cast<size_t>(n_fft));
  for (int64_t k = 0; k < n_fft; ++k) {
    window[k] = 0.54 - 0.46 * std::cos(2 * std::numbers::pi * k / (n_fft - 1));
  }
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t k = 0; k < n_fft; ++k) {
      wp[f * n_fft + k] = static_cast<float>(window[k] * at(f * hop - pad + k));
    }
  }
  // basis [n_fft, 2 * bins]: cos(2 pi k j / n_fft) then -sin(...); k j reduced mod n_fft so the
  // angle stays small and exact.
  Tensor basis = empty({n_fft, 2 * bins});
  float* bp = basis.data_ptr<float>();
  for (int64_t k = 0; k < n_fft; ++k) {
    for (int64_t j = 0; j < bins; ++j) {
      const double a = 2 * std::numbers::pi * static_cast<double>((k * j) % n_fft) / n_fft;
      bp[k * 2 * bins + j] = static_cast<float>(std::cos(a));
      bp[k * 2 * bins + bins + j] = static_cast<float>(-std::sin(a));
    }
  }
  Tensor re_im = matmul(windowed, basis).contiguous();  // [frames, 2 * bins]
  const float* r = re_im.data_ptr<float>();
  Tensor out = empty({bins, frames});
  float* o = out.data_ptr<float>();
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t j = 0; j < bins; ++j) {
      o[j * frames + f] = std::hypot(r[f * 2 * bins + j], r[f * 2 * bins + bins + j]);
    }
  }
  return out;
}

Tensor log_spectrogram(const Wav& wav, int64_t num_features) {
  const int64_t n_fft = wav.sample_rate / 50, hop = wav.sample_rate / 100;
  SL_CHECK(num_features >= 1 && num_features <= n_fft / 2 + 1, "speech: num_features ",
           num_features, " outside [1, ", n_fft / 2 + 1, "] (20 ms windows at ", wav.sample_rate,
           " Hz)");
  std::vector<float> x(wav.samples.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(wav.samples[i]) / 32768.0f;
  Tensor s = stft_magnitude(x, n_fft, hop, num_features);
  float* p = s.data_ptr<float>();
  const int64_t n = s.numel();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = std::log1p(p[i]);
    sum += p[i];
  }
  const double mean = sum / n;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) sq += (p[i] - mean) * (p[i] - mean);
  const double sd = n > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
  SL_CHECK(sd > 0, "speech: a constant spectrogram (", n, " values) cannot be normalised");
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((p[i] - mean) / sd);
  return s;
}

std::vector<int64_t> encode_transcript(const std::string& text) {
  const std::string labels = kSpeechLabels;
  std::vector<int64_t> out;
  for (char ch : text) {
    const size_t at = labels.find(ch);
    SL_CHECK(at != std::string::npos && at != 0, "speech: character '", std::string(1, ch),
             "' of \"", text, "\" is not a label of \"", labels, "\" (blank '_' excluded)");
    out.push_back(static_cast<int64_t>(at));
  }
  return out;
}

std::string decode_transcript(const std::vector<int64_t>& labels) {
  const std::string all = kSpeechLabels;
  std::string out;
  for (int64_t l : labels) {
    SL_CHECK(l >= 0 && l < static_cast<int64_t>(all.size()), "speech: label ", l, " outside [0, ",
             all.size(), ")");
    out += all[static_cast<size_t>(l)];
  }
  return out;
}

namespace {

/// An exclusive flock(2) on the folder `dir` while it lives: processes that find no valid cache
/// take turns, so on a first multi-rank run one rank synthesizes and the others then read its
/// cache. The kernel drops the lock when its holder exits, however it exits.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir) {
    fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    SL_CHECK_IO(fd_ >= 0, "speech: cannot open the data folder '", dir,
                "': ", std::strerror(errno));
    if (lock(LOCK_EX | LOCK_NB) == 0) return;
    if (errno == EWOULDBLOCK) {
      std::fprintf(stderr, "speech: another process is synthesizing into '%s'; waiting for it\n",
                   dir.c_str());
      if (lock(LOCK_EX) == 0) return;
    }
    const int err = errno;
    ::close(fd_);
    throw IOError("speech: cannot lock the data folder '" + dir + "': " + std::strerror(err));
  }
  ~FolderLock() { ::close(fd_); }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int lock(int op) const {
    int r;
    do {
      r = ::flock(fd_, op);
    } while (r != 0 && errno == EINTR);
    return r;
  }
  int fd_ = -1;
};

}  // namespace

SpeechCorpus load_speech_corpus(const SpeechOptions& o, const std::string& dir) {
  SL_CHECK(o.utterances >= 2, "speech: --utterances ", o.utterances, " must be >= 2");
  SL_CHECK(o.test_utterances >= 1 && o.test_utterances < o.utterances,
           "speech: ", o.test_utterances, " test utterances of ", o.utterances,
           "; expected 1 .. utterances - 1");
  SL_CHECK(o.num_features >= 1 && o.num_features <= 221, "speech: num_features ", o.num_features,
           " outside [1, 221]");
  utterance_spec(o, 0);  // checks the word range
  const std::string settings = settings_string(o);
  const uint64_t key = fnv1a(settings.data(), settings.size());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  SpeechCorpus c;
  c.cache_path = (std::filesystem::path(dir) / ("speech-" + std::string(hex) + ".bin")).string();
  // True when a valid cache was read into c; else records why a cache present was not used.
  auto read_cache = [&] {
    if (!std::filesystem::exists(c.cache_path)) return false;
    std::string why;
    if (decode_cache(read_file(c.cache_path), key, settings, o.num_features, c, why)) {
      if (static_cast<int64_t>(c.texts.size()) == o.utterances) {
        c.from_cache = true;
        c.rebuilt_because.clear();
        return true;
      }
      why = "holds " + std::to_string(c.texts.size()) + " utterances";
    }
    c.spectrograms.clear();
    c.texts.clear();
    c.rebuilt_because = why;
    return false;
  };
  if (read_cache()) return c;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SL_CHECK_IO(std::filesystem::is_directory(dir), "speech: cannot create the data folder '", dir,
              "'", ec ? ": " + ec.message() : "");
  FolderLock lock(dir);
  if (read_cache()) return c;  // written by the process this one waited for
  // espeak-ng present? One clear error before starting the workers.
  SL_CHECK_IO(run_quiet({o.espeak, "--version"}, o.espeak + " --version") == 0, "speech: '",
              o.espeak, " --version' failed: install the Debian package espeak-ng");

  const auto t0 = std::chrono::steady_clock::now();
  const int64_t n = o.utterances;
  std::vector<Wav> wavs(static_cast<size_t>(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  const int64_t workers =
      std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, 8);
  auto work = [&](int64_t wk) {
    for (int64_t i = wk; i < n; i += workers) {
      try {
        const std::string path =
            (std::filesystem::path(dir) /
             (".synth-" + std::to_string(::getpid()) + "-" + std::to_string(i) + ".wav"))
                .string();
        wavs[i] = synthesize(utterance_spec(o, i), o.espeak, path);
      } catch (...) {
        errors[i] = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int64_t wk = 1; wk < workers; ++wk) threads.emplace_back(work, wk);
  work(0);
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (int64_t i = 0; i < n; ++i) {
    c.texts.push_back(utterance_spec(o, i).text);
    c.spectrograms.push_back(log_spectrogram(wavs[i], o.num_features));
  }
  c.synthesis_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  serialize::write_file_atomically(c.cache_path, encode_cache(c, key, settings));
  return c;
}

SpeechBatch pad_utterances(const SpeechCorpus& c, int64_t begin, int64_t end) {
  const int64_t total = static_cast<int64_t>(c.texts.size());
  SL_CHECK(0 <= begin && begin < end && end <= total, "speech: utterances [", begin, ", ", end,
           ") outside [0, ", total, ") or empty");
  const int64_t n = end - begin, f = c.spectrograms[begin].size(0);
  int64_t tmax = 0, smax = 0;
  std::vector<std::vector<int64_t>> labels;
  for (int64_t i = begin; i < end; ++i) {
    tmax = std::max(tmax, c.spectrograms[i].size(1));
    labels.push_back(encode_transcript(c.texts[i]));
    smax = std::max<int64_t>(smax, static_cast<int64_t>(labels.back().size()));
  }
  SpeechBatch b{zeros({n, 1, f, tmax}), empty({n}, {.dtype = DType::i64}),
                zeros({n, smax}, {.dtype = DType::i64}), empty({n}, {.dtype = DType::i64})};
  float* sp = b.spect.data_ptr<float>();
  int64_t* lp = b.lengths.data_ptr<int64_t>();
  int64_t* tp = b.targets.data_ptr<int64_t>();
  int64_t* tl = b.target_lengths.data_ptr<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    const Tensor& s = c.spectrograms[begin + k];
    const int64_t t = s.size(1);
    const float* src = s.data_ptr<float>();
    for (int64_t j = 0; j < f; ++j) {
      std::copy(src + j * t, src + (j + 1) * t, sp + (k * f + j) * tmax);
    }
    lp[k] = t;
    tl[k] = static_cast<int64_t>(labels[k].size());
    std::copy(labels[k].begin(), labels[k].end(), tp + k * smax);
  }
  return b;
}

}  // namespace sl::train
