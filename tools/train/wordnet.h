// WordNet's glosses as a text corpus (built-in data for the BERT job): the Debian package
// wordnet-base installs the WordNet 3.0 database under /usr/share/wordnet.
//
// Each of data.noun, data.verb, data.adj and data.adv starts with license lines that begin with
// two spaces; every other line is one synset (wndb(5WN)):
//   synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] p_cnt ... | gloss
// w_cnt is two hex digits; words use '_' for spaces, and adjectives may end in a syntactic marker
// "(a)", "(p)" or "(ip)". The gloss is a definition, often followed by example sentences in
// double quotes, separated by "; ".
#pragma once

#include <string>
#include <vector>

namespace sl::train {

inline constexpr const char* kWordNetDir = "/usr/share/wordnet";

/// One synset: its part of speech, its words and its gloss.
struct WordNetSynset {
  int part = 0;       ///< 0 noun, 1 verb, 2 adjective, 3 adverb (the file it came from)
  std::string words;  ///< the synset's words joined by ", " (spaces for '_', markers dropped)
  std::string gloss;  ///< the text after " | ", trailing spaces removed
};

/// The four parts of speech in WordNetSynset::part's order.
inline constexpr const char* kWordNetParts[4] = {"noun", "verb", "adj", "adv"};

/// Every synset of data.noun, data.verb, data.adj, data.adv, in that order. Throws as
/// load_wordnet_glosses.
std::vector<WordNetSynset> load_wordnet_synsets(const std::string& dir = kWordNetDir);

/// One text per synset, "<words>: <gloss>" with the synset's words joined by ", " (spaces for
/// '_', markers dropped), e.g. "breathe, take a breath, respire, suspire: draw air into, and expel
/// out of, the lungs; ...", in the order of data.noun, data.verb, data.adj, data.adv. Throws
/// IOError naming the file when one of the four is missing, and the file and line for a line that
/// is not a synset (no " | ", a word count that is not hex, fewer fields than it says).
std::vector<std::string> load_wordnet_glosses(const std::string& dir = kWordNetDir);

}  // namespace sl::train
