// Greedy (best-path) CTC decoding and the edit distance that scores it: what a speech model's
// user needs to turn CTC outputs (e.g. DeepSpeech2's logits) into label sequences and to count
// character errors.
//
// Greedy decoding takes the argmax class at every step, collapses runs of the same class into
// one, then drops the blank: "AA_AB__B" -> "AAB" (blank "_"), as deepspeech.pytorch's
// GreedyDecoder. It is the most probable path's labels, not the most probable labelling (which
// would need a beam search), and what deepspeech.pytorch reports its WER/CER with by default.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace sl::models {

/// Label sequences of a batch: out[b] for sample b, blanks and repeats removed.
using LabelSequences = std::vector<std::vector<int64_t>>;

/// Greedy CTC decoding of scores [T, B, C] (logits or log-probabilities: only the argmax over C
/// matters; any floating dtype, any device) using steps t < lengths[b] of sample b (lengths:
/// int64 [B], each in [0, T]). Ties go to the lowest class index (the first maximum). Returns B
/// sequences of class indices != blank. Throws ShapeError (scores not 3-d, lengths not [B]),
/// DTypeError (scores not floating, lengths not int64), ValueError (a length outside [0, T], a
/// blank outside [0, C)).
LabelSequences ctc_greedy_decode(const Tensor& scores, const Tensor& lengths, int64_t blank = 0);

/// Levenshtein distance between a and b: the fewest insertions, deletions and substitutions (each
/// costing 1) that turn a into b. Symmetric; 0 iff a == b; at most max(|a|, |b|).
int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Character error rate of hypotheses against references: the sum of edit distances divided by
/// the sum of reference lengths (deepspeech.pytorch's corpus-level CER). May exceed 1 (long
/// hypotheses). Throws ValueError when the counts differ or every reference is empty.
double character_error_rate(const LabelSequences& hypotheses, const LabelSequences& references);

}  // namespace sl::models
