// The WordNet 3.0 gloss corpus (the text our BERT masked-language-model job trains on).
//
// Note [WordNet data files]: /usr/share/wordnet/data.{noun,verb,adj,adv} (Debian package
// wordnet-base; format in WordNet's wndb(5WN) manual page). Each file starts with the license,
// every line of which begins with two spaces ("  1 This software..."); every other line is one
// synset:
//   synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id ...] p_cnt [ptr ...]
//   [frames ...] | gloss
// and the gloss (a definition, then example sentences in quotes, separated by "; ") follows
// the first " | ". Lines end with two spaces and "\n"; the gloss is returned without them.
#pragma once

#include <string>
#include <vector>

namespace sl::models {

/// Default location of the WordNet database on Debian.
inline constexpr const char* kWordNetDir = "/usr/share/wordnet";

/// The glosses of one data file, in file order (one per synset; empty glosses are skipped).
/// Throws IOError when the file cannot be opened (naming the path and the Debian package) or
/// when a synset line has no " | " (naming the path and line number).
std::vector<std::string> read_wordnet_data_file(const std::string& path);

/// The glosses of <dir>/data.<part> for each part, concatenated in the order given.
/// Throws ValueError for a part other than noun, verb, adj, adv, and read_wordnet_data_file's
/// IOErrors.
std::vector<std::string> read_wordnet_glosses(const std::string& dir = kWordNetDir,
                                              const std::vector<std::string>& parts = {
                                                  "noun", "verb", "adj", "adv"});

}  // namespace sl::models
