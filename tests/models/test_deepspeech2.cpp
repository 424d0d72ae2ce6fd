// placeholder: tests for models/deepspeech2 (being written)
