// Shardlight's umbrella header: everything a program needs, as <shardlight/shardlight.h>.
#pragma once

#include "sl_config.h"

#include "core/allocator.h"
#include "core/creation.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/random.h"
#include "core/scalar.h"
#include "core/shape.h"
#include "core/tensor.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/reduce.h"
#include "autograd/ops/attention.h"
#include "autograd/ops/conv.h"
#include "autograd/ops/dropout.h"
#include "autograd/ops/norm.h"
#include "autograd/ops/pool.h"
#include "autograd/ops/rnn.h"

#include "nn/activation.h"
#include "nn/containers.h"
#include "nn/init.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/checkpoint.h"
#include "nn/data.h"

#include "dist/process_group.h"
#include "dist/work.h"
