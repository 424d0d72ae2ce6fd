#!/usr/bin/env python3
"""Regenerates tests/fixtures/serialize/hf_bert_mlm/: a tiny Hugging Face BertForMaskedLM saved by
HF itself, for nn::load_safetensors (tests/serialize/test_module_safetensors.cpp).

    /tmp/hfvenv/bin/python tools/gen_hf_bert_safetensors.py [--out tests/fixtures/serialize/hf_bert_mlm]

Environment: torch 1.13 (CPU), transformers 4.30.2 and safetensors (see tools/gen_bert_fixtures.py
for the venv).

Files:
    model.safetensors   exactly what `BertForMaskedLM.save_pretrained(dir, safe_serialization=True)`
                        writes (config.json is not kept: the C++ test repeats the configuration).
                        HF drops the tied names cls.predictions.decoder.weight (= the word
                        embeddings) and cls.predictions.decoder.bias (= cls.predictions.bias): a
                        safetensors file cannot hold one tensor twice. The script asserts that.
    expected.safetensors  in.input_ids, in.token_type_ids, in.attention_mask (int64 [2, 6]; row 1
                        padded at its last 2 tokens) and out.logits (float32 [2, 6, 40]): the
                        model's logits in eval mode.

Configuration (TINY, repeated in the C++ test): vocab 40, hidden 16, 2 layers, 2 heads,
intermediate 24, max positions 16, type vocab 2, erf GELU, layer_norm_eps 1e-12, pad 0.
Weights: HF's init with initializer_range 0.2, then every parameter perturbed by seeded noise
(HF initialises biases and LayerNorm to 0 / 1, which would let a wrong mapping go unnoticed).
"""
import argparse
import os
import tempfile
import shutil

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import BertConfig, BertForMaskedLM

TINY = dict(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=24, max_position_embeddings=16, type_vocab_size=2,
            hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0, initializer_range=0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "fixtures", "serialize", "hf_bert_mlm"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(1234)
    model = BertForMaskedLM(BertConfig(**TINY)).eval()
    with torch.no_grad():
        for p in model.parameters():  # the tied tensors are listed once
            p.add_(0.1 * torch.randn_like(p))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    ids = torch.tensor([[2, 17, 5, 33, 9, 3], [2, 8, 39, 3, 0, 0]], dtype=torch.int64)
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 0, 0]], dtype=torch.int64)
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]], dtype=torch.int64)
    with torch.no_grad():
        logits = model(input_ids=ids, token_type_ids=types, attention_mask=mask).logits
    tmp = tempfile.mkdtemp()
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        shutil.copyfile(os.path.join(tmp, "model.safetensors"),
                        os.path.join(args.out, "model.safetensors"))
    finally:
        shutil.rmtree(tmp)
    with safe_open(os.path.join(args.out, "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        print("metadata:", f.metadata())
    sd = model.state_dict()
    dropped = set(sd) - keys
    assert dropped == {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}, dropped
    assert keys <= set(sd)
    save_file({"in.input_ids": ids, "in.token_type_ids": types, "in.attention_mask": mask,
               "out.logits": logits.contiguous()}, os.path.join(args.out, "expected.safetensors"))
    print(f"{len(keys)} tensors in model.safetensors; dropped {sorted(dropped)}")


if __name__ == "__main__":
    main()
