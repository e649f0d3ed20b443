"""Rate limits: ad requests per key (a token bucket, shared across nodes through Redis when configured)
and the pixel guard that keeps a flood of fires on one ad request off the ledger."""
