#include "dist/flat_strategy.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/ops/copy.h"
#include "core/ops/elementwise.h"
#include "core/ops/view.h"
#include "core/profiler.h"
#include "dist/strategy_impl.h"

namespace sl::dist {

// ---- BucketTracker --------------------------------------------------------------------------

BucketTracker::BucketTracker(const FlatLayout& layout) : layout_(layout) {
  reset();
}

void BucketTracker::reset() {
  pending_.assign(layout_.buckets().size(), 0);
  for (size_t b = 0; b < layout_.buckets().size(); ++b) {
    pending_[b] = static_cast<int>(layout_.buckets()[b].params.size());
  }
  seen_.assign(layout_.params().size(), false);
  next_launch_ = 0;
  started_ = false;
}

std::vector<int> BucketTracker::mark_ready(int param) {
  SL_ASSERT(!seen_[static_cast<size_t>(param)]);
  seen_[static_cast<size_t>(param)] = true;
  started_ = true;
  pending_[static_cast<size_t>(layout_.slots()[static_cast<size_t>(param)].bucket)] -= 1;
  std::vector<int> out;
  while (next_launch_ < static_cast<int>(pending_.size()) &&
         pending_[static_cast<size_t>(next_launch_)] == 0) {
    out.push_back(next_launch_++);
  }
  return out;
}

std::vector<int> BucketTracker::flush() {
  std::vector<int> out;
  if (!started_) return out;
  while (next_launch_ < static_cast<int>(pending_.size())) out.push_back(next_launch_++);
  return out;
}

// ---- FlatStrategy ---------------------------------------------------------------------------

namespace {

TensorList trainable(const std::vector<std::pair<std::string, Tensor>>& named) {
  TensorList ps;
  for (const auto& [n, p] : named) ps.push_back(p);
  return ps;
}

}  // namespace

FlatStrategy::FlatStrategy(StrategyKind kind, std::shared_ptr<nn::Module> model,
                           optim::Optimizer& opt, StrategyOptions opts, ProcessGroupPtr group)
    : Strategy(kind, std::move(model), opt, std::move(opts), std::move(group)),
      comm_live_(std::make_shared<std::atomic<int64_t>>(0)),
      comm_peak_(std::make_shared<std::atomic<int64_t>>(0)) {
  for (const auto& [n, p] : named_params_) {
    SL_CHECK_DEVICE(p.device().kind == group_->device_kind(), name(), ": parameter '", n,
                    "' is on ", p.device(), " but the ", group_->backend(), " group works on ",
                    device_kind_name(group_->device_kind()), " tensors");
  }
  flat_ = std::make_unique<FlatBuffers>(trainable(named_params_), world_size(),
                                        opts_.bucket_cap_bytes, opts_.first_bucket_cap_bytes);
  tracker_holder_ = std::make_unique<BucketTracker>(flat_->layout());
  tracker_ = tracker_holder_.get();
  has_grad_.assign(flat_->params().size(), 0);
  broadcast_state();
  const TensorList& ps = flat_->params();
  if (kind_ == StrategyKind::zero2) {
    staging_.resize(flat_->layout().buckets().size());
    for (size_t i = 0; i < ps.size(); ++i) {
      int idx = static_cast<int>(i);
      ps[i].set_grad(Tensor());
      hook_ids_.push_back(ps[i].register_hook([this, idx](const Tensor& g) {
        on_grad(idx, g);
        return Tensor();  // consumed: nothing is accumulated into .grad()
      }));
    }
  } else {
    flat_->make_grad_buffers();
    for (size_t i = 0; i < ps.size(); ++i) {
      int idx = static_cast<int>(i);
      hook_ids_.push_back(ps[i].register_post_accumulate_grad_hook(
          [this, idx](const Tensor&) { on_grad_accumulated(idx); }));
    }
  }
  if (kind_ != StrategyKind::ddp) {
    grad_shards_ = flat_->make_shard_buffers();
    shard_written_.assign(flat_->layout().buckets().size(), false);
    // Lamb's per-parameter norms: one blocking sum over the group (Note in sharded_optimizer.h);
    // offloaded, they travel to the group's device and back
    auto all_reduce_sum = [this](const Tensor& t) {
      if (world_size() == 1) return;
      if (t.device().kind == group_->device_kind()) {
        group_->allreduce(t, ReduceOp::sum)->wait();
        return;
      }
      Tensor d = ops::to_device(t, flat_->device(), true);
      group_->allreduce(d, ReduceOp::sum)->wait();
      ops::copy_(t, d);
    };
    std::optional<Device> state_device;
    if (opts_.offload_optimizer) {
      SL_CHECK(!flat_->device().is_cpu(), name(),
               ": offload_optimizer moves the optimizer state from the GPU to the host, but the "
               "parameters are on ",
               flat_->device(), " already");
      state_device = kCPU;
    }
    sharded_ = std::make_unique<ShardedOptimizer>(
        *flat_, rank(), opt_, optimizer_index(opt_, named_params_), all_reduce_sum, state_device);
  }
}

FlatStrategy::~FlatStrategy() {
  try {
    drain();
  } catch (...) {
    // a failed collective was already reported by whoever waited for it
  }
  const TensorList& ps = flat_->params();
  for (size_t i = 0; i < ps.size() && i < hook_ids_.size(); ++i) {
    if (kind_ == StrategyKind::zero2) {
      ps[i].remove_hook(hook_ids_[i]);
    } else {
      ps[i].remove_post_accumulate_grad_hook(hook_ids_[i]);
    }
  }
}

void FlatStrategy::broadcast_state() {
  if (world_size() == 1) return;
  std::vector<WorkPtr> works;
  for (int g = 0; g < flat_->num_groups(); ++g) {
    works.push_back(group_->broadcast(flat_->param_buffer(g), 0));
  }
  for (const auto& [n, p] : module().named_parameters()) {
    if (!p.requires_grad() && p.is_contiguous()) works.push_back(group_->broadcast(p, 0));
  }
  wait_all(works);
  broadcast_buffers();
  if (sharded_) sharded_->refresh_master();
}

void FlatStrategy::broadcast_buffers() {
  if (world_size() == 1) return;
  std::vector<WorkPtr> works;
  std::vector<std::pair<Tensor, Tensor>> copies;  // non-contiguous buffer -> contiguous temp
  NoGradGuard no_grad;
  for (const auto& [n, b] : module().named_buffers()) {
    if (b.is_contiguous()) {
      works.push_back(group_->broadcast(b, 0));
    } else {
      Tensor c = ops::contiguous(b, true);
      works.push_back(group_->broadcast(c, 0));
      copies.emplace_back(b, c);
    }
  }
  wait_all(works);
  for (auto& [b, c] : copies) ops::copy_(b, c);
}

Tensor FlatStrategy::forward(const TensorList& inputs, const ForwardFn& fn) {
  // As DDP with broadcast_buffers: every rank starts the forward from rank 0's buffers.
  if (GradMode::is_enabled()) broadcast_buffers();
  return fn(*model_, inputs);
}

void FlatStrategy::refuse_create_graph(int param) const {
  detail::throw_error<AutogradError>(
      name(), ": parameter '", named_params_[static_cast<size_t>(param)].first,
      "' received a gradient with a graph (a backward with create_graph): the gradients are "
      "reduced across ranks as values, so that graph would be lost. For a gradient penalty take "
      "sl::grad(..., create_graph=true) w.r.t. the inputs and run a plain backward of the total "
      "loss");
}

void FlatStrategy::on_grad_accumulated(int param) {
  // The optimizer's zero_grad(set_to_none) may have dropped the view, so autograd stored a
  // fresh gradient: it is the whole gradient, so it replaces the view's contents.
  has_grad_[static_cast<size_t>(param)] = 1;
  Tensor p = flat_->params()[static_cast<size_t>(param)];
  if (p.grad().requires_grad()) {
    // dropped first: p -> .grad() -> its graph -> p's AccumulateGrad -> p is a reference cycle
    p.set_grad(Tensor());
    refuse_create_graph(param);
  }
  Tensor view = flat_->grad_view(param);
  const Tensor& g = p.grad();
  if (!g.is_same_storage(view) || g.storage_offset() != view.storage_offset()) {
    NoGradGuard ng;
    ops::copy_(view, g);
    p.set_grad(view);
  }
  if (no_sync_) return;  // accumulate locally; the last micro-batch communicates the sum
  if (tracker_->seen(param)) end_round();
  for (int b : tracker_->mark_ready(param)) launch(b);
}

void FlatStrategy::on_grad(int param, const Tensor& grad) {
  if (grad.requires_grad()) refuse_create_graph(param);  // consumed before .grad(): no cycle
  has_grad_[static_cast<size_t>(param)] = 1;
  if (tracker_->seen(param)) {  // a new backward without backward(): finish the old round
    end_round();
    drain();
  }
  NoGradGuard ng;
  const FlatLayout& L = flat_->layout();
  const ParamSlot& s = L.slots()[static_cast<size_t>(param)];
  const Bucket& bk = L.buckets()[static_cast<size_t>(s.bucket)];
  Tensor& st = staging_[static_cast<size_t>(s.bucket)];
  if (!st.defined()) {
    // in the dtype the bucket travels in: the gradient is rounded to it here, once
    st = comm_buffer(bk.padded_numel, comm_dtype(bk.group));
    ops::fill_(st, 0);
  }
  ops::copy_(ops::narrow(st, 0, s.offset - bk.offset, s.numel), ops::reshape(grad, {s.numel}));
  for (int b : tracker_->mark_ready(param)) launch(b);
}

DType FlatStrategy::comm_dtype(int group) const {
  return opts_.reduce_dtype.value_or(flat_->layout().groups()[static_cast<size_t>(group)].dtype);
}

Tensor FlatStrategy::comm_buffer(int64_t n, DType dt) {
  Tensor t = ops::empty({n}, dt, flat_->device());
  const auto bytes = static_cast<int64_t>(t.nbytes());
  int64_t now = comm_live_->fetch_add(bytes) + bytes;
  int64_t peak = comm_peak_->load();
  while (now > peak && !comm_peak_->compare_exchange_weak(peak, now)) {
  }
  return t;
}

void FlatStrategy::release_comm_bytes(int64_t n) const {
  comm_live_->fetch_sub(n);
}

void FlatStrategy::finish(Pending& p) {
  if (!p.temp.defined()) return;
  NoGradGuard ng;
  if (p.add) {
    ops::binary_(BinaryOp::add, p.dest, p.temp);
  } else {
    ops::copy_(p.dest, p.temp);  // widened back from the wire dtype
  }
  p.temp = Tensor();
  release_comm_bytes(p.counted_bytes);
}

void FlatStrategy::reap_finished() {
  for (Pending& p : pending_) {
    if (!p.temp.defined()) continue;
    if (!p.work->is_completed()) break;  // keep launch order: the rest waits for drain()
    p.work->wait();                      // rethrows a failed collective's error
    finish(p);
  }
}

void FlatStrategy::launch(int bucket) {
  reap_finished();  // the copies of buckets already reduced are not needed any more
  const FlatLayout& L = flat_->layout();
  const Bucket& bk = L.buckets()[static_cast<size_t>(bucket)];
  size_t bi = static_cast<size_t>(bucket);
  const DType kept = L.groups()[static_cast<size_t>(bk.group)].dtype;
  const DType wire = comm_dtype(bk.group);
  const bool convert = wire != kept;
  NoGradGuard ng;
  // Note [Gradient communication dtype]: cast (rounds), divide by the world size in the wire
  // dtype, then sum; the kept dtype averages in place.
  const ReduceOp op = convert ? ReduceOp::sum : ReduceOp::avg;
  auto scale = [&](const Tensor& t) {
    if (convert && world_size() > 1) ops::binary_(BinaryOp::div, t, Scalar(world_size()));
  };
  if (kind_ == StrategyKind::ddp) {
    Tensor grads = flat_->bucket_view(flat_->grad_buffer(bk.group), bucket);
    if (!convert) {
      pending_.push_back({bucket, group_->allreduce(grads, op), Tensor(), Tensor()});
      return;
    }
    Tensor c = comm_buffer(bk.padded_numel, wire);
    ops::copy_(c, grads);
    scale(c);
    pending_.push_back(
        {bucket, group_->allreduce(c, op), c, grads, false, static_cast<int64_t>(c.nbytes())});
    return;
  }
  Tensor shard = flat_->shard_slice_view(grad_shards_[static_cast<size_t>(bk.group)], bucket);
  // zero2 accumulation (the shard already holds an earlier micro-batch's values) or another wire
  // dtype: the collective writes a temp that drain() adds to or copies into the shard.
  const bool accumulate = kind_ == StrategyKind::zero2 && shard_written_[bi];
  shard_written_[bi] = true;
  Pending p{bucket, nullptr, Tensor(), Tensor()};
  Tensor out = shard;
  if (accumulate || convert) {
    p.temp = comm_buffer(bk.shard_numel, wire);
    p.dest = shard;
    p.add = accumulate;
    p.counted_bytes = static_cast<int64_t>(p.temp.nbytes());
    out = p.temp;
  }
  Tensor in;
  if (kind_ == StrategyKind::zero1) {
    in = flat_->bucket_view(flat_->grad_buffer(bk.group), bucket);
    if (convert) {
      Tensor c = comm_buffer(bk.padded_numel, wire);
      ops::copy_(c, in);
      in = c;
    }
  } else {
    in = staging_[bi];    // already in the wire dtype
    if (!in.defined()) {  // no parameter of this bucket got a gradient in this micro-batch
      in = comm_buffer(bk.padded_numel, wire);
      ops::fill_(in, 0);
    }
    staging_[bi] = Tensor();  // the collective holds the last reference; freed when it is done
  }
  scale(in);
  WorkPtr w = group_->reduce_scatter(out, in, op);
  if (kind_ == StrategyKind::zero2 || convert) {  // a counted staging buffer or copy
    w->on_complete(
        [live = comm_live_, n = static_cast<int64_t>(in.nbytes())] { live->fetch_sub(n); });
  }
  p.work = std::move(w);
  pending_.push_back(std::move(p));
}

void FlatStrategy::end_round() {
  if (!no_sync_ || kind_ == StrategyKind::zero2) {
    for (int b : tracker_->flush()) launch(b);
  }
  tracker_->reset();
}

void FlatStrategy::drain() {
  std::vector<Pending> pending;
  pending.swap(pending_);
  for (Pending& p : pending) p.work->wait();
  for (Pending& p : pending) finish(p);
}

void FlatStrategy::backward(const Tensor& loss) {
  // Buckets an earlier micro-batch launched (ddp/zero1 without no_sync) are still being
  // reduced from the gradient buffer this backward accumulates into: wait for them first. Their
  // collectives are not ordered before this backward's kernels otherwise (on a GPU only
  // Work::wait() orders them, Note [NCCL stream ordering]; on MPI the communication thread
  // reads the buffer while this thread writes it). Nothing is pending in the usual loop, where
  // step() or zero_grad() drained already.
  drain();
  Strategy::backward(loss);
  end_round();
  // zero2 keeps no gradient buffer between micro-batches: finish this one's reduce-scatters
  // (their staging buffers are freed) before the next backward starts.
  if (kind_ == StrategyKind::zero2) drain();
}

void FlatStrategy::sync_gradients() {
  if (!no_sync_) {
    for (int b : tracker_->flush()) launch(b);
  }
  tracker_->reset();
  drain();
}

TensorList FlatStrategy::owned_gradients() {
  if (kind_ == StrategyKind::ddp) {
    TensorList gs;
    for (int g = 0; g < flat_->num_groups(); ++g) gs.push_back(flat_->grad_buffer(g));
    return gs;
  }
  return grad_shards_;
}

void FlatStrategy::update_parameters(const std::vector<bool>& skip) {
  if (kind_ == StrategyKind::ddp) {
    // every rank holds the averaged full gradient; the optimizer skips a parameter whose
    // gradient is undefined, so the views of those no rank computed are hidden meanwhile
    const TensorList& ps = flat_->params();
    std::vector<std::pair<Tensor, Tensor>> hidden;
    for (size_t i = 0; i < skip.size(); ++i) {
      if (!skip[i]) continue;
      hidden.emplace_back(ps[i], ps[i].grad());
      ps[i].set_grad(Tensor());
    }
    auto restore = [&] {
      for (auto& [p, g] : hidden) p.set_grad(g);
    };
    try {
      opt_.step();
    } catch (...) {
      restore();
      throw;
    }
    restore();
    return;
  }
  {
    profiler::Scope scope("optimizer (own shard)", profiler::Category::phase);
    sharded_->step(grad_shards_, skip);
  }
  profiler::Scope scope("allgather parameters", profiler::Category::phase);
  // Rebuild the full parameters: each bucket from every rank's updated slice (in place).
  std::vector<WorkPtr> works;
  for (size_t b = 0; b < flat_->layout().buckets().size(); ++b) {
    int bi = static_cast<int>(b);
    const Tensor& buf = flat_->param_buffer(flat_->layout().buckets()[b].group);
    works.push_back(
        group_->allgather(flat_->bucket_view(buf, bi), flat_->slice_view(buf, bi, rank())));
  }
  wait_all(works);
}

void FlatStrategy::zero_grad() {
  drain();
  tracker_->reset();
  if (flat_->has_grad_buffers()) flat_->zero_grads();
  for (Tensor& g : grad_shards_) ops::fill_(g, 0);
  std::fill(shard_written_.begin(), shard_written_.end(), false);
  std::fill(has_grad_.begin(), has_grad_.end(), 0);
}

MemoryReport FlatStrategy::memory_report() const {
  MemoryReport m;
  m.strategy = name();
  m.world_size = world_size();
  for (const auto& [n, p] : named_params_) m.numel += p.numel();
  m.param_bytes = flat_->param_bytes();
  if (kind_ == StrategyKind::ddp) {
    m.grad_bytes = flat_->grad_bytes();
    m.comm_buffer_bytes = comm_peak_->load();  // reduced-dtype copies (reduce_dtype only)
    for (size_t g = 0; g < opt_.num_param_groups(); ++g) {
      for (size_t i = 0; i < opt_.params(g).size(); ++i) {
        const optim::ParamState& s = opt_.state(g, i);
        m.optimizer_state_bytes += tensor_bytes(s.state_tensors());
        m.master_weight_bytes += tensor_bytes({s.master});
      }
    }
  } else if (sharded_->offloaded()) {
    m.offloaded_bytes =
        sharded_->state_bytes() + sharded_->master_bytes() + sharded_->working_copy_bytes();
  } else {
    m.optimizer_state_bytes = sharded_->state_bytes();
    m.master_weight_bytes = sharded_->master_bytes();
  }
  if (kind_ != StrategyKind::ddp) {
    if (kind_ == StrategyKind::zero1) {
      m.grad_bytes = flat_->grad_bytes();
      // the reduce-scatter destination, and reduced-dtype copies (reduce_dtype only)
      m.comm_buffer_bytes = tensor_bytes(grad_shards_) + comm_peak_->load();
    } else {
      m.grad_bytes = tensor_bytes(grad_shards_);
      m.comm_buffer_bytes = comm_peak_->load();  // staging, accumulation temps
    }
  }
  m.allocator_peak_bytes = memory_stats(flat_->device()).peak_bytes;
  return m;
}

// ---- factory --------------------------------------------------------------------------------

std::vector<std::pair<size_t, size_t>> optimizer_index(
    const optim::Optimizer& opt, const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [n, p] : named) {
    bool found = false;
    for (size_t g = 0; g < opt.num_param_groups() && !found; ++g) {
      const TensorList& ps = opt.params(g);
      for (size_t i = 0; i < ps.size(); ++i) {
        if (ps[i].is_same(p)) {
          out.emplace_back(g, i);
          found = true;
          break;
        }
      }
    }
    SL_CHECK(found, "strategy: parameter '", n, "' is not in the optimizer");
  }
  return out;
}

std::unique_ptr<Strategy> make_flat_strategy(StrategyKind kind, std::shared_ptr<nn::Module> model,
                                             optim::Optimizer& opt, StrategyOptions opts) {
  ProcessGroupPtr group = opts.group;
  if (!group) {
    // CUDA parameters talk over NCCL (one group per device, bootstrapped over the world group).
    Device dev = kCPU;
    for (const auto& [n, p] : model->named_parameters()) {
      dev = p.device();
      break;
    }
    if (dev.is_cuda()) {
      static std::mutex mu;
      static std::map<int, ProcessGroupPtr> nccl_groups;
      std::lock_guard<std::mutex> lock(mu);
      ProcessGroupPtr& g = nccl_groups[dev.index];
      if (!g) g = make_nccl_group(world(), dev);
      group = g;
    } else {
      group = world();
    }
  }
  return std::make_unique<FlatStrategy>(kind, std::move(model), opt, std::move(opts),
                                        std::move(group));
}

}  // namespace sl::dist
