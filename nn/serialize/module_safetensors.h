// A Module's state dict to and from one safetensors file, in one call, with tied weights handled
// as Hugging Face handles them.
//
// Note [Tied weights in safetensors]
// A tied tensor (one TensorImpl's memory under several state-dict names, e.g. BertForMaskedLM's
// cls.predictions.decoder.weight = bert.embeddings.word_embeddings.weight) cannot be stored
// shared in a safetensors file, so it is written once. save_safetensors keeps the name that sorts
// first (byte order) and drops the others, recording each dropped name in the metadata as
// "dropped" -> "kept" unless the caller's metadata already has that key: exactly what
// safetensors.torch.save_model does (_remove_duplicate_names: `sorted(names)[0]`). For BERT this
// also matches transformers' save_pretrained(safe_serialization=True), which drops the names in
// _tied_weights_keys (both decoder names). load_safetensors takes the alias structure from the
// module, not from the file: a name absent from the file is not missing when another name of the
// same tensor is present (whichever name the writer kept); several names of one tensor in a
// file (older Shardlight checkpoints hold both) must carry equal values. Only exact aliases
// (same storage, offset, sizes, strides and dtype, numel > 0) count as tied; overlapping but
// different views are written separately.
#pragma once

#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/serialize/state_dict.h"

namespace sl::nn {

/// The groups of names that hold one tensor (Note [Tied weights in safetensors]), each group in
/// the dict's order, groups ordered by their first name's position; names held once are in none.
std::vector<std::vector<std::string>> tied_names(const StateDict& dict);

/// Writes module.state_dict() (parameters and persistent buffers, any device and dtype the format
/// holds) to `path` atomically (serialize::save_safetensors), each tied tensor once under its
/// byte-order-first name, with `metadata` plus one "dropped" -> "kept" entry per dropped alias
/// (Note [Tied weights in safetensors]). transformers' from_pretrained (4.30) refuses a file
/// without {"format": "pt"} in its metadata: pass that entry for files meant for it (checked once
/// by hand: such a file of BertForMaskedLM loads there with nothing missing, same logits).
/// Throws IOError when the file cannot be written (a file already at `path` is left as it was).
void save_safetensors(const Module& module, const std::string& path,
                      const serialize::Metadata& metadata = {});

/// Whether load_safetensors converts a file dtype that differs from the module's.
enum class LoadDType {
  exact,    ///< a differing dtype is a DTypeError
  convert,  ///< values are converted to the module tensor's dtype (as load_state_dict does)
};

/// Loads the safetensors file at `path` into module's parameters and persistent buffers by name,
/// in place (Note [Parameter identity]; values land on each tensor's device and dtype), tied
/// names resolved as Note [Tied weights in safetensors] says. Returns the same report as
/// load_state_dict: missing_keys (the module's names the file lacks, aliases of a loaded tensor
/// excluded) and unexpected_keys (the file's names the module lacks); a shape mismatch throws,
/// strict or not (as load_state_dict and PyTorch's load_state_dict). Throws, before
/// changing anything (the file is validated and every tensor read into host memory first, so the
/// peak memory is the file's size above the model's):
///   IOError    the file is missing, unreadable or not valid safetensors (names the file);
///   ShapeError a key's shape differs (names the key, the file and both shapes);
///   DTypeError a key's dtype differs under LoadDType::exact (names the key, the file, both
///   dtypes); ValueError strict and some key is missing or unexpected (lists them), or a file holds
///   two
///              names of one tied tensor with different values.
LoadResult load_safetensors(Module& module, const std::string& path, bool strict = true,
                            LoadDType dtypes = LoadDType::exact);

}  // namespace sl::nn
