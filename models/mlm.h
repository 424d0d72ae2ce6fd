// Masked-language-model inputs as BERT's pre-training makes them (Devlin et al. 2018, section
// 3.1): each position that is not a special token is chosen with probability mask_prob; a chosen
// position becomes [MASK] with probability 0.8, a uniformly random token of the vocabulary with
// 0.1, and stays unchanged with 0.1, and its label is the original id; every other label is
// ignore_index (-100, what nn::functional::cross_entropy skips). Hugging Face's
// DataCollatorForLanguageModeling does the same draws.
//
// Note [MLM row keys]
// The draws of a row come from a small counter-free generator (splitmix64) started from that
// row's key, and the trainer keys a row by (seed, epoch, example index) with mlm_row_key. So an
// example's mask depends neither on the batch it lands in nor on the rank that holds it: a run
// resumed from a checkpoint, or spread over another number of ranks, masks every example exactly
// as the uninterrupted single-process run (dynamic masking: a new mask each epoch). A row in which
// no position was chosen (likely only for short rows) gets its eligible position with the
// smallest draw chosen, so no row, and no batch, is left without a label (the mean loss over zero
// labels would be NaN).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace sl::models {

struct MlmMaskingOptions {
  double mask_prob = 0.15;          ///< chance that an eligible position is chosen
  double mask_token_prob = 0.8;     ///< chance that a chosen position becomes mask_id
  double random_token_prob = 0.1;   ///< chance that it becomes a random id (else it is kept)
  int64_t mask_id = -1;             ///< the [MASK] token's id, in [0, vocab_size)
  int64_t vocab_size = 0;           ///< random ids are drawn from [0, vocab_size)
  int64_t ignore_index = -100;      ///< the label of a position that is not predicted
  std::vector<int64_t> never_mask;  ///< ids never chosen: [CLS], [SEP], [PAD]
};

struct MlmBatch {
  Tensor input_ids;  ///< int64 [B, L] on the CPU: the ids with chosen positions replaced
  Tensor labels;  ///< int64 [B, L] on the CPU: original ids at chosen positions, else ignore_index
};

/// The key of example `example` in `epoch` of a run seeded with `seed` (Note [MLM row keys]).
uint64_t mlm_row_key(uint64_t seed, int64_t epoch, int64_t example);

/// Masks the rows of `ids` (int64 [B, L] on the CPU, values in [0, vocab_size)) as the file
/// comment says, row b drawing from row_keys[b]. Throws DTypeError / ShapeError / DeviceError for
/// other ids, ValueError when row_keys has not B entries, for probabilities outside [0, 1] or
/// mask_token_prob + random_token_prob > 1, a mask_id outside [0, vocab_size), or an id of `ids`
/// outside [0, vocab_size) (naming the row, the position and the id).
MlmBatch mask_for_mlm(const Tensor& ids, std::span<const uint64_t> row_keys,
                      const MlmMaskingOptions& opts);

}  // namespace sl::models
