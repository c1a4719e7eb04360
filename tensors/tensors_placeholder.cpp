// Placeholder until the tensors layer has sources.
