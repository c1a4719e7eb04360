// Placeholder until the transport layer has sources.
