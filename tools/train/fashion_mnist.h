// Fashion-MNIST (and MNIST) from IDX files, gzip-compressed or not, as the Debian package
// dataset-fashion-mnist installs them under /usr/share/datasets/fashion-mnist.
#pragma once

#include <string>

#include <shardlight/shardlight.h>

namespace sl::train {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

/// One split: images [N, 28*28] float32, normalised to zero mean and unit variance with the
/// training set's statistics; labels [N] int64 in 0..9.
struct ImageSplit {
  Tensor images;
  Tensor labels;
};

struct FashionMnist {
  ImageSplit train;
  ImageSplit test;
};

/// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`. Throws IOError naming the
/// file when one is missing or malformed (wrong magic number, truncated, counts that differ).
FashionMnist load_fashion_mnist(const std::string& dir = kFashionMnistDir);

}  // namespace sl::train
