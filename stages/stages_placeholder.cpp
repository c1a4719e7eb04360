// Placeholder until the stages layer has sources.
