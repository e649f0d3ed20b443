"""What operators ask a running adslot: /metrics, /healthz and /readyz."""
