#!/tmp/hfvenv/bin/python
"""Regenerates the reference fixtures of Shardlight's WordPiece tokenizer from Hugging Face's
slow BertTokenizer.

    /tmp/hfvenv/bin/python tools/gen_tokenizer_fixtures.py [--out tests/fixtures/models]

Environment: CPython 3.11 (unicodedata 14.0.0, the version of models/unicode_tables.inc, which
this script checks) with transformers==4.30.2 (pip install transformers==4.30.2; torch is not
needed). No network: the vocabulary is built here.

Writes
    tokenizer_vocab.txt   the vocabulary (one token per line, id = line number): the special
                          tokens, ASCII letters/digits/punctuation with their ## forms, English
                          words and ## pieces, accented Latin, Greek, Cyrillic (both cases),
                          CJK, kana, Hangul syllables and jamo, an emoji, ...
    tokenizer.json        {"unicode_version", "vocab_size",
                           "cases": [{"text", "lower": R, "cased": R}],
                           "pairs": [{"a", "b", "max_len", "lower": E, "cased": E}],
                           "singles": [{"a", "max_len", "lower": E, "cased": E}]}
      R = {"words":  HF's own tokenize() with WordPiece replaced by the identity, i.e. the
                     words after the lower-casing pass, the special-token split and
                     BasicTokenizer (so a small vocabulary's [UNK]s cannot hide a difference),
           "tokens": tokenize(text), "ids": encode(text) (with [CLS]/[SEP]),
           "decode": decode(ids), "decode_skip": decode(ids, skip_special_tokens=True),
           "decode_raw": decode(ids, clean_up_tokenization_spaces=False)}
      E = tokenizer(a[, b], max_length=max_len, truncation=True, padding="max_length")
          as {"input_ids", "token_type_ids", "attention_mask"}.
"lower" is BertTokenizer.from_pretrained(dir, do_lower_case=True), "cased" the same with
do_lower_case=False. Each case also has, with only "words" and "tokens", the other options:
"cased_strip" (do_lower_case=False, strip_accents=True), "lower_keep_accents"
(do_lower_case=True, strip_accents=False) and "no_cjk_split" (tokenize_chinese_chars=False). from_pretrained (not the bare constructor) registers the special tokens as
no-split tokens, so they are cut out of text anywhere, as bert-base-uncased behaves.
The "cases" are hand-written tricky strings followed by random ones drawn (seed 0) from a pool
of characters that exercises every branch (marks, controls, spaces, CJK, special tokens).
"""
import argparse
import json
import os
import random
import re
import sys
import tempfile
import unicodedata

import transformers
from transformers import BertTokenizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_vocab():
    v = list(SPECIALS)
    seen = set(v)

    def add(*toks):
        for t in toks:
            if t not in seen:
                seen.add(t)
                v.append(t)

    for c in "abcdefghijklmnopqrstuvwxyz0123456789":
        add(c, "##" + c)
    for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        add(c)
    for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~":
        add(c)
    add(*"the a an and of to in is it you he she we they this that with for on at by from".split())
    add(*"hello world un ##aff ##able play ##ing ##ed ##s ##er run ##ning ##n super".split())
    add(*"Hello World The Paris paris cafe café naive resume strasse straße istanbul".split())
    add(*"don ' t re m s ve n ##t long ##word ##long".split())
    add(*"##ca ##li ##fr ##ag ##il ##is ##tic ##ex ##pi ##al ##id ##o ##us".split())
    # Accented Latin (both cases), German, Turkish, Vietnamese.
    for c in "éèêëáàâäãåçñöóòôõüúùûíìîïýÿßøæœ" + "ÉÈÊËÁÀÂÄÃÅÇÑÖÓÒÔÕÜÚÙÛÍÌÎÏÝØÆŒ" + "İıǅǆ":
        add(c, "##" + c)
    add("i\u0307", "##i\u0307", "\u0307", "##\u0307")
    # Greek and Cyrillic.
    for c in "αβγδεζηθικλμνξοπρσςτυφχψωάέήίόύώ" + "ΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩ":
        add(c, "##" + c)
    for c in "абвгдежзийклмнопрстуфхцчшщъыьэюя" + "АБВГДЕЖЗИЙКЛМНОПРСТУФХЦЧШЩЪЫЬЭЮЯ":
        add(c, "##" + c)
    add("οδος", "москва", "привет", "МОСКВА", "Привет", "ελληνικα")
    # CJK ideographs (one token each after the CJK split), kana, Hangul.
    for c in "中文字符控制日本語汉你好世界豈":
        add(c)
    for c in "のテキストです":
        add(c, "##" + c)
    add("한국어", "텍스트", "한", "##국", "##어")
    for c in "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165\u1110\u1166\u1109\u1173":
        add(c, "##" + c)
    add("😀", "##😀", "👍", "##🏽", "fi", "ﬁ", "ｆ", "##ｕ", "##ｌ", "ⅻ", "Ⅻ", "k")
    return v


TRICKY = [
    "Hello, World!",
    "unaffable playing played",
    "Héllo Wörld café naïve résumé CAFÉ",
    "e\u0301 vs \u00e9 and \u0301leading mark",
    "  multiple   spaces\t\ttabs\nnew\nlines\r\nend  ",
    "",
    "   \t\n  ",
    "中文字符混合English控制",
    "日本語のテキストです",
    "한국어 텍스트 한국어",
    "ΟΔΟΣ ΣΑΣ Ελληνικά σς",
    "МОСКВА Привет мир",
    "Straße STRASSE straße",
    "İstanbul ıi İI i\u0307",
    "emoji 😀👍🏽 family 👨\u200d👩\u200d👧 flag 🇫🇷",
    "a\x00b\x01c\u200bd\ufffde\x7ff\x85g",
    "[CLS] hello [SEP] world [MASK] [PAD] [UNK]",
    "hello[SEP]world",
    "[[SEP]] [SEP][SEP]",
    "[cls] [Cls] [sep]",
    " [CL\x00S] ",
    "supercalifragilisticexpialidocious",
    "a" * 100,
    "a" * 101,
    "b" * 99 + "é",
    "unknown ☃ snowman ∑",
    "don't you're I'm it's we've",
    "...!?,;: --- ((x))",
    "$100 ^caret `tick` 3.14 1,000",
    "x\u2028y\u2029z\u00a0w\u3000v\u1680u",
    "ﬁ ligature ＦＵＬＬ Ⅻ \u212a elvin \u2126",
    "ǅemal ǄEMAL",
    "豈 \U00020000 \U0002F800 compatibility",
    "Tiếng Việt có dấu",
    "हिन्दी भाषा",
    "العَرَبِيَّة",
    "עִבְרִית",
    "a\U0001D16D\u0301\U0001D165 \U0001D160 \u0f73",
    "\u00bfQu\u00e9? \u00a1S\u00ed! \u201cquoted\u201d \u2014 dash \u00ab\u00bb",
    "the the the a an",
]


def random_cases(n, seed=0):
    rng = random.Random(seed)
    pool = list("abcXYZ ,.!'-") + ["é", "É", "Σ", "ς", "İ", "ß", "中", "字", "の", "한",
                                     "\u0301", "\u0308", "\u0f73", "\U0001D16D", "\U0001D165",
                                     "\t", "\n", "\r", "\x00", "\x07", "\u200b", "\ufffd",
                                     "\u00a0", "\u2028", "\u3000", "😀", "\u1e9e", "\u0345",
                                     "[SEP]", "[MASK]", "[", "]", "##", "\U000E0001", "\u0378"]
    out = []
    for _ in range(n):
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(0, 24))))
    return out


def result(tok, text):
    real_wp = tok.wordpiece_tokenizer.tokenize
    tok.wordpiece_tokenizer.tokenize = lambda t: [t]
    words = tok.tokenize(text)
    tok.wordpiece_tokenizer.tokenize = real_wp
    ids = tok.encode(text)
    return {
        "words": words,
        "tokens": tok.tokenize(text),
        "ids": ids,
        "decode": tok.decode(ids),
        "decode_skip": tok.decode(ids, skip_special_tokens=True),
        "decode_raw": tok.decode(ids, clean_up_tokenization_spaces=False),
    }


def encoding(tok, a, b, max_len):
    args = (a,) if b is None else (a, b)
    e = tok(*args, max_length=max_len, truncation=True, padding="max_length")
    return {k: list(e[k]) for k in ("input_ids", "token_type_ids", "attention_mask")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/fixtures/models")
    args = ap.parse_args()
    assert transformers.__version__ == "4.30.2", transformers.__version__
    inc = open(os.path.join(os.path.dirname(__file__), "..", "models", "unicode_tables.inc")).read()
    table_version = re.search(r'kUnicodeVersion = "([0-9.]+)"', inc).group(1)
    assert table_version == unicodedata.unidata_version, (table_version,
                                                          unicodedata.unidata_version)

    vocab = build_vocab()
    os.makedirs(args.out, exist_ok=True)
    vocab_path = os.path.join(args.out, "tokenizer_vocab.txt")
    with open(vocab_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))
    toks = {"lower": BertTokenizer.from_pretrained(tmp, do_lower_case=True),
            "cased": BertTokenizer.from_pretrained(tmp, do_lower_case=False)}
    more = {"cased_strip": dict(do_lower_case=False, strip_accents=True),
            "lower_keep_accents": dict(do_lower_case=True, strip_accents=False),
            "no_cjk_split": dict(do_lower_case=True, tokenize_chinese_chars=False)}
    more = {k: BertTokenizer.from_pretrained(tmp, **kw) for k, kw in more.items()}
    for t in list(toks.values()) + list(more.values()):
        assert sorted(t.unique_no_split_tokens) == sorted(SPECIALS)

    texts = TRICKY + random_cases(120)
    cases = [dict(text=s, **{k: result(t, s) for k, t in toks.items()}) for s in texts]
    for c in cases:
        for k, t in more.items():
            r = result(t, c["text"])
            c[k] = {"words": r["words"], "tokens": r["tokens"]}
    pair_texts = [("Hello, World!", "unaffable playing"),
                  ("the a an and of to in is it", "you"),
                  ("x", "the a an and of to in is it you he she"),
                  ("Héllo Wörld café", "中文字符"),
                  ("one two three", "four five six"),
                  ("", ""),
                  ("[CLS] hello", "world [SEP]")]
    pairs, singles = [], []
    for a, b in pair_texts:
        for max_len in (3, 5, 8, 12, 32):
            pairs.append(dict(a=a, b=b, max_len=max_len,
                              **{k: encoding(t, a, b, max_len) for k, t in toks.items()}))
        for max_len in (3, 6, 32):
            singles.append(dict(a=a, max_len=max_len,
                                **{k: encoding(t, a, None, max_len) for k, t in toks.items()}))
    doc = {"unicode_version": unicodedata.unidata_version, "vocab_size": len(vocab),
           "cases": cases, "pairs": pairs, "singles": singles}
    path = os.path.join(args.out, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print("wrote %s (%d tokens) and %s (%d cases, %d pairs, %d singles, %d bytes)"
          % (vocab_path, len(vocab), path, len(cases), len(pairs), len(singles),
             os.path.getsize(path)))


if __name__ == "__main__":
    main()
