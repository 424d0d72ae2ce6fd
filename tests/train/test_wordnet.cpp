// The WordNet gloss reader of the BERT job (tools/train/wordnet.h): a small database in WordNet's
// format, its malformed variants, and, where the Debian package is installed, the real one.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/testing.h"
#include "wordnet.h"

using namespace sl;

namespace {

struct WordNetDir {
  std::string root;
  WordNetDir() {
    root =
        (std::filesystem::temp_directory_path() / ("sl_test_wordnet_" + std::to_string(::getpid())))
            .string();
    std::filesystem::create_directories(root);
    // License lines (two leading spaces), then synsets; trailing spaces as in the real files.
    write("noun",
          "  1 This software and database is being provided to you, the LICENSEE, by  \n"
          "  2 Princeton University under the following license.  \n"
          "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 ~ 00002137 n 0000 ~ 04424418 n 0000 | "
          "that which is perceived or known or inferred to have its own distinct existence  \n");
    write("verb",
          "  1 license\n"
          "00001740 29 v 04 breathe 0 take_a_breath 0 respire 0 suspire 3 001 * 00005041 v 0000 "
          "02 + 02 00 + 08 00 | draw air into, and expel out of, the lungs; \"I can breathe "
          "better\"  \n");
    write("adj",
          "00002312 00 a 02 abaxial 0 dorsal(a) 4 000 | facing away from the axis of an organ  \n");
    write("adv", "00516492 02 r 01 wrongfully 0 000 | in an unjust or unfair manner  \n");
  }
  ~WordNetDir() { std::filesystem::remove_all(root); }
  void write(const std::string& part, const std::string& text) const {
    std::ofstream(root + "/data." + part) << text;
  }
};

}  // namespace

TEST_CASE("wordnet glosses: one text per synset, words then gloss, in the files' order") {
  WordNetDir d;
  auto g = train::load_wordnet_glosses(d.root);
  REQUIRE(g.size() == 4);
  CHECK(g[0] ==
        "entity: that which is perceived or known or inferred to have its own distinct existence");
  CHECK(g[1] ==
        "breathe, take a breath, respire, suspire: draw air into, and expel out of, the lungs; "
        "\"I can breathe better\"");
  CHECK(g[2] == "abaxial, dorsal: facing away from the axis of an organ");  // marker "(a)" dropped
  CHECK(g[3] == "wrongfully: in an unjust or unfair manner");
  // the same synsets with their parts of speech (the file each came from)
  auto s = train::load_wordnet_synsets(d.root);
  REQUIRE(s.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(s[i].part == i);
    CHECK(s[i].words + ": " + s[i].gloss == g[i]);
  }
  CHECK(s[1].words == "breathe, take a breath, respire, suspire");
}

TEST_CASE("wordnet glosses: missing files and malformed lines are IOErrors naming them") {
  WordNetDir d;
  std::filesystem::remove(d.root + "/data.adv");
  const std::string missing = "wordnet: cannot open " + d.root + "/data.adv";
  SL_CHECK_THROWS(train::load_wordnet_glosses(d.root), IOError, missing.c_str());
  d.write("adv", "00516492 02 r 01 wrongfully 0 000 in an unjust manner\n");
  SL_CHECK_THROWS(train::load_wordnet_glosses(d.root), IOError,
                  "data.adv line 1: no ' | ' before a gloss");
  d.write("adv", "00516492 02 r zz wrongfully 0 000 | in an unjust manner\n");
  SL_CHECK_THROWS(train::load_wordnet_glosses(d.root), IOError,
                  "data.adv line 1: word count 'zz' is not hex >= 1");
  d.write("adv", "  1 license\n00516492 02 r 03 wrongfully 0 | in an unjust manner\n");
  SL_CHECK_THROWS(train::load_wordnet_glosses(d.root), IOError,
                  "data.adv line 2: the word count says 3 words, found 1");
}

TEST_CASE("wordnet glosses: the installed WordNet 3.0 has 117659 synsets" *
          sl::testing::skip_when(!std::filesystem::exists(std::string(train::kWordNetDir) +
                                                          "/data.noun"),
                                 "the installed WordNet", "the wordnet-base package is absent")) {
  // 82115 + 13767 + 18156 + 3621 synset lines: `grep -vc '^  '` over data.{noun,verb,adj,adv}.
  auto g = train::load_wordnet_glosses();
  CHECK(g.size() == 117659);
  CHECK(g.front().rfind("entity: that which is perceived", 0) == 0);
  CHECK(g.back().rfind("wrongfully: in an unjust or unfair manner", 0) == 0);
}
