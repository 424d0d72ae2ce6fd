// WordNet gloss reading (Note [WordNet data files]).
#include "models/wordnet.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace sl::models {

std::vector<std::string> read_wordnet_data_file(const std::string& path) {
  constexpr const char* kWho = "read_wordnet_data_file";
  std::ifstream f(path, std::ios::binary);
  SL_CHECK_IO(f.good(), kWho, ": cannot open '", path, "': ", std::strerror(errno),
              " (WordNet's data files come with the Debian package wordnet-base)");
  std::vector<std::string> glosses;
  std::string line;
  for (int64_t number = 1; std::getline(f, line); ++number) {
    if (line.starts_with("  ")) continue;  // license header
    size_t bar = line.find(" | ");
    SL_CHECK_IO(bar != std::string::npos, kWho, ": '", path, "' line ", number,
                " is not a synset line (no \" | \" before the gloss): '", line.substr(0, 60), "'");
    size_t end = line.find_last_not_of(" \r");
    std::string gloss = end > bar + 2 ? line.substr(bar + 3, end - (bar + 2)) : std::string();
    if (!gloss.empty()) glosses.push_back(std::move(gloss));
  }
  SL_CHECK_IO(!f.bad(), kWho, ": cannot read '", path, "'");
  return glosses;
}

std::vector<std::string> read_wordnet_glosses(const std::string& dir,
                                              const std::vector<std::string>& parts) {
  std::vector<std::string> all;
  for (const auto& part : parts) {
    SL_CHECK(part == "noun" || part == "verb" || part == "adj" || part == "adv",
             "read_wordnet_glosses: unknown part '", part, "' (expected noun, verb, adj or adv)");
    std::vector<std::string> g = read_wordnet_data_file(dir + "/data." + part);
    all.insert(all.end(), std::make_move_iterator(g.begin()), std::make_move_iterator(g.end()));
  }
  return all;
}

}  // namespace sl::models
