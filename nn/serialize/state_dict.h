// State dicts: ordered name -> tensor maps, and "sections" (tensors + JSON metadata) that
// optimizers, schedulers, models and trainers use to save and restore their state without the
// checkpoint code knowing their types.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "nn/serialize/json.h"

namespace sl::serialize {

/// String -> string metadata (safetensors "__metadata__"), in insertion order.
using Metadata = std::vector<std::pair<std::string, std::string>>;

/// An insertion-ordered map from names to tensors (like PyTorch's OrderedDict state_dict).
class StateDict {
 public:
  using Item = std::pair<std::string, Tensor>;

  StateDict() = default;
  StateDict(std::initializer_list<Item> items);

  /// Adds a new entry; throws ValueError when the name exists or the tensor is undefined.
  void insert(std::string name, Tensor t);
  /// Adds or replaces (keeping the original position).
  void set(std::string name, Tensor t);
  bool contains(std::string_view name) const;
  /// Throws ValueError "state_dict: no tensor named 'x'".
  const Tensor& at(std::string_view name) const;
  /// Null when absent.
  const Tensor* find(std::string_view name) const;
  /// Removes an entry; false when absent.
  bool erase(std::string_view name);

  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const;
  const std::vector<Item>& items() const { return items_; }
  std::vector<Item>::const_iterator begin() const { return items_.begin(); }
  std::vector<Item>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

/// Copies the entries of one ordered name -> tensor map into another type of map: any type
/// with insert(name, tensor) and range-for over (name, tensor) pairs, e.g. between nn::StateDict
/// (Module::state_dict()) and serialize::StateDict (checkpoint sections). Tensors are shared.
template <class To, class From>
To convert_state_dict(const From& from) {
  To out;
  for (const auto& [name, t] : from) out.insert(name, t);
  return out;
}

/// What load_into found: keys expected but absent, keys present but not expected, and keys
/// whose shapes differ ("name: expected [2, 3], got [3, 2]").
struct LoadReport {
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
  std::vector<std::string> mismatched;
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  /// One line per problem kind, e.g. "missing keys: a, b; unexpected keys: c".
  std::string str() const;
};

/// Copies each tensor of `src` into the destination tensor of the same name in `dst` (values
/// converted to the destination's dtype and device, in place, under no-grad). Tensors with a
/// different shape are skipped and reported. strict: throws ValueError listing every problem
/// before copying anything; otherwise copies what matches and returns the report.
LoadReport load_into(const std::vector<std::pair<std::string, Tensor>>& dst, const StateDict& src,
                     bool strict = true);

/// A named unit of saved state: tensors plus JSON metadata (hyperparameters, counters, ...).
struct Section {
  StateDict tensors;
  Json meta;
};

/// GeneratorState as JSON {"seed": s, "offset": o} (as decimal strings: u64 does not fit JSON's
/// safe integer range in other readers) and back. from_json throws ValueError when malformed.
Json rng_state_to_json(const GeneratorState& s);
GeneratorState rng_state_from_json(const Json& j);

}  // namespace sl::serialize
