#include "fashion_mnist.h"

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sl::train {
namespace {

// The training set's pixel mean and standard deviation (of x / 255), the usual constants.
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;

/// The whole (decompressed) content of `path` or `path.gz`; gzread also reads plain files.
std::vector<unsigned char> read_maybe_gz(const std::string& dir, const std::string& stem) {
  std::string path = dir + "/" + stem;
  if (!std::filesystem::exists(path)) path += ".gz";
  SL_CHECK_IO(std::filesystem::exists(path), "fashion-mnist: neither ", dir, "/", stem,
              " nor its .gz exists (on Debian: apt-get install dataset-fashion-mnist)");
  gzFile f = gzopen(path.c_str(), "rb");
  SL_CHECK_IO(f != nullptr, "fashion-mnist: cannot open ", path);
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  int err = 0;
  std::string msg = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  SL_CHECK_IO(n == 0, "fashion-mnist: reading ", path, " failed: ", msg);
  return out;
}

uint32_t be32(const std::vector<unsigned char>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

ImageSplit load_split(const std::string& dir, const std::string& prefix) {
  std::string img_name = prefix + "-images-idx3-ubyte";
  std::string lbl_name = prefix + "-labels-idx1-ubyte";
  auto img = read_maybe_gz(dir, img_name);
  auto lbl = read_maybe_gz(dir, lbl_name);
  SL_CHECK_IO(img.size() >= 16 && be32(img, 0) == 0x803, "fashion-mnist: ", img_name,
              " is not an IDX3 ubyte file (magic ", img.size() >= 4 ? be32(img, 0) : 0,
              ", expected 2051)");
  SL_CHECK_IO(lbl.size() >= 8 && be32(lbl, 0) == 0x801, "fashion-mnist: ", lbl_name,
              " is not an IDX1 ubyte file");
  const int64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  const int64_t pixels = rows * cols;
  SL_CHECK_IO(static_cast<int64_t>(img.size()) == 16 + n * pixels, "fashion-mnist: ", img_name,
              " holds ", img.size() - 16, " pixel bytes, expected ", n, " x ", rows, " x ", cols);
  SL_CHECK_IO(be32(lbl, 4) == n && static_cast<int64_t>(lbl.size()) == 8 + n,
              "fashion-mnist: ", lbl_name, " has ", be32(lbl, 4), " labels for ", n, " images");

  ImageSplit s;
  s.images = empty({n, pixels});
  s.labels = empty({n}, {.dtype = DType::i64});
  float* x = s.images.data_ptr<float>();
  int64_t* y = s.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n * pixels; ++i) {
    x[i] = (static_cast<float>(img[16 + i]) / 255.0f - kMean) / kStd;
  }
  for (int64_t i = 0; i < n; ++i) {
    y[i] = lbl[8 + i];
    SL_CHECK_IO(y[i] < 10, "fashion-mnist: ", lbl_name, " label ", y[i], " at ", i,
                " is not in 0..9");
  }
  return s;
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& dir) {
  return FashionMnist{load_split(dir, "train"), load_split(dir, "t10k")};
}

}  // namespace sl::train
