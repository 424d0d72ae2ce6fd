// placeholder: bert (being written)
