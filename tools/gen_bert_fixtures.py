#!/usr/bin/env python3
"""Regenerates tests/fixtures/models/bert.safetensors: Hugging Face BERT references for
models/bert.{h,cpp} (tests/models/test_bert.cpp).

    /tmp/hfvenv/bin/python tools/gen_bert_fixtures.py [--out tests/fixtures/models]

Environment: Python 3 with torch 1.13 (CPU), transformers 4.30.2 and safetensors, e.g.
    python3 -m venv --system-site-packages /tmp/hfvenv     # Debian's python3-torch 1.13
    /tmp/hfvenv/bin/pip install transformers==4.30.2 safetensors
The names the C++ model must reproduce are those of transformers 4.30 (its BertEmbeddings still
keeps `position_ids` in the state dict; later versions make it non-persistent).

The tiny configuration (TINY below, repeated in the C++ test): vocab 99, hidden 32, 2 layers,
4 heads, intermediate 37, max positions 64, type vocab 2, erf GELU, layer_norm_eps 1e-12,
pad 0. Weights are HF's init with initializer_range 0.2 (instead of 0.02, so that attention is
far from uniform), then every bias and LayerNorm weight/bias is perturbed with seeded noise (HF
initialises them to 0 / 1, which would leave half the arithmetic untested). The padding row of
the word embeddings stays zero, as HF leaves it. All models run in eval mode (no dropout).

Keys (float32 unless noted):

    in.input_ids, in.token_type_ids, in.attention_mask     int64 [2, 7]: row 1 is padded
                 (mask 0, pad id 0) at its last 3 tokens; token types are mixed 0/1
    model.param.<name>      BertModel's state dict (with pooler and the int64 position_ids)
    model.out.0 / .out.1    sequence output [2, 7, 32] / pooled output [2, 32]
    model.gout.0 / .gout.1  random cotangents; model.gparam.<name>: the gradients of
                            sum(out.0 * gout.0) + sum(out.1 * gout.1)
    mlm.param.cls.predictions.{bias,transform.*}   BertForMaskedLM's head; the rest of its state
                            dict is "bert." + model.param.* without the pooler, and
                            cls.predictions.decoder.weight / .bias are the tied word embeddings /
                            cls.predictions.bias (the script asserts this composition)
    mlm.out.0, mlm.gout.0, mlm.gparam.<name>   logits [2, 7, 99] and gradients; the tied weight's
                            gradient (under bert.embeddings.word_embeddings.weight, its first
                            name) is the sum over both uses, as PyTorch accumulates it
    cls.param.classifier.{weight,bias}   BertForSequenceClassification (3 labels): the rest is
                            "bert." + model.param.*
    cls.out.0, cls.gout.0, cls.gparam.<name>   logits [2, 3] and gradients
    nomask.in.input_ids     int64 [3, 5]; nomask.out.0 / .out.1: BertModel (model.param) called
                            with input_ids alone (no token types, no mask)
    gelu_new.out.0          the sequence output of model.param's weights with hidden_act
                            "gelu_new" (the tanh approximation), same inputs as model

Metadata: safetensors "__metadata__" holds one key, "lists" (one key, because the safetensors
writer orders several in a hash map, which would make the file differ from run to run), whose
value is a sequence of sections, each a line "[<section>]" followed by one line per entry
"<name> <dtype> <d0,d1,...>":

    keys.base_mlm           state_dict() of BertForMaskedLM(BertConfig()) (= bert-base-uncased's
                            configuration), in order
    keys.tiny_model / keys.tiny_mlm / keys.tiny_cls   state_dict() of the three tiny models
    params.tiny_mlm         named_parameters() of the tiny BertForMaskedLM (the tied tensors once)
"""
import argparse
import os

import torch
from safetensors.torch import save_file
from transformers import (BertConfig, BertForMaskedLM, BertForSequenceClassification,
                          BertModel)

torch.set_num_threads(1)

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
            attention_probs_dropout_prob=0.1, max_position_embeddings=64, type_vocab_size=2,
            initializer_range=0.2, layer_norm_eps=1e-12, pad_token_id=0)


def key_lines(named):
    dt = {torch.float32: "f32", torch.int64: "i64"}
    return "\n".join(f"{k} {dt[v.dtype]} {','.join(str(s) for s in v.shape)}" for k, v in named)


def perturb(model, seed):
    """Seeded noise on every 1-d parameter (biases, LayerNorm weight and bias)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))


def backward_case(out, key, outputs, model):
    """Stores outputs, random cotangents and every named parameter's gradient."""
    total = 0
    for j, o in enumerate(outputs):
        g = torch.randn_like(o)
        out[f"{key}.out.{j}"] = o
        out[f"{key}.gout.{j}"] = g
        total = total + (o * g).sum()
    total.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        out[f"{key}.gparam.{name}"] = p.grad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "models"))
    args = ap.parse_args()
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    meta = {}
    out = {}

    # bert-base-uncased's names and shapes (BertConfig()'s defaults are that configuration).
    torch.manual_seed(0)
    meta["keys.base_mlm"] = key_lines(BertForMaskedLM(BertConfig()).state_dict().items())

    cfg = BertConfig(**TINY)
    torch.manual_seed(1)
    model = BertModel(cfg).eval()
    perturb(model, 11)
    assert float(model.embeddings.word_embeddings.weight[0].abs().max()) == 0.0

    ids = torch.randint(1, 99, (2, 7), generator=torch.Generator().manual_seed(2))
    ids[1, 4:] = 0  # padding
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]])
    types = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0, 0]])
    out["in.input_ids"], out["in.attention_mask"], out["in.token_type_ids"] = ids, mask, types

    base = {k: v.clone() for k, v in model.state_dict().items()}
    for k, v in base.items():
        out[f"model.param.{k}"] = v
    meta["keys.tiny_model"] = key_lines(model.state_dict().items())
    torch.manual_seed(3)
    r = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    backward_case(out, "model", [r.last_hidden_state, r.pooler_output], model)

    # BertForMaskedLM: the encoder's weights from `model`, a perturbed head.
    torch.manual_seed(4)
    mlm = BertForMaskedLM(cfg).eval()
    mlm.bert.load_state_dict({k: v for k, v in base.items() if not k.startswith("pooler.")},
                             strict=True)
    perturb(mlm.cls, 12)
    sd = mlm.state_dict()
    assert mlm.cls.predictions.decoder.weight is mlm.bert.embeddings.word_embeddings.weight
    assert mlm.cls.predictions.decoder.bias is mlm.cls.predictions.bias
    composed = {}
    for k, v in sd.items():
        if k.startswith("cls.predictions.") and "decoder" not in k:
            out[f"mlm.param.{k}"] = v.clone()
    for k in sd:  # the composition rule the docstring states
        if k.startswith("bert."):
            composed[k] = base[k[len("bert."):]]
        elif k == "cls.predictions.decoder.weight":
            composed[k] = base["embeddings.word_embeddings.weight"]
        elif k == "cls.predictions.decoder.bias":
            composed[k] = out["mlm.param.cls.predictions.bias"]
        else:
            composed[k] = out[f"mlm.param.{k}"]
        assert torch.equal(composed[k], sd[k]), k
    meta["keys.tiny_mlm"] = key_lines(sd.items())
    meta["params.tiny_mlm"] = key_lines(mlm.named_parameters())
    torch.manual_seed(5)
    logits = mlm(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    backward_case(out, "mlm", [logits], mlm)

    # BertForSequenceClassification with 3 labels: the whole BertModel from `model`.
    torch.manual_seed(6)
    cls = BertForSequenceClassification(BertConfig(num_labels=3, **TINY)).eval()
    cls.bert.load_state_dict(base, strict=True)
    perturb(cls.classifier, 13)
    for k, v in cls.state_dict().items():
        if k.startswith("classifier."):
            out[f"cls.param.{k}"] = v.clone()
        else:
            assert torch.equal(v, base[k[len("bert."):]]), k
    meta["keys.tiny_cls"] = key_lines(cls.state_dict().items())
    torch.manual_seed(7)
    logits = cls(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
    backward_case(out, "cls", [logits], cls)

    # No token types, no mask: BertModel's one-tensor call.
    with torch.no_grad():
        ids2 = torch.randint(0, 99, (3, 5), generator=torch.Generator().manual_seed(8))
        r = model(input_ids=ids2)
        out["nomask.in.input_ids"] = ids2
        out["nomask.out.0"], out["nomask.out.1"] = r.last_hidden_state, r.pooler_output

        # The tanh GELU ("gelu_new") on the same weights.
        tanh_model = BertModel(BertConfig(**{**TINY, "hidden_act": "gelu_new"})).eval()
        tanh_model.load_state_dict(base, strict=True)
        out["gelu_new.out.0"] = tanh_model(input_ids=ids, attention_mask=mask,
                                           token_type_ids=types).last_hidden_state

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "bert.safetensors")
    lists = "\n".join(f"[{name}]\n{text}" for name, text in meta.items())
    save_file({k: v.detach().contiguous() for k, v in out.items()}, path, metadata={"lists": lists})
    print(f"wrote {path}: {len(out)} tensors, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
