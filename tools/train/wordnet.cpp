#include "wordnet.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace sl::train {
namespace {

/// The synset line `line` (line number `lineno` of `path`).
WordNetSynset parse_synset(const std::string& line, const std::string& path, int64_t lineno,
                           int part) {
  auto bad = [&](const std::string& why) {
    return IOError("wordnet: " + path + " line " + std::to_string(lineno) + ": " + why);
  };
  const auto bar = line.find(" | ");
  if (bar == std::string::npos) throw bad("no ' | ' before a gloss");
  std::istringstream fields(line.substr(0, bar));
  std::string offset, lex_filenum, ss_type, w_cnt;
  if (!(fields >> offset >> lex_filenum >> ss_type >> w_cnt)) throw bad("fewer than 4 fields");
  size_t used = 0;
  int words = 0;
  try {
    words = std::stoi(w_cnt, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != w_cnt.size() || words < 1) throw bad("word count '" + w_cnt + "' is not hex >= 1");
  std::string text;
  for (int i = 0; i < words; ++i) {
    std::string word, lex_id;
    if (!(fields >> word >> lex_id)) {
      throw bad("the word count says " + std::to_string(words) + " words, found " +
                std::to_string(i));
    }
    if (word.back() == ')') {  // an adjective's marker: (a), (p), (ip)
      const auto open = word.rfind('(');
      if (open != std::string::npos && open > 0) word.resize(open);
    }
    for (char& c : word) c = c == '_' ? ' ' : c;
    if (i > 0) text += ", ";
    text += word;
  }
  std::string gloss = line.substr(bar + 3);
  while (!gloss.empty() && (gloss.back() == ' ' || gloss.back() == '\r')) gloss.pop_back();
  return {part, text, gloss};
}

}  // namespace

std::vector<WordNetSynset> load_wordnet_synsets(const std::string& dir) {
  std::vector<WordNetSynset> out;
  for (int part = 0; part < 4; ++part) {
    const std::string path = dir + "/data." + kWordNetParts[part];
    std::ifstream f(path);
    SL_CHECK_IO(f.good(), "wordnet: cannot open ", path,
                " (Debian: apt-get install wordnet-base, or --data-dir DIR)");
    std::string line;
    int64_t lineno = 0;
    while (std::getline(f, line)) {
      ++lineno;
      if (line.empty() || line.rfind("  ", 0) == 0) continue;  // blank or license
      out.push_back(parse_synset(line, path, lineno, part));
    }
  }
  return out;
}

std::vector<std::string> load_wordnet_glosses(const std::string& dir) {
  std::vector<std::string> out;
  for (const WordNetSynset& s : load_wordnet_synsets(dir)) out.push_back(s.words + ": " + s.gloss);
  return out;
}

}  // namespace sl::train
