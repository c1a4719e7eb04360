// Placeholder until the schedules layer has sources.
