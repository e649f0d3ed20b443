"""What every layer reports into: per-process metric tallies and structured logs (ops/ serves them)."""
