// Placeholder until the actors layer has sources.
