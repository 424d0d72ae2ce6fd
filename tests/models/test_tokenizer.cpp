// placeholder: tests for models/tokenizer (being written)
