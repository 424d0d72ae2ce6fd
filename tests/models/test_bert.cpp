// placeholder: tests for models/bert (being written)
