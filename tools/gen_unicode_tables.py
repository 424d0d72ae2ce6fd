#!/usr/bin/python3
"""Generates models/unicode_tables.inc: the Unicode data BERT's BasicTokenizer needs, from
Python's own unicodedata, so that the C++ tokenizer matches Hugging Face's (Python) one without
an ICU dependency.

    /usr/bin/python3 tools/gen_unicode_tables.py [--out models/unicode_tables.inc]

Any CPython 3.11 works (its unicodedata is Unicode 14.0.0, which the committed file was made
with; /usr/bin/python3 and /tmp/hfvenv/bin/python agree). Output is deterministic.

What BasicTokenizer asks of a code point (transformers' tokenization_bert.py and
tokenization_utils.py), and the table that answers it:

  kClassRuns     category class, as sorted runs: a run starts at `first` and lasts until the
                 next run. Classes: other; Zs (-> whitespace); C* (Cc Cf Cs Co Cn: dropped by
                 _clean_text, except \\t \\n \\r which the C++ treats as whitespace); P*
                 (punctuation, besides HF's ASCII ranges which the C++ tests directly); Mn
                 (dropped by _run_strip_accents), split in two: a mark whose NFD is all
                 non-starters (ccc != 0: it joins a run that canonical reordering sorts) and one
                 that contains a starter (it ends such a run). Also "space": the code points
                 str.split() splits on that survive _clean_text (U+2028, U+2029: Zl, Zp).
  kLowerRuns     str.lower() of one code point when it is one code point: runs of
                 (first, last, delta, stride): every stride-th code point from first to last
                 maps to cp + delta. HF lower-cases text one character at a time (the
                 `re.sub(... .+? ...)` pass in PreTrainedTokenizer.tokenize), so the Final_Sigma
                 rule of str.lower() never applies (this script checks lower() is idempotent).
  kLowerMulti    the code points whose str.lower() is longer (only U+0130 -> "i\\u0307").
  kStripPairs    NFD(c) with the Mn marks removed, when that is one code point other than c:
                 sorted (cp, target) pairs (greedy runs left 1175 of 1414 runs single).
  kStripMulti    ... when it is 2 or 3 code points (Indic two-part vowels, musical symbols).
                 Hangul syllables are decomposed by the algorithm of Unicode ch. 3.12 in C++
                 (this script checks it against unicodedata).
  kCombiningNonMn the combining class of the 25 non-Mn code points with ccc != 0 (Mc signs):
                 they survive accent stripping, and canonical reordering may swap them.

The script re-implements the C++ lookups in Python and checks them against unicodedata for
every code point, and the whole strip_accents algorithm on random strings of marks.
"""
import argparse
import bisect
import random
import sys
import unicodedata

N = 0x110000
OTHER, ZS, CTRL, PUNCT, MN_BRIDGE, MN_BREAK, SPACE = range(7)
CLASS_NAMES = ["kOther", "kZs", "kControl", "kPunct", "kMnBridge", "kMnBreak", "kSpace"]
S_BASE, L_BASE, V_BASE, T_BASE, L_COUNT, V_COUNT, T_COUNT = 0xAC00, 0x1100, 0x1161, 0x11A7, 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT


def is_mn(ch):
    return unicodedata.category(ch) == "Mn"


def char_class(c):
    ch = chr(c)
    cat = unicodedata.category(ch)
    if cat == "Zs":
        return ZS
    if cat[0] == "C":
        return CTRL
    if cat[0] == "P":
        return PUNCT
    if cat == "Mn":
        nfd = unicodedata.normalize("NFD", ch)
        return MN_BRIDGE if all(unicodedata.combining(x) for x in nfd) else MN_BREAK
    if ch.isspace():
        return SPACE
    return OTHER


def hf_strip(text):
    """transformers' BasicTokenizer._run_strip_accents."""
    return "".join(x for x in unicodedata.normalize("NFD", text) if not is_mn(x))


def hangul(c):
    s = c - S_BASE
    out = [L_BASE + s // (V_COUNT * T_COUNT), V_BASE + (s % (V_COUNT * T_COUNT)) // T_COUNT]
    if s % T_COUNT:
        out.append(T_BASE + s % T_COUNT)
    return out


def build():
    classes = [char_class(c) for c in range(N)]
    class_runs = []
    for c in range(N):
        if not class_runs or classes[c] != class_runs[-1][1]:
            class_runs.append((c, classes[c]))

    lower_single, lower_multi = {}, {}
    for c in range(N):
        low = chr(c).lower()
        assert low.lower() == low, hex(c)  # idempotent: HF's second lower() is a no-op
        if low != chr(c):
            if len(low) == 1:
                lower_single[c] = ord(low)
            else:
                lower_multi[c] = [ord(x) for x in low]

    strip_single, strip_multi = {}, {}
    for c in range(N):
        if classes[c] in (MN_BRIDGE, MN_BREAK) or S_BASE <= c < S_BASE + S_COUNT:
            continue
        s = hf_strip(chr(c))
        if s != chr(c):
            assert 1 <= len(s) <= 3, hex(c)
            if len(s) == 1:
                strip_single[c] = ord(s)
            else:
                strip_multi[c] = [ord(x) for x in s]
    for c in range(S_BASE, S_BASE + S_COUNT):
        assert [ord(x) for x in unicodedata.normalize("NFD", chr(c))] == hangul(c), hex(c)

    ccc_non_mn = [(c, unicodedata.combining(chr(c))) for c in range(N)
                  if unicodedata.combining(chr(c)) and not is_mn(chr(c))]
    return class_runs, lower_single, lower_multi, strip_single, strip_multi, ccc_non_mn


def runs_of(mapping, strides):
    """Greedy runs over sorted keys: (first, last, a, b) with value(cp) = a + b * (cp - first)
    for 'step' runs, or cp + delta on every stride-th cp for 'stride' runs."""
    keys = sorted(mapping)
    out = []
    i = 0
    while i < len(keys):
        best = (keys[i], keys[i], 1)
        for stride in strides:
            j = i
            while (j + 1 < len(keys) and keys[j + 1] == keys[j] + stride
                   and mapping[keys[j + 1]] - keys[j + 1] == mapping[keys[i]] - keys[i]):
                j += 1
            if keys[j] > best[1]:
                best = (keys[i], keys[j], stride)
        out.append(best)
        i = keys.index(best[1], i) + 1
    return out


# ---- the C++ lookups, re-implemented to check the tables -----------------------------------

class Tables:
    def __init__(self, class_runs, lower_runs, lower_multi, strip_pairs, strip_multi, ccc_non_mn):
        self.class_firsts = [r[0] for r in class_runs]
        self.class_vals = [r[1] for r in class_runs]
        self.lower_runs, self.lower_multi = lower_runs, lower_multi
        self.strip_pairs, self.strip_multi = strip_pairs, strip_multi
        self.strip_keys = [k for k, _ in strip_pairs]
        self.ccc = dict(ccc_non_mn)

    def cls(self, c):
        return self.class_vals[bisect.bisect_right(self.class_firsts, c) - 1]

    def lower(self, c):
        if c in self.lower_multi:
            return self.lower_multi[c]
        i = bisect.bisect_right(self.lower_runs, (c, N)) - 1
        if i >= 0:
            first, last, delta, stride = self.lower_runs[i]
            if c <= last and (c - first) % stride == 0:
                return [c + delta]
        return [c]

    def strip_one(self, c):
        if S_BASE <= c < S_BASE + S_COUNT:
            return hangul(c)
        if c in self.strip_multi:
            return self.strip_multi[c]
        i = bisect.bisect_left(self.strip_keys, c)
        if i < len(self.strip_keys) and self.strip_keys[i] == c:
            return [self.strip_pairs[i][1]]
        return [c]

    def strip(self, cps):
        """The C++ strip_accents: decompose, drop Mn, stable-sort runs of non-starters."""
        out, run_start = [], 0  # out: (cp, ccc); run_start: where the current run may begin
        for c in cps:
            k = self.cls(c)
            if k == MN_BRIDGE:
                continue
            if k == MN_BREAK:
                run_start = len(out)
                continue
            for x in self.strip_one(c):
                ccc = self.ccc.get(x, 0)
                if ccc == 0:
                    run_start = len(out) + 1
                    out.append((x, 0))
                    continue
                out.append((x, ccc))
                j = len(out) - 1  # insertion sort step (stable)
                while j > run_start and out[j - 1][1] > ccc:
                    out[j - 1], out[j] = out[j], out[j - 1]
                    j -= 1
        return [x for x, _ in out]


def check(t, classes_src):
    # str.split() separators: the C++ lists the control ones by hand (they never survive
    # _clean_text anyway) and finds the rest as kZs or kSpace.
    control_spaces = [c for c in range(N) if chr(c).isspace() and char_class(c) == CTRL]
    assert control_spaces == [9, 10, 11, 12, 13, 0x1C, 0x1D, 0x1E, 0x1F, 0x85], control_spaces
    assert all(chr(c).isspace() == (char_class(c) in (ZS, SPACE)) for c in range(N)
               if char_class(c) != CTRL)
    # Lower-casing and accent stripping never make a separator or a character _clean_text or
    # the CJK split would have handled: they run after those steps, as in HF.
    for c in range(N):
        if char_class(c) in (ZS, CTRL, SPACE):
            continue  # replaced or dropped before lower-casing
        low = t.lower(c)
        strip = t.strip([c]) if t.cls(c) not in (MN_BRIDGE, MN_BREAK) else [c]
        for x in (low if low != [c] else []) + (strip if strip != [c] else []):
            assert char_class(x) not in (ZS, CTRL, SPACE), (hex(c), hex(x))
    for c in range(N):
        assert t.cls(c) == char_class(c), hex(c)
        assert "".join(map(chr, t.lower(c))) == chr(c).lower(), hex(c)
        if t.cls(c) in (MN_BRIDGE, MN_BREAK):
            assert hf_strip(chr(c)) == "", hex(c)  # the C++ drops a whole Mn code point
        else:
            assert "".join(map(chr, t.strip([c]))) == hf_strip(chr(c)), hex(c)
    # Strings mixing starters, the non-Mn combining signs and Mn marks of both kinds.
    rng = random.Random(0)
    pool = [c for c in range(N) if unicodedata.combining(chr(c))][:400]
    pool += [c for c, _ in t.ccc.items()] * 10
    pool += [0x61, 0xE9, 0x1D160, 0x1D15E, 0x0F73, 0x0F75, 0x0344, 0x09CB, 0x1134B, 0xAC01]
    pool += [c for c in range(N) if char_class(c) == MN_BREAK][:50]
    for _ in range(200000):
        s = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
        assert "".join(map(chr, t.strip(s))) == hf_strip("".join(map(chr, s))), s


def emit(path, class_runs, lower_runs, lower_single, lower_multi, strip_pairs, strip_multi,
         ccc_non_mn):
    L = []
    w = L.append
    w("// Generated by tools/gen_unicode_tables.py from Python %d.%d's unicodedata (Unicode %s)."
      % (sys.version_info[0], sys.version_info[1], unicodedata.unidata_version))
    w("// Do not edit; see the script's docstring for what each table holds. Included by")
    w("// models/unicode_text.cpp inside namespace sl::models::unicode::tables.")
    w("")
    w('inline constexpr const char* kUnicodeVersion = "%s";' % unicodedata.unidata_version)
    w("")
    w("// (first << 3) | class: a run of one class from `first` to the next entry.")
    w("inline constexpr uint32_t kClassRuns[] = {")
    items = ["0x%x" % ((c << 3) | k) for c, k in class_runs]
    for i in range(0, len(items), 8):
        w("    " + ", ".join(items[i:i + 8]) + ",")
    w("};")
    w("")
    w("// {first, last, delta, stride}: cp in [first, last] with (cp - first) %% stride == 0")
    w("// lower-cases to cp + delta. %d code points in %d runs." % (len(lower_single),
                                                                   len(lower_runs)))
    w("inline constexpr LowerRun kLowerRuns[] = {")
    for f, l, d, s in lower_runs:
        w("    {0x%x, 0x%x, %d, %d}," % (f, l, d, s))
    w("};")
    w("")
    w("// {cp, {lower-case code points}, count}")
    w("inline constexpr MultiMap kLowerMulti[] = {")
    for c, v in sorted(lower_multi.items()):
        w("    {0x%x, {%s}, %d}," % (c, ", ".join("0x%x" % x for x in v + [0] * (3 - len(v))),
                                     len(v)))
    w("};")
    w("")
    w("// {cp, NFD(cp) without Mn marks}, sorted by cp (runs would not compress these).")
    w("inline constexpr CodePair kStripPairs[] = {")
    items = ["{0x%x, 0x%x}" % p for p in strip_pairs]
    for i in range(0, len(items), 6):
        w("    " + ", ".join(items[i:i + 6]) + ",")
    w("};")
    w("")
    w("// {cp, {NFD(cp) without Mn marks}, count}")
    w("inline constexpr MultiMap kStripMulti[] = {")
    for c, v in sorted(strip_multi.items()):
        w("    {0x%x, {%s}, %d}," % (c, ", ".join("0x%x" % x for x in v + [0] * (3 - len(v))),
                                     len(v)))
    w("};")
    w("")
    w("// {cp, canonical combining class} of the code points with ccc != 0 that are not Mn.")
    w("inline constexpr CombiningClass kCombiningNonMn[] = {")
    for c, k in ccc_non_mn:
        w("    {0x%x, %d}," % (c, k))
    w("};")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="models/unicode_tables.inc")
    args = ap.parse_args()
    class_runs, lower_single, lower_multi, strip_single, strip_multi, ccc = build()
    lower_runs = runs_of(lower_single, (1, 2))
    strip_pairs = sorted(strip_single.items())
    t = Tables(class_runs, [(f, l, lower_single[f] - f, s) for f, l, s in lower_runs],
               lower_multi, strip_pairs, strip_multi, ccc)
    check(t, class_runs)
    emit(args.out, class_runs, t.lower_runs, lower_single, lower_multi, strip_pairs, strip_multi,
         ccc)
    print("wrote %s: %d class runs, %d lower runs, %d strip pairs, %d + %d multi"
          % (args.out, len(class_runs), len(lower_runs), len(strip_pairs), len(lower_multi),
             len(strip_multi)))


if __name__ == "__main__":
    main()
