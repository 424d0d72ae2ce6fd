// placeholder: tests for models/resnet (being written)
