// placeholder: deepspeech2 (being written)
