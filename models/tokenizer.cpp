// placeholder: tokenizer (being written)
