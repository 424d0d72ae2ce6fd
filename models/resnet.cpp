// placeholder: resnet (being written)
